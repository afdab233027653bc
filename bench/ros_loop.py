"""The ROS 2 bridge in closed loop: control-loop rate and jitter, state -> command
latency, and panda_reach success through ROS against the same policy in simulation.

Through ROS: ``sim_deploy`` (the policy node and the simulated Panda as two processes,
real DDS, kept on this machine: a private network namespace when possible, else
localhost discovery). Each episode sends a goal drawn from the task's target range,
deactivates the policy node, puts the simulated arm back in its default pose, activates
the node again (its velocity- and acceleration-limited command stream starts from the
measured pose, as it must after the robot moved other than by its commands; the soft
start is set to 0 s, the arm being at the default pose already) and counts success when
the tcp (ground truth) is within the task's success radius after the task's episode
length in simulated control steps (150), as the task does at an episode's end. In
simulation: the same exported policy on the batched env (``embodied eval`` settings:
observation noise and domain randomisation as in training), one episode per env.
``success_ratio`` = ROS / simulation (target >= 0.95).
Loop figures come from the nodes' own ``~/loop_stats``: the policy node's control-step
period and jitter (|period - 20 ms|, wall time) and compute time, and the simulated
robot's latency from its newest state message to each command's arrival; in
``sim_deploy`` the policy node steps on each state message, on the simulation's clock.

Jitter under load (``jitter``): the deployment as on a robot (``deploy``: the policy node on
its own 50 Hz timer on system time, the simulated Panda as the robot, both on wall
time), for JITTER_S seconds of policy control with a new goal every 2 s, in three
settings: no added load; ``BUSY`` added CPU-bound busy-loop processes (nice 0, one per
core of a 2-core machine) beside whatever else runs (the 1-minute load average is
recorded); the same load with the policy node's threads on SCHED_FIFO priority 50. Each
reports the command period at publishing and at receipt (the DDS source and reception
timestamps of each command, received in this process, which is not prioritised) and
the delivery time between them, p50/p99/max; and, from the
node's own ``~/loop_stats``, its step period, how late its control timer fired (executor
and OS scheduling), and its compute time (observation, policy, limits; torch on one
thread; the node runs one executor thread, so no other Python thread competes for the
GIL).

With the walking Go2 policy in assets/policies/go2_walk/, also: the forward distance the
simulated Go2 walks through ROS in 10 s under a 0.5 m/s ``cmd_vel`` against the same
policy on the batched env under the same command (``embodied.locomotion_eval``).

Push (``push``; an exported panda_push policy: ``--push-policy PATH``, else
assets/policies/panda_push/policy.pt if present): the policy on the batched env with its
training settings (observation noise, domain randomisation; ``embodied eval``'s), one
episode per env, and on the same starts (cube pose, goal) through ``sim_deploy``: the
simulated robot runs the task's scene at the policy's 20 Hz and publishes the cube's pose
on ``object_pose``; each episode deactivates the node, resets the arm to its default
pose, places the cube (``~/place_object``), sends the goal, activates the node (soft
start 0 s) and judges the cube after the task's 80 control steps as the task does
(centre within 5 cm of the goal, resting on the table; a cube that left the workspace
fails). The commands of every episode are checked against the robot's position,
velocity and acceleration limits. Also reported: the policy on the batched env without
noise and randomisation (nominal physics, as the simulated robot runs) from the same
starts, and in how many episodes its outcome agrees with the one through ROS. A policy
trained with ``task.deploy_limits`` (the policy node's target filters in the training
env) is evaluated in simulation with them, its own task settings; its success without
them is reported beside (``sim.without_deploy_limits``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import torch
from common import merge_sections, parser, write_result
from geometry_msgs.msg import PointStamped, PoseStamped, Twist
from omegaconf import OmegaConf
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from std_msgs.msg import Empty, String
from trajectory_msgs.msg import JointTrajectory

from embodied.envs import env_kwargs
from embodied.locomotion_eval import evaluate_velocity_tracking
from embodied.policy_io import load_policy
from embodied.rl.evaluate import evaluate
from embodied_ros.description import deploy_nodes, sim_deploy_nodes, sim_robot_node
from embodied_ros.graph import Recorder, RosGraph, private_graph
from embodied_ros.safety import limit_shares, percentiles, tilt_from_quat
from robots import load_robot
from sim import DomainRandomization, make_env
from sim.tasks.go2_walk import FALL_HEIGHT, FALL_TILT
from sim.tasks.panda_base import TABLE_TOP
from sim.tasks.panda_base.cube import CubeTask
from sim.tasks.panda_push import SUCCESS_RADIUS as PUSH_RADIUS
from sim.tasks.panda_push.task import REST_HEIGHT
from sim.tasks.panda_reach import SUCCESS_RADIUS, TARGET_HIGH, TARGET_LOW, PandaReach

POLICY = Path(__file__).resolve().parent.parent / "assets/policies/panda_reach/policy.pt"
GO2_POLICY = POLICY.parents[1] / "go2_walk" / "policy.pt"
WALK_VX, WALK_S = 0.5, 10.0  # forward command (m/s) and duration (s) of the Go2 walk
EPISODE_STEPS = round(PandaReach.episode_length_s / 0.02)  # 150 control steps of 20 ms
JITTER_S, BUSY = 30.0, 2  # seconds measured per setting; busy-loop processes added
PUSH_POLICY = POLICY.parents[1] / "panda_push" / "policy.pt"
SECTIONS = ["reach", "go2_walk", "jitter", "push"]
# The reach section's keys (it came first and fills the top level of the result).
REACH_KEYS = ["policy", "control_rate_hz", "rate_ratio_to_nominal", "jitter_ms", "compute_ms",
              "state_age_at_command_ms", "state_to_command_latency_ms",
              "latency_p50_ratio_to_control_period", "success_ros", "success_sim",
              "success_ratio", "ros", "sim"]


def in_simulation(episodes: int) -> dict:
    """Success of the exported policy on the batched env, one episode per env."""
    policy, _ = load_policy(POLICY)
    env = make_env("panda_reach", num_envs=episodes, seed=10_000)
    try:
        result = evaluate(policy, env)
    finally:
        env.close()
    return {"episodes": result["episodes"], "success_rate": result["success_rate"]}


def through_ros(episodes: int, log_dir: Path) -> dict:
    """Success and loop statistics of the same policy through the ROS deployment."""
    rng = np.random.default_rng(0)
    targets = rng.uniform(TARGET_LOW, TARGET_HIGH, size=(episodes, 3))
    with private_graph(log_dir) as g:
        safety = g.safety()
        ee = g.record(PoseStamped, "/ground_truth/ee_pose")
        policy_stats = g.record(String, "/embodied_policy/loop_stats")
        sim_stats = g.record(String, "/sim_robot/loop_stats")
        goal_pub = g.node.create_publisher(PointStamped, "/goal", 10)
        reset_pub = g.node.create_publisher(Empty, "/sim_robot/reset", 10)
        start = time.monotonic()
        _launch_without_soft_start(g, POLICY)
        g.wait_mode(safety, "policy", timeout=120.0)
        g.wait_for(lambda: goal_pub.get_subscription_count() and
                   reset_pub.get_subscription_count(), 30.0, "goal and reset subscribers")
        startup_s = time.monotonic() - start
        distances = []
        for target in targets:
            goal = _point(target)

            def reset(goal: PointStamped = goal) -> None:
                goal_pub.publish(goal)
                reset_pub.publish(Empty())

            sent = _new_episode(g, safety, reset, lambda t: len(ee.since(t)) >= 3)
            # One ground-truth pose per simulated control step: an episode is the task's
            # number of control steps (+1 for the activation in flight), however loaded
            # the CPU.
            g.wait_for(lambda sent=sent: len(ee.since(sent)) > EPISODE_STEPS, 60.0,
                       "the episode's control steps")
            p = ee.messages[-1].pose.position
            distances.append(float(np.linalg.norm(np.array([p.x, p.y, p.z]) - target)))
        g.wait_for(lambda: policy_stats.messages and sim_stats.messages, 30.0, "loop stats")
        loop = json.loads(policy_stats.messages[-1].data)
        robot = json.loads(sim_stats.messages[-1].data)
        modes = [m["mode"] for m in safety.messages]
        isolation = g.isolation
    distances = np.array(distances)
    return {"episodes": episodes, "success_rate": float((distances < SUCCESS_RADIUS).mean()),
            "final_distance_m_p50": float(np.median(distances)),
            "final_distance_m_max": float(distances.max()),
            "watchdog_trips": modes.count("watchdog"), "startup_s": round(startup_s, 1),
            "isolation": isolation, "policy_loop": loop, "sim_robot_loop": robot}


def _launch_without_soft_start(g: RosGraph, policy: Path, **overrides: Any) -> None:
    """``sim_deploy`` of ``policy`` with a soft start of 0 s (episodes start at the default
    pose already) and the policy node's parameters ``overrides``."""
    node, robot = sim_deploy_nodes("panda", str(policy))
    g.launch([replace(node, overrides={**node.overrides, "soft_start_s": 0.0, **overrides}),
              robot])


