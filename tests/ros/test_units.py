"""The bridge's pieces without DDS: observations equal the simulator's, safety clamps,
watchdog, message mapping, parameter files against the robot specs, launch description."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from sensor_msgs.msg import JointState

from embodied_ros.description import (
    config_file,
    deploy_nodes,
    package_dir,
    parse_remappings,
    sim_deploy_nodes,
)
from embodied_ros.messages import (
    DifferencedVelocity,
    JointIndex,
    StateError,
    joint_state_arrays,
    trajectory_message,
)
from embodied_ros.observation import (
    PushObservation,
    ReachObservation,
    RobotState,
    WalkObservation,
    floating_base_state,
    make_builder,
)
from embodied_ros.params import OUTPUTS, PARAMETERS, SAFE_MODES, ConfigError, Params
from embodied_ros.safety import (
    CommandLimiter,
    TargetLimits,
    Watchdog,
    clamp_targets,
    limit_shares,
    soft_start_targets,
    tilt_from_quat,
)
from robots import load_robot
from robots.actions import action_map_from_metadata
from robots.panda.observation import PUSH_GEOMETRY
from robots.panda.observation import push_target as robot_push_target
from sim import DomainRandomization, make_env


@contextlib.contextmanager
def _stepped(task: str, steps: int, scale: float = 1.0, **cfg):
    """Four noiseless envs of ``task`` after ``steps`` random actions in +-``scale``:
    (env, the last observation)."""
    env = make_env(task, num_envs=4, seed=3, obs_noise=False,
                   randomization=DomainRandomization(enabled=False), **cfg)
    try:
        obs = env.reset()
        gen = torch.Generator().manual_seed(1)
        for _ in range(steps):
            obs, *_ = env.step(scale * (torch.rand(4, env.action_dim, generator=gen) * 2 - 1))
        yield env, obs
    finally:
        env.close()


def test_reach_observation_is_the_simulators():
    with _stepped("panda_reach", 5) as (env, obs):
        task = env.task
        builder = ReachObservation(env.robot)
        for i in range(4):
            state = RobotState(task.joint_pos[i].numpy(), task.joint_vel[i].numpy(),
                               task.sim.qpos[i, task.finger_qpos_ids].numpy())
            built = builder.build(state, task.last_action[i].numpy(), task.target[i].numpy())
            np.testing.assert_allclose(built[0], obs[i].numpy(), atol=1e-5)


def test_push_geometry_is_the_simulated_tasks():
    # The deployment's defaults must describe the cube and table the policy trained on.
    from sim.tasks.panda_push import PandaPush
    from sim.tasks.panda_push.task import PUSH_GEOMETRY as TASK_GEOMETRY

    assert PUSH_GEOMETRY == TASK_GEOMETRY
    with _stepped("panda_push", 0) as (env, _):
        model = env.model
        cube = [i for i in range(model.ngeom) if model.geom(i).name == "cube"]
        assert len(cube) == 1
        np.testing.assert_allclose(model.geom_size[cube[0]], [PandaPush.cube_half] * 3)
        np.testing.assert_allclose(env.task.cube_pos[:, 2].numpy(),
                                   PUSH_GEOMETRY.table_top + PUSH_GEOMETRY.cube_half, atol=2e-3)


def test_push_target_geometry():
    # A cube at (0.5, 0) pushed towards +x: the target sits behind it at pushing height,
    # rises while the tcp is past the back face, and is the tcp once the goal is near.
    g = PUSH_GEOMETRY
    cube = torch.tensor([[0.5, 0.0, g.cube_half]] * 4, dtype=torch.float64)
    goal = torch.tensor([[0.65, 0.0]] * 3 + [[0.52, 0.0]], dtype=torch.float64)
    behind_x = 0.5 - (g.cube_half + g.standoff - g.lead)
    past = 0.01  # the tcp 1 cm past the back face's margin
    ee = torch.tensor([[0.3, 0.1, 0.2],  # far behind: not lifted
                       [0.5 - g.cube_half - g.back_face_margin + past, 0.0, 0.1],
                       [0.7, 0.0, 0.1],  # beyond the cube: the lift's cap
                       [0.4, 0.05, 0.3]], dtype=torch.float64)  # goal within release radius
    target = robot_push_target(ee, cube, goal)
    want = torch.tensor([[behind_x, 0.0, g.table_top + g.height],
                         [behind_x, 0.0, g.table_top + g.height + g.approach_slope * past],
                         [behind_x, 0.0, g.table_top + g.height + g.approach_lift],
                         [0.4, 0.05, 0.3]], dtype=torch.float64)
    torch.testing.assert_close(target, want, rtol=0, atol=1e-9)
    flat = robot_push_target(ee, cube, goal, lift=False)
    torch.testing.assert_close(flat[:3, 2], torch.full((3,), g.table_top + g.height,
                                                       dtype=torch.float64))


def test_push_observation_is_the_simulators():
    with _stepped("panda_push", 8, action="ee_delta", decimation=10) as (env, obs):
        task = env.task
        builder = PushObservation(env.robot)
        assert builder.obs_dim == env.obs_dim
        assert builder.terms == tuple(task.observation_functions)
        layout = [{"name": name} for name in task.observation_functions]
        builder.check_terms(layout)
        with pytest.raises(ValueError, match="the policy observes the terms"):
            builder.check_terms(layout[:-1])
        for i in range(4):
            state = RobotState(task.joint_pos[i].numpy(), task.joint_vel[i].numpy(),
                               task.sim.qpos[i, task.finger_qpos_ids].numpy(),
                               object_pos=task.cube_pos[i].numpy(),
                               object_quat_wxyz=-2.0 * task.cube_quat[i].numpy())
            built = builder.build(state, task.last_action[i].numpy(), task.goal[i].numpy())
            np.testing.assert_allclose(built[0], obs[i].numpy(), atol=1e-5)


def _push_states(task) -> list[RobotState]:
    return [RobotState(task.joint_pos[i].numpy(), task.joint_vel[i].numpy(),
                       task.sim.qpos[i, task.finger_qpos_ids].numpy(),
                       object_pos=task.cube_pos[i].numpy(),
                       object_quat_wxyz=task.cube_quat[i].numpy()) for i in range(4)]


def test_push_release_radius_travels_from_the_task_through_the_metadata_to_the_node():
    # A policy trained with the push target let go within 5 cm of the goal: with the
    # cube 4 cm from the goal the node, built from the exported metadata, observes the
    # target at the tcp as the task did; a policy whose metadata has no task settings
    # (exported before they were carried) keeps the 3 cm geometry it was trained with.
    from pathlib import Path as _Path

    from omegaconf import OmegaConf

    from embodied.export import policy_metadata

    settings = {"settings": {"release_radius": 0.05}}
    with _stepped("panda_push", 3, action="ee_delta", decimation=10,
                  task_cfg=settings) as (env, _):
        task = env.task
        task.goal[:, :2] = task.cube_pos[:, :2] + torch.tensor([0.04, 0.0], dtype=torch.float64)
        task.clear_cache()
        obs = env.observe(noise=False)
        meta = policy_metadata(OmegaConf.create({}), env, _Path("policy.pt"), {})
        assert meta["task_settings"] == {"release_radius": 0.05}
        trained = make_builder(meta["task"], env.robot, meta["task_settings"])
        older = make_builder(meta["task"], env.robot, None)
        for i, state in enumerate(_push_states(task)):
            built = trained.build(state, task.last_action[i].numpy(), task.goal[i].numpy())
            np.testing.assert_allclose(built[0], obs[i].numpy(), atol=1e-5)
            np.testing.assert_allclose(built[0, -3:], 0.0, atol=1e-6)  # the target is the tcp
            old = older.build(state, task.last_action[i].numpy(), task.goal[i].numpy())
            assert np.abs(old[0, -3:]).max() > 0.01  # 3 cm: the target still leads


def test_a_task_setting_the_bridge_does_not_build_is_refused():
    with pytest.raises(ValueError, match="trained with the task setting 'release_radius'"):
        make_builder("panda_reach", load_robot("panda"), {"release_radius": 0.05})
    with pytest.raises(ValueError, match="task setting 'standoff'"):
        make_builder("panda_push", load_robot("panda"), {"standoff": 0.02})


def test_push_actions_map_to_the_simulators_targets():
    # The node's ee_delta mapping, rebuilt from an exported policy's action metadata,
    # against the training env's own (IK, tcp bounds, velocity clamp, gripper).
    with _stepped("panda_push", 0, action="ee_delta", decimation=10) as (env, _):
        meta = env.action_map.metadata()
        node = action_map_from_metadata(meta, env.robot, env.control_dt)
        assert node.bounds is not None and node.action_dim == env.action_dim == 4
        q = env.task.joint_pos[:1].clone()
        env.action_map.reset(torch.arange(4), env.task.joint_pos)
        node.reset(torch.zeros(1, dtype=torch.long), q)
        gen = torch.Generator().manual_seed(2)
        for _ in range(40):  # full-scale actions, down into the table's bound too
            action = torch.rand(4, 4, generator=gen, dtype=torch.float64) * 2 - 1
            action[:, 2] -= 0.5
            want = env.action_map(action)[0]
            torch.testing.assert_close(node(action[:1])[0], want, rtol=0, atol=1e-12)


def test_walk_observation_is_the_simulators():
    with _stepped("go2_walk", 5, scale=0.3) as (env, obs):
        task, sim = env.task, env.task.sim
        builder = WalkObservation(env.robot)
        qa, va = task.root_qpos.start, task.root_dof.start
        for i in range(4):
            builder.reset(float(task.phase[i]))
            quat, ang, lin = floating_base_state(sim.qpos[i, qa:qa + 7].numpy(),
                                                 sim.qvel[i, va:va + 6].numpy())
            state = RobotState(task.joint_pos[i].numpy(), task.joint_vel[i].numpy(),
                               quat_wxyz=quat, ang_vel_b=ang, lin_vel_b=lin)
            built = builder.build(state, task.last_action[i].numpy(), task.commands[i].numpy())
            np.testing.assert_allclose(built[0], obs[i].numpy(), atol=1e-5)


# ------------------------------------------------------------------ safety
@pytest.fixture(scope="module")
def panda_limits():
    robot = load_robot("panda")
    return robot, TargetLimits.from_robot(robot, margin=0.02, max_step=0.25, torque_scale=1.0)


def test_targets_stay_inside_limits_with_margin(panda_limits):
    robot, limits = panda_limits
    q = robot.default_pose
    wild = q + np.array([10, -10, 10, 10, -10, 10, -10.0])
    out = clamp_targets(wild, None, robot.lower + 0.01, np.zeros(7), limits)
    assert np.all(out >= robot.lower + 0.02 - 1e-12)
    assert np.all(out <= robot.upper - 0.02 + 1e-12)


def test_target_step_and_torque_are_bounded(panda_limits):
    robot, limits = panda_limits
    q = robot.default_pose
    far = q + 1.0
    out = clamp_targets(far, q, q, np.zeros(7), limits)
    assert np.all(np.abs(out - q) <= 0.25 + 1e-12)  # per-step change
    torque = robot.kp * (out - q) - robot.kd * 0.0
    assert np.all(np.abs(torque) <= robot.effort + 1e-9)  # PD torque estimate
    assert np.any(np.abs(out - q) < 0.25 - 1e-6)  # the torque bound binds (5-7: kp vs effort)
    small = q + 0.01
    np.testing.assert_allclose(clamp_targets(small, q, q, np.zeros(7), limits), small)


def test_soft_start_ramps_from_measured_pose_to_default():
    start, default = np.array([0.5, -1.0]), np.array([0.0, 0.0])
    first, done0 = soft_start_targets(start, default, 0.0, 2.0)
    mid, _ = soft_start_targets(start, default, 1.0, 2.0)
    end, done = soft_start_targets(start, default, 2.0, 2.0)
    np.testing.assert_allclose(first, start)
    np.testing.assert_allclose(mid, 0.5 * (start + default))
    np.testing.assert_allclose(end, default)
    assert done and not done0


def test_watchdog_judges_state_age_with_hysteresis():
    dog = Watchdog(max_age=0.06, recover_s=0.04)
    assert not dog.fresh(0.0)  # nothing received yet
    for t in (10.0, 10.02, 10.04):  # fresh only after recover_s of steady state
        dog.state_received(t)
        assert dog.fresh(t + 0.001) == (t >= 10.04)
    # However many control ticks pass: only the state's age counts.
    assert all(dog.fresh(10.04 + k * 0.01) for k in range(7))
    assert not dog.fresh(10.11)  # older than 60 ms
    dog.state_received(10.12)
    assert not dog.fresh(10.121)  # one state after a trip is not enough
    dog.state_received(10.14)
    dog.state_received(10.16)
    assert dog.fresh(10.161)
    # The header stamp counts too: a state stamped 100 ms ago is stale on arrival.
    dog.state_received(10.18, stamp=10.08)
    assert dog.age(10.18) == pytest.approx(0.1) and not dog.fresh(10.18)
    dog = Watchdog(max_age=3 * 0.02, recover_s=0.0)
    dog.state_received(2 * 0.02)
    assert dog.fresh(5 * 0.02)  # exactly three periods (0.06000000000000001 s) is fresh


def test_command_limiter_bounds_velocity_and_acceleration():
    robot = load_robot("panda")
    limits = TargetLimits.from_robot(robot, margin=0.02, max_step=0.25, torque_scale=1.0)
    dt = robot.control_dt
    limiter = CommandLimiter.from_robot(robot, limits, dt)
    limiter.reset(robot.default_pose)
    rng = np.random.default_rng(0)
    wild = [robot.default_pose + rng.uniform(-3, 3, 7) for _ in range(100)]
    # jumps, a target held still (hold), a target at the position limits
    wanted = wild + [wild[-1]] * 100 + [robot.upper + 1.0] * 150
    out = np.array([robot.default_pose] + [limiter(t) for t in wanted])
    v = np.diff(out, axis=0) / dt
    a = np.diff(v, axis=0, prepend=np.zeros((1, 7))) / dt
    assert np.all(np.abs(v) <= robot.velocity + 1e-9)
    assert np.all(np.abs(a) <= robot.acceleration + 1e-6)
    assert np.all(out >= limits.lower - 1e-12) and np.all(out <= limits.upper + 1e-12)
    held = np.clip(wild[-1], limits.lower, limits.upper)
    np.testing.assert_allclose(out[200], held, atol=1e-9)  # stops at a held target
    np.testing.assert_allclose(out[-1], limits.upper, atol=1e-9)  # brakes into the limit
    # The quickest hold: braking from full speed, the targets stop at stopping_point()
    # without turning back.
    limiter.reset(robot.default_pose)
    for _ in range(30):
        limiter(robot.default_pose + 2.0)
    stop = limiter.stopping_point()
    direction = np.sign(limiter.velocity)
    braking = np.array([limiter(stop) for _ in range(30)])
    assert np.all(np.diff(braking, axis=0) * direction >= -1e-12)  # never turns back
    np.testing.assert_array_equal(braking[-1], stop)
    infinite = CommandLimiter(np.full(2, -1.0), np.ones(2), np.ones(2),
                              np.full(2, math.inf), 0.02)
    infinite.reset(np.zeros(2))  # no acceleration limit: velocity only
    np.testing.assert_allclose(infinite(np.array([0.5, -0.01])), [0.02, -0.01])


def test_limit_shares_count_missing_targets_as_steps():
    robot = load_robot("panda")
    dt, v, a = 0.05, robot.velocity, robot.acceleration
    # At rest, then speeding up at the acceleration limit, then steady: step velocities
    # 0, 1, 2, 3, 3 x a dt. The 5th target is missing from the stream: a gap of two steps.
    velocity = np.array([0.0, 1.0, 2.0, 3.0, 3.0])[:, None] * a * dt
    q = robot.default_pose + np.concatenate([np.zeros((1, 7)), np.cumsum(velocity * dt, 0)])
    stamps = np.arange(6) * dt
    keep = [0, 1, 2, 3, 5]
    used = limit_shares(stamps[keep], q[keep], robot, dt)
    assert used["targets"] == 5 and used["beyond_position_limit_rad"] == 0.0
    assert used["acceleration_share"] == pytest.approx(1.0)
    assert used["at_acceleration_limit"] == 1.0  # the two changes between single steps
    np.testing.assert_allclose(used["velocity_share"], (3 * a * dt / v).max())
    over = q[keep].copy()
    over[-1, 0] = robot.upper[0] + 0.01
    assert limit_shares(stamps[keep], over, robot, dt)["beyond_position_limit_rad"] == \
        pytest.approx(0.01)


def test_differenced_velocity():
    est = DifferencedVelocity()
    np.testing.assert_array_equal(est(np.array([1.0, 2.0]), 5.0), [0.0, 0.0])
    np.testing.assert_allclose(est(np.array([1.1, 1.9]), 5.02), [5.0, -5.0])
    np.testing.assert_allclose(est(np.array([1.3, 1.9]), 5.02), [5.0, -5.0])  # same time


def test_tilt_from_quaternion():
    assert tilt_from_quat(np.array([1.0, 0, 0, 0])) == pytest.approx(0.0)
    half = 0.5 * 0.7
    assert tilt_from_quat(np.array([math.cos(half), math.sin(half), 0, 0])) == \
        pytest.approx(0.7)
    assert tilt_from_quat(np.array([math.cos(0.9), 0, 0, math.sin(0.9)])) == \
        pytest.approx(0.0, abs=1e-7)  # yaw is not tilt


# ---------------------------------------------------------------- messages
def test_joint_states_are_mapped_by_name_and_checked():
    robot = load_robot("panda")
    joints = JointIndex(robot.ros_joint_names)
    fingers = JointIndex(list(robot.gripper.ros_names))
    names = list(reversed(robot.ros_joint_names)) + list(robot.gripper.ros_names)
    msg = JointState(name=names, position=[float(i) for i in range(9)],
                     velocity=[10.0 + i for i in range(9)])
    q, qd, finger = joint_state_arrays(msg, joints, fingers)
    np.testing.assert_array_equal(q, [6, 5, 4, 3, 2, 1, 0])
    np.testing.assert_array_equal(qd, [16, 15, 14, 13, 12, 11, 10])
    np.testing.assert_array_equal(finger, [7, 8])
    msg.position[2] = float("nan")
    with pytest.raises(StateError, match="non-finite"):
        joint_state_arrays(msg, joints, fingers)
    with pytest.raises(StateError, match="lacks joints"):
        joint_state_arrays(JointState(name=names[1:], position=[0.0] * 8, velocity=[0.0] * 8),
                           joints, fingers)
    # Positions only (sensor_msgs allows it): no velocities, for the node to estimate.
    q, qd, _ = joint_state_arrays(JointState(name=names, position=[0.0] * 9), joints, fingers)
    assert qd is None and q.shape == (7,)


def test_trajectory_is_stamped_to_start_on_receipt():
    msg = trajectory_message(["a", "b"], np.array([0.1, 0.2]), 0.05)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (0, 0)
    assert (msg.points[0].time_from_start.sec, msg.points[0].time_from_start.nanosec) == \
        (0, 50_000_000)


# ------------------------------------------------------- parameter files
@pytest.mark.parametrize("robot_name", ["panda", "go2"])
def test_parameter_file_fits_the_robot_spec(robot_name):
    data = yaml.safe_load(config_file(robot_name).read_text())
    policy = data["/**/embodied_policy"]["ros__parameters"]
    sim = data["/**/sim_robot"]["ros__parameters"]
    unknown = set(policy) - set(PARAMETERS)
    assert not unknown, f"unknown policy node parameters {unknown}"
    robot = load_robot(robot_name)
    assert policy["robot"] == sim["robot"] == robot.name
    # 0: the policy's own control period; else the robot's (policies trained at its rate)
    assert policy["control_dt"] in (0.0, pytest.approx(robot.control_dt, abs=1e-12))
    assert policy["output"] in OUTPUTS and policy["safe_mode"] in SAFE_MODES
    assert sim["command"] == policy["output"]  # the simulated robot follows that topic
    assert (policy["attitude_limit"] > 0) == robot.floating_base
    assert (policy["safe_mode"] == "damp") == robot.floating_base


@pytest.mark.parametrize("key,value,message", [
    ("trajectory_stamp", "state", "trajectory_stamp 'state'"),
    ("trajectory_horizon", 0.0, "trajectory_horizon 0.0 s must be > 0"),
    ("watchdog_recover_periods", -1.0, "watchdog_recover_periods >= 0")])
def test_parameters_are_checked(key, value, message):
    values = {**PARAMETERS, "robot": "panda", "policy_path": "p.pt", key: value}
    with pytest.raises(ConfigError, match=message):
        Params(**values).check()


# --------------------------------------------------------- launch description
def test_description_gives_one_set_of_node_arguments():
    nodes = sim_deploy_nodes("go2", "/policies/go2/policy.pt", namespace="robot1")
    policy, sim = nodes
    args = policy.ros_args()
    assert args[:3] == ["--ros-args", "-r", "__node:=embodied_policy"]
    assert "__ns:=/robot1" in args and str(config_file("go2")) in args
    assert "policy_path:=/policies/go2/policy.pt" in args and "autostart:=true" in args
    (relative,) = deploy_nodes("go2", "runs/x/export/policy.pt")
    assert Path(relative.overrides["policy_path"]).is_absolute()  # the node's cwd may differ
    assert sim.overrides["robot"] == "go2" and not sim.lifecycle and policy.lifecycle
    (real,) = deploy_nodes("go2", "p.pt", remappings="joint_states:=/lowstate/joints")
    assert real.remappings == (("joint_states", "/lowstate/joints"),)
    assert "joint_states:=/lowstate/joints" in real.ros_args()
    with pytest.raises(ValueError, match="from:=to"):
        parse_remappings("joint_states")


@pytest.mark.parametrize("name,builder", [("deploy", "deploy_nodes"),
                                          ("sim_deploy", "sim_deploy_nodes")])
def test_launch_files_build_nodes_from_the_description(name, builder):
    path = package_dir() / "launch" / f"{name}.launch.py"
    tree = ast.parse(path.read_text())
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name)}
    assert builder in called and "generate_launch_description" in {
        n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("name", ["deploy", "sim_deploy"])
def test_launch_files_run_with_launch_ros(name):
    pytest.importorskip("launch_ros", reason="launch_ros is not installable from PyPI here; "
                        "the same nodes are started from the same description by "
                        "embodied_ros.launcher in the DDS tests")
    from launch import LaunchContext
    from launch_ros.actions import Node

    path = package_dir() / "launch" / f"{name}.launch.py"
    spec = importlib.util.spec_from_file_location(f"{name}_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    context = LaunchContext()
    for entity in description.entities:
        entity.visit(context)
    nodes = [e for a in description.entities if hasattr(a, "execute")
             for e in (a.execute(context) or []) if isinstance(e, Node)]
    assert nodes and all(n.node_package == "embodied_ros" for n in nodes)