def _point(xyz: np.ndarray) -> PointStamped:
    goal = PointStamped()
    goal.header.frame_id = "panda_link0"
    goal.point.x, goal.point.y, goal.point.z = (float(v) for v in xyz)
    return goal


def _new_episode(g: RosGraph, safety: Recorder, reset: Callable[[], None],
                 ready: Callable[[float], bool]) -> float:
    """Deactivate the policy node, ``reset()`` the simulated world, wait until
    ``ready(reset time)``, activate the node; the monotonic time of the activation.

    The node's command stream starts from the measured pose again at activation, as it
    must after the robot moved other than by its commands.
    """
    assert g.transition("/embodied_policy", "deactivate")
    g.wait_for(lambda: safety.messages[-1]["mode"] == "inactive", 30.0, "the deactivation")
    time.sleep(0.1)  # the deactivation's safe command lands before the reset
    reset()
    t = time.monotonic()
    g.wait_for(lambda: ready(t), 30.0, "the reset state")
    g.wait_for(lambda: safety.messages[-1]["mode"] != "inactive" or
               g.transition("/embodied_policy", "activate"), 30.0, "the activation")
    return time.monotonic()


def push_starts(env: Any, meta: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cube position [n, 3], cube quaternion [n, 4], goal xy [n, 2]) of the episodes that
    ``evaluate(policy, env)`` runs next: drawn by a reset, then the generator is rewound."""
    state = env.rng_state()
    env.reset()
    task = env.task
    starts = (task.cube_pos.numpy().copy(), task.cube_quat.numpy().copy(),
              task.goal[:, :2].numpy().copy())
    env.set_rng_state(state)
    return starts


def _push_env(meta: dict, episodes: int, training_settings: bool,
              deploy_limits: bool | None = None) -> Any:
    """The batched env of the policy's training task config, one env per episode
    (``deploy_limits``: the node's target filters on or off; None: as in training)."""
    task_cfg = OmegaConf.create(meta["training"]["task_config"])
    kwargs = env_kwargs(task_cfg)
    if not training_settings:
        kwargs.update(obs_noise=False, randomization=DomainRandomization(enabled=False))
    if deploy_limits is not None:
        kwargs["deploy_limits"] = deploy_limits
    return make_env(str(task_cfg.name), num_envs=episodes, seed=20_000, **kwargs)


def from_starts(policy: Callable, env: Any, starts: tuple) -> np.ndarray:
    """Success [n] of one episode per env of ``env`` from the starts ``starts`` (cube
    position, quaternion, goal xy; the arm as the env's reset leaves it)."""
    pos, quat, goal = (torch.as_tensor(x, dtype=torch.float64) for x in starts)
    env.reset()
    task, sim, n = env.task, env.task.sim, env.num_envs
    ids = torch.arange(n)
    sim.qpos[:, task.cube_qpos] = torch.cat([pos, quat], dim=1)
    sim.qvel[:, task.cube_dofs] = 0.0
    task.goal[:, :2] = goal
    sim.mocap_pos[:, task.goal_mocap] = task.goal
    env.physics.forward(ids)
    task.clear_cache()
    task.after_reset(ids)
    obs = env.observe()
    success, done = torch.zeros(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)
    with torch.inference_mode():
        for _ in range(env.max_episode_steps):
            obs, _, _, _, info = env.step(policy(obs))
            if "done_ids" in info:
                first = info["done_ids"][~done[info["done_ids"]]]
                success[first] = info["final_success"][first].cpu()
                done[first] = True
    return success.numpy()


def push_in_simulation(policy_path: Path, episodes: int) -> dict:
    """Success on the batched env with the training settings, the starts they had, and
    success with nominal physics and no observation noise on those starts; for a policy
    trained with ``deploy_limits``, also its success with the training settings but
    without the node's target filters (the same starts: the filters draw nothing)."""
    policy, meta = load_policy(policy_path)
    env = _push_env(meta, episodes, training_settings=True)
    try:
        starts = push_starts(env, meta)
        result = evaluate(policy, env)
        steps = env.max_episode_steps
    finally:
        env.close()
    env = _push_env(meta, episodes, training_settings=False)
    try:
        nominal = from_starts(policy, env, starts)
    finally:
        env.close()
    figures = {"training_settings": {"episodes": result["episodes"],
                                     "success_rate": result["success_rate"],
                                     "episode_steps": steps},
               "nominal_same_starts": {"episodes": len(nominal),
                                       "success_rate": float(nominal.mean()),
                                       "per_episode_success": nominal.astype(int).tolist()},
               "starts": starts}
    if _deploy_limits(meta):
        env = _push_env(meta, episodes, training_settings=True, deploy_limits=False)
        try:
            unfiltered = evaluate(policy, env)
        finally:
            env.close()
        figures["without_deploy_limits"] = {"episodes": unfiltered["episodes"],
                                            "success_rate": unfiltered["success_rate"]}
    return figures


def _deploy_limits(meta: dict) -> bool:
    """Whether the policy trained with the node's target filters (``task.deploy_limits``)."""
    return bool((meta["training"]["task_config"] or {}).get("deploy_limits"))


def _cube(msg: PoseStamped) -> np.ndarray:
    p = msg.pose.position
    return np.array([p.x, p.y, p.z])


def _pose(pos: np.ndarray, quat: np.ndarray) -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = "panda_link0"
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z = (float(v) for v in pos)
    o.w, o.x, o.y, o.z = (float(v) for v in quat)
    return msg


def push_success(cube: list[np.ndarray], goal_xy: np.ndarray) -> tuple[bool, float]:
    """(success, final planar distance) of an episode's cube positions, as the task judges:
    the final cube within PUSH_RADIUS of the goal and resting on the table, and never
    outside the workspace (the task's termination)."""
    final = cube[-1]
    distance = float(np.linalg.norm(final[:2] - goal_xy))
    xy = np.array(cube)[:, :2]
    inside = np.all((xy >= CubeTask.workspace_low) & (xy <= CubeTask.workspace_high))
    resting = final[2] - (TABLE_TOP + CubeTask.cube_half) < REST_HEIGHT
    return bool(inside and resting and distance < PUSH_RADIUS), distance


def command_limits(episodes: list[list[JointTrajectory]], dt: float) -> dict:
    """What share of the Panda's limits the arm commands of the episodes used
    (:func:`embodied_ros.safety.limit_shares` per episode; commands stamped on the
    simulation's clock place them on the control grid)."""
    robot = load_robot("panda")
    used = [limit_shares(np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9
                                   for m in msgs]),
                         np.array([m.points[0].positions[:7] for m in msgs]), robot, dt)
            for msgs in episodes]
    limited = [u["at_acceleration_limit"] for u in used]
    return {"commands": sum(u["targets"] for u in used),
            "max_beyond_position_limit_rad": max(u["beyond_position_limit_rad"] for u in used),
            "max_velocity_share_of_limit": round(max(u["velocity_share"] for u in used), 4),
            "max_acceleration_share_of_limit": round(max(u["acceleration_share"]
                                                         for u in used), 4),
            "steps_at_acceleration_limit": round(float(np.mean(limited)), 4)}


def push_through_ros(policy_path: Path, starts: tuple, steps: int, dt: float,
                     log_dir: Path, node_params: dict[str, Any]) -> dict:
    """The push policy on the starts ``starts`` through ``sim_deploy`` (module docstring);
    ``node_params`` override the policy node's parameters."""
    cube_pos, cube_quat, goals = starts
    with private_graph(log_dir, seed=5) as g:
        safety = g.safety()
        cube = g.record(PoseStamped, "/object_pose", qos_profile_sensor_data)
        commands = g.record(JointTrajectory, "/joint_trajectory")
        policy_stats = g.record(String, "/embodied_policy/loop_stats")
        goal_pub = g.node.create_publisher(PointStamped, "/goal", 10)
        reset_pub = g.node.create_publisher(Empty, "/sim_robot/reset", 10)
        place_pub = g.node.create_publisher(PoseStamped, "/sim_robot/place_object", 10)
        start = time.monotonic()
        # Commands stamped with the node's clock (the simulation's): their control steps.
        _launch_without_soft_start(g, policy_path, trajectory_stamp="now", **node_params)
        g.wait_mode(safety, "policy", timeout=120.0)
        g.wait_for(lambda: goal_pub.get_subscription_count() and
                   place_pub.get_subscription_count(), 30.0, "goal and place subscribers")
        startup_s = time.monotonic() - start
        results, arm = [], []
        for pos, quat, goal in zip(cube_pos, cube_quat, goals, strict=True):

            def reset(pos: np.ndarray = pos, quat: np.ndarray = quat,
                      goal: np.ndarray = goal) -> None:
                goal_pub.publish(_point(np.array([goal[0], goal[1], TABLE_TOP])))
                reset_pub.publish(Empty())
                place_pub.publish(_pose(pos, quat))

            def placed(t: float, pos: np.ndarray = pos) -> bool:
                poses = cube.since(t)
                return len(poses) >= 3 and np.linalg.norm(_cube(poses[-1]) - pos) < 1e-3

            sent = _new_episode(g, safety, reset, placed)
            # One cube pose per simulated control step: the first state after the
            # activation runs the (0 s) soft start, the next `steps` the policy; the one
            # after those is the episode's end state.
            g.wait_for(lambda sent=sent: len(cube.since(sent)) > steps + 1, 60.0,
                       "the episode's control steps")
            poses = [_cube(m) for m in cube.since(sent)[:steps + 2]]
            results.append(push_success(poses, goal))
            arm.append(commands.since(sent))
        g.wait_for(lambda: policy_stats.messages, 30.0, "loop stats")
        loop = json.loads(policy_stats.messages[-1].data)
        modes = [m["mode"] for m in safety.messages]
        isolation = g.isolation
    success = np.array([r[0] for r in results])
    distances = np.array([r[1] for r in results])
    return {"episodes": len(results), "success_rate": float(success.mean()),
            "final_distance_m_p50": round(float(np.median(distances)), 4),
            "watchdog_trips": modes.count("watchdog"),
            "object_stale": modes.count("object_stale"),
            "startup_s": round(startup_s, 1), "isolation": isolation,
            "control_rate_hz": round(loop["rate_hz"], 2),
            "command_limits": command_limits(arm, dt), "per_episode_success":
            success.astype(int).tolist()}


def push(policy_path: Path, episodes: int, log_dir: Path,
         node_params: dict[str, Any] | None = None) -> dict:
    """The push section: in simulation and through ROS on the same starts."""
    meta = load_policy(policy_path)[1]
    sim = push_in_simulation(policy_path, episodes)
    starts = sim.pop("starts")
    load_before = os.getloadavg()[0]
    ros = push_through_ros(policy_path, starts, sim["training_settings"]["episode_steps"],
                           float(meta["control_dt"]), log_dir, node_params or {})
    ros["load_avg_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    reference = sim["training_settings"]["success_rate"]
    training = meta.get("training") or {}
    return {"policy": {"task": meta["task"], "action": meta["action"]["type"],
                       "control_dt": meta["control_dt"], "seed": training.get("seed"),
                       "env_steps": training.get("env_steps"),
                       "deploy_limits": _deploy_limits(meta)},
            "node_params": node_params or {},
            "success_ros": ros["success_rate"], "success_sim": reference,
            "success_ratio": round(ros["success_rate"] / reference, 3) if reference else None,
            "agreement_with_nominal_sim": round(float(np.mean(
                np.array(ros["per_episode_success"]) ==
                np.array(sim["nominal_same_starts"]["per_episode_success"]))), 3),
            "ros": ros, "sim": sim, "date": time.strftime("%Y-%m-%d %H:%M")}


def _realtime(pid: int, priority: int = 50) -> None:
    """Every thread of process ``pid`` on SCHED_FIFO ``priority`` (needs root)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setscheduler(int(tid), os.SCHED_FIFO, os.sched_param(priority))


def loop_under_load(log_dir: Path, busy: int, realtime: bool, seconds: float) -> dict:
    """Command timing of the robot deployment (policy node timer on wall time) with
    ``busy`` busy-loop processes beside it, the policy node on SCHED_FIFO if ``realtime``."""
    loads = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(busy)]
    try:
        with private_graph(log_dir, seed=2 + busy + realtime) as g:
            safety = g.safety()
            stats = g.record(String, "/embodied_policy/loop_stats")
            arrivals: list[tuple[float, float]] = []  # (published, received) per command
            g.node.create_subscription(
                JointTrajectory, "/joint_trajectory",
                lambda _msg, info: arrivals.append((info["source_timestamp"] * 1e-9,
                                                    info["received_timestamp"] * 1e-9)),
                QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
            goal_pub = g.node.create_publisher(PointStamped, "/goal", 10)
            (policy,) = deploy_nodes("panda", str(POLICY), autostart=True)
            procs = g.launch([policy, sim_robot_node("panda")])
            g.wait_mode(safety, "policy", timeout=120.0)
            if realtime:
                _realtime(procs.procs[0].pid)
            rng = np.random.default_rng(1)
            load_before = os.getloadavg()[0]
            start = time.monotonic()
            n0 = len(arrivals)
            while time.monotonic() - start < seconds:
                goal = PointStamped()
                goal.point.x, goal.point.y, goal.point.z = (
                    float(v) for v in rng.uniform(TARGET_LOW, TARGET_HIGH))
                goal_pub.publish(goal)
                time.sleep(2.0)
            window, end = arrivals[n0:], time.monotonic()
            g.wait_for(lambda: stats.since(end), 30.0, "loop stats after the window")
            loop = json.loads(stats.messages[-1].data)
            trips = [m["mode"] for m in safety.messages].count("watchdog")
    finally:
        for proc in loads:
            proc.kill()
            proc.wait()
    sent, received = np.array(window).T

    def ms(values: np.ndarray) -> dict:
        p50, p99 = percentiles(values * 1e3)
        return {"p50": round(p50, 2), "p99": round(p99, 2),
                "max": round(float(values.max() * 1e3), 2)}

    return {"busy_processes": busy, "policy_node_sched_fifo": realtime,
            "load_avg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "commands": len(window),
            "command_period_published_ms": ms(np.diff(sent)),
            "command_period_received_ms": ms(np.diff(received)),
            "delivery_ms": ms(received - sent),
            "node_period_ms": {"p50": round(loop["period_p50_ms"], 2),
                               "p99": round(loop["period_p99_ms"], 2)},
            "timer_late_ms": {"p50": round(loop["timer_late_p50_ms"], 2),
                              "p99": round(loop["timer_late_p99_ms"], 2)},
            "compute_ms": {"p50": round(loop["compute_p50_ms"], 2),
                           "p99": round(loop["compute_p99_ms"], 2)},
            "watchdog_trips": trips}


def jitter(seconds: float) -> dict:
    """:func:`loop_under_load` with no added load, with BUSY busy loops, and with both
    BUSY busy loops and the policy node on SCHED_FIFO."""
    out = {}
    for name, busy, realtime in (("no_added_load", 0, False), ("busy", BUSY, False),
                                 ("busy_sched_fifo", BUSY, True)):
        with tempfile.TemporaryDirectory() as tmp:
            out[name] = loop_under_load(Path(tmp), busy, realtime, seconds)
    return out


def walk_in_simulation(envs: int) -> dict:
    """The Go2 policy under a fixed forward command on the batched env (training settings)."""
    policy, _ = load_policy(GO2_POLICY)
    env = make_env("go2_walk", num_envs=envs, seed=10_000)
    try:
        result = evaluate_velocity_tracking(policy, env, (WALK_VX, 0.0, 0.0), WALK_S)
    finally:
        env.close()
    return {key: result[key] for key in ("episodes", "forward_distance_m", "fall_rate",
                                         "lin_vel_error_mps")}


def walk_through_ros(log_dir: Path) -> dict:
    """The same policy on the simulated Go2 through ROS: forward distance in WALK_S seconds
    (simulated time: one ground-truth pose per control step) under ``cmd_vel``."""
    with private_graph(log_dir, seed=1) as g:
        safety = g.safety()
        poses = g.record(PoseStamped, "/ground_truth/base_pose")
        cmd_pub = g.node.create_publisher(Twist, "/cmd_vel", 10)
        g.launch(sim_deploy_nodes("go2", str(GO2_POLICY)))
        g.wait_mode(safety, "policy", timeout=120.0)
        cmd = Twist()
        cmd.linear.x = WALK_VX
        g.wait_for(lambda: cmd_pub.get_subscription_count(), 30.0, "a cmd_vel subscriber")
        cmd_pub.publish(cmd)
        sent = time.monotonic()
        steps = round(WALK_S / 0.02)
        g.wait_for(lambda: len(poses.since(sent)) > steps, 120.0, "the walk's control steps")
        walked = poses.since(sent)[:steps + 1]
        trips = [m["mode"] for m in safety.messages].count("watchdog")
    first, last = walked[0].pose, walked[-1].pose
    q = first.orientation
    yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
    move = np.array([last.position.x - first.position.x, last.position.y - first.position.y])
    heights = [m.pose.position.z for m in walked]
    tilts = [tilt_from_quat(np.array([m.pose.orientation.w, m.pose.orientation.x,
                                      m.pose.orientation.y, m.pose.orientation.z]))
             for m in walked]
    fell = min(heights) < FALL_HEIGHT or max(tilts) > FALL_TILT
    return {"forward_distance_m": float(move @ np.array([math.cos(yaw), math.sin(yaw)])),
            "fell": bool(fell), "watchdog_trips": trips}


def reach(episodes: int, sim_episodes: int) -> dict:
    """The reach section: loop figures and success through ROS against simulation."""
    sim = in_simulation(sim_episodes)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        ros = through_ros(episodes, Path(tmp))
    ros["load_avg_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    loop, robot = ros["policy_loop"], ros["sim_robot_loop"]
    control_dt_ms = 20.0
    return {
        "policy": str(POLICY.relative_to(POLICY.parents[3])),
        "control_rate_hz": round(loop["rate_hz"], 2),
        "rate_ratio_to_nominal": round(loop["rate_hz"] * control_dt_ms / 1000.0, 4),
        "jitter_ms": {"p50": round(loop["jitter_p50_ms"], 3),
                      "p99": round(loop["jitter_p99_ms"], 3)},
        "compute_ms": {"p50": round(loop["compute_p50_ms"], 3),
                       "p99": round(loop["compute_p99_ms"], 3)},
        "state_age_at_command_ms": {"p50": round(loop["state_age_p50_ms"], 2),
                                    "p99": round(loop["state_age_p99_ms"], 2)},
        "state_to_command_latency_ms": {"p50": round(robot["command_latency_p50_ms"], 2),
                                        "p99": round(robot["command_latency_p99_ms"], 2)},
        "latency_p50_ratio_to_control_period": round(
            robot["command_latency_p50_ms"] / control_dt_ms, 3),
        "success_ros": ros["success_rate"],
        "success_sim": sim["success_rate"],
        "success_ratio": round(ros["success_rate"] / sim["success_rate"], 3)
        if sim["success_rate"] else None,
        "ros": ros,
        "sim": sim,
    }


def go2_walk(quick: bool) -> dict | None:
    """The Go2 section (None without the walking policy's asset)."""
    if not GO2_POLICY.is_file():  # the walking policy's asset (see assets/policies/go2_walk)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        walk = {"command_vx_mps": WALK_VX, "seconds": WALK_S,
                "ros": walk_through_ros(Path(tmp)),
                "sim": walk_in_simulation(8 if quick else 32)}
    walk["forward_distance_ratio"] = round(
        walk["ros"]["forward_distance_m"] / walk["sim"]["forward_distance_m"], 3)
    return walk


def main() -> None:
    p = parser(__doc__.splitlines()[0], SECTIONS)
    p.add_argument("--push-policy", type=Path, default=PUSH_POLICY,
                   help="an exported panda_push policy.pt (the push section is skipped if "
                        "it does not exist)")
    p.add_argument("--push-episodes", type=int, default=64)
    p.add_argument("--push-node-param", action="append", default=[], metavar="NAME=VALUE",
                   help="a policy node parameter for the push section (a float), e.g. "
                        "torque_limit_scale=1000 (recorded in the result)")
    args = p.parse_args()
    torch.set_num_threads(1)
    only = args.only or SECTIONS
    figures: dict[str, Any] = {}
    if "reach" in only:
        figures.update(reach(4 if args.quick else 30, 16 if args.quick else 64))
    if "go2_walk" in only:
        figures["go2_walk"] = go2_walk(args.quick)
    if "jitter" in only:
        figures["jitter"] = jitter(JITTER_S if not args.quick else 6.0)
    if "push" in only:
        if args.push_policy.is_file():
            with tempfile.TemporaryDirectory() as tmp:
                params = {k: float(v) for k, _, v in
                          (a.partition("=") for a in args.push_node_param)}
                figures["push"] = push(args.push_policy, 4 if args.quick else
                                       args.push_episodes, Path(tmp), params)
        else:
            print(f"push section skipped: no policy at {args.push_policy} (--push-policy)")
    if args.only:
        keys = [k for name in args.only for k in (REACH_KEYS if name == "reach" else [name])]
        figures = merge_sections("ros_loop", args.quick, figures, keys)
    write_result("ros_loop", args.quick, figures)


if __name__ == "__main__":
    main()
