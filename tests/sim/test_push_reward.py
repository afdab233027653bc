"""panda_push's dense reward: the push target, and returns ordered by what a policy does.

The return test is the reward's contract with PPO: pushing the cube to the goal
must pay more than waiting at the pushing pose, which must pay more than
hovering above it (the local optimum earlier reward designs fell into).
"""

from __future__ import annotations

import pytest
import torch

from sim import make_env
from sim.tasks.panda_base import TABLE_TOP
from sim.tasks.panda_push import PUSH_HEIGHT, PushExpert, push_target
from sim.tasks.panda_push.terms import (
    goal_hold,
    goal_rest,
    push_lateral,
    push_low,
    push_pose,
    push_progress,
)

HALF = 0.025


def _target(ee_xyz, cube_xy=(0.5, 0.0), goal_xy=(0.65, 0.0)) -> torch.Tensor:
    f64 = dict(dtype=torch.float64)
    cube = torch.tensor([[*cube_xy, TABLE_TOP + HALF]], **f64)
    return push_target(torch.tensor([ee_xyz], **f64), cube, torch.tensor([goal_xy], **f64),
                       HALF)[0]


def test_push_target_leads_into_the_cube_behind_it():
    """Behind the cube at pushing height: the target is at pushing height, ahead of the
    tcp along the push direction and inside the cube's footprint (unreachable: pressing
    towards it pushes)."""
    ee = (0.5 - HALF - 0.012, 0.0, TABLE_TOP + PUSH_HEIGHT)  # fingers at the back face
    target = _target(ee)
    assert target[2].item() == pytest.approx(TABLE_TOP + PUSH_HEIGHT)
    assert target[0].item() > ee[0]
    assert abs(target[0].item() - 0.5) < HALF and target[1].item() == pytest.approx(0.0)
    # The push direction follows the goal: a goal at -y puts the target on the +y side.
    side = _target((0.5, 0.1, 0.1), goal_xy=(0.5, -0.15))
    assert side[1].item() > 0.0 and abs(side[1].item()) < HALF


@pytest.mark.parametrize("ee", [(0.55, 0.0, 0.01), (0.5, 0.06, 0.01), (0.5, 0.0, 0.06)])
def test_push_target_rises_over_the_cube_from_the_wrong_side(ee):
    """On the goal side, beside or on top of the cube the target is above the cube top,
    so the way to the pushing pose goes over the cube and no hover pose scores like it."""
    assert _target(ee)[2].item() > TABLE_TOP + 2 * HALF


class WaitAtPushingPose(PushExpert):
    """The expert that never pushes: it holds the pre-push pose at pushing height."""

    def act(self) -> torch.Tensor:
        self.phase[self.phase == self.PUSH] = self.DESCEND
        return super().act()


class HoverAbove(PushExpert):
    """The expert that never descends: it hovers 10 cm above the pre-push point."""

    def act(self) -> torch.Tensor:
        self.phase[self.phase == self.DESCEND] = self.ABOVE
        return super().act()


def _episode_sums(num_envs: int, expert_classes, per_step=None) -> list[torch.Tensor]:
    """Each expert's per-env sum over an episode of the reward (or of ``per_step(task)``),
    the same starts for every expert, torch on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    env = make_env("panda_push", num_envs=num_envs, seed=0)
    sums = []
    try:
        for expert_class in expert_classes:
            env.reset(seed=0)
            expert = expert_class(env.task, noise=0.0)
            total = torch.zeros(env.num_envs, dtype=torch.float64)
            for _ in range(env.max_episode_steps - 1):  # stop before the auto-reset
                _, reward, terminated, _, _ = env.step(expert())
                assert not terminated.any()
                total += reward if per_step is None else per_step(env.task)
            sums.append(total)
    finally:
        env.close()
        torch.set_num_threads(threads)
    return sums


def test_pushing_pays_more_than_waiting_which_pays_more_than_hovering():
    push, wait, hover = _episode_sums(6, [PushExpert, WaitAtPushingPose, HoverAbove])
    assert (push > wait).all(), (push, wait)
    assert (wait > hover).all(), (wait, hover)
    assert push.mean() > 2.0 * wait.mean()


def test_observation_ends_with_the_push_target_relative_to_the_tcp():
    env = make_env("panda_push", num_envs=2, seed=0, obs_noise=False)
    try:
        obs = env.observe(noise=False)
        task = env.task
        expected = (task.push_target - task.ee_pos).to(obs.dtype)
        assert torch.allclose(obs[:, -3:], expected, atol=1e-6)
    finally:
        env.close()


def test_push_target_lets_go_once_the_cube_is_at_the_goal():
    ee = (0.4, 0.1, 0.2)
    assert torch.equal(_target(ee, cube_xy=(0.5, 0.0), goal_xy=(0.51, 0.01)),
                       torch.tensor(ee, dtype=torch.float64))


def _place(env, i: int, tcp, cube, goal_xy) -> None:
    """Env ``i``: the arm posed (torch IK) with its tcp at ``tcp``, the cube at ``cube``
    (upright), the goal at ``goal_xy``."""
    from robots.actions import EEDeltaAction

    ik = EEDeltaAction(env.robot, num_envs=1)
    q = env.task.joint_pos[i:i + 1].clone()
    want = torch.tensor([tcp], dtype=torch.float64)
    for _ in range(200):
        err = want - ik.kinematics.position(q)
        q = q + ik.joint_step(q, err.clamp(-0.02, 0.02), torch.zeros(1, dtype=torch.float64))
    assert (ik.kinematics.position(q) - want).norm() < 2e-3
    task, state = env.task, env.state
    state.qpos[i, task.qpos_ids] = q[0]
    state.qpos[i, task.cube_qpos] = torch.tensor([*cube, 1.0, 0.0, 0.0, 0.0],
                                                 dtype=torch.float64)
    task.goal[i, :2] = torch.tensor(goal_xy, dtype=torch.float64)
    env.physics.forward(torch.tensor([i]))
    task.clear_cache()


def _trained_rewards() -> dict:
    """The reward settings ``embodied train task=panda_push`` trains with (its PPO config's
    task variant), as a ``task_cfg``."""
    from omegaconf import OmegaConf

    from embodied.config import load_config

    cfg = load_config("train", ["task=panda_push"])
    return {"rewards": OmegaConf.to_container(cfg.task.rewards, resolve=True)}


@pytest.mark.parametrize("settings", ["task defaults", "trained"])
def test_lifted_cube_and_hovering_over_the_goal_do_not_score_like_success(settings):
    """The exploits of a staged push reward: a cube carried or held above the goal, and a
    tcp hovering over the goal, earn far less per step than the cube resting in the goal;
    pushing the cube from behind earns more than hovering over the goal. Both with the
    task's default weights and with those PPO trains with."""
    task_cfg = _trained_rewards() if settings == "trained" else None
    env = make_env("panda_push", num_envs=4, seed=0, obs_noise=False, task_cfg=task_cfg)
    try:
        z = TABLE_TOP + HALF
        goal = (0.55, 0.1)
        _place(env, 0, (0.5, 0.1, 0.1), (0.55, 0.1, z), goal)  # success: cube in the goal
        _place(env, 1, (0.55, 0.1, 0.1), (0.55, 0.1, 0.1), goal)  # cube held over the goal
        _place(env, 2, (0.55, 0.1, 0.1), (0.45, -0.05, z), goal)  # tcp hovers over the goal
        cube, direction = torch.tensor([0.45, -0.05]), torch.tensor([0.1, 0.15])
        back = cube - (HALF + 0.012) * direction / direction.norm()
        behind = (*back.tolist(), TABLE_TOP + PUSH_HEIGHT)
        _place(env, 3, behind, (0.45, -0.05, z), goal)  # at the cube's back, pushing
        task = env.task
        assert task.success().tolist() == [True, False, False, False]
        reward = sum(t.weight * t.fn() for t in task.reward_terms())
        success, lifted, hover, push = reward.tolist()
        assert success > 2.0 * max(lifted, hover, push), reward
        assert push > hover, reward
        assert push > lifted, reward
        # Over the goal the push target lets go of the tcp: push_low must not pay for it.
        assert push_low(task, std=0.03)[1].item() == 0.0
        # The cube term pays only for the tcp low behind the cube, not at the raised
        # approach target above it.
        assert task.pushing[2:].tolist() == [False, True]
        over = push_target(task.ee_pos, task.cube_pos, task.goal[:, :2], HALF)[2].tolist()
        _place(env, 2, over, (0.45, -0.05, z), goal)
        assert over[2] > TABLE_TOP + 2 * HALF and not env.task.pushing[2]
    finally:
        env.close()


def _diagonal_push() -> tuple:
    """A push along +x and +y: the resting cube centre's height, the cube [2], the goal,
    the unit push direction [2] and the tcp's planar pushing point [2] (fingers at the
    cube's back face)."""
    cube, goal = torch.tensor([0.45, -0.05]), (0.55, 0.1)
    direction = torch.tensor(goal) - cube
    direction = direction / direction.norm()
    return TABLE_TOP + HALF, cube, goal, direction, cube - (HALF + 0.012) * direction


def test_resting_on_the_cubes_back_edge_does_not_score_like_pushing():
    """The local optimum PPO fell into: the tcp resting on top of the cube's back edge,
    where the raised approach target follows it, earns ``push_pose`` like the pushing pose
    behind the cube; ``push_low`` (the distance to the target at pushing height) tells the
    two apart."""
    env = make_env("panda_push", num_envs=2, seed=0, obs_noise=False)
    try:
        z, cube, goal, direction, behind = _diagonal_push()
        edge = cube - (HALF + 0.002) * direction  # on top of the back edge
        _place(env, 0, (*behind.tolist(), TABLE_TOP + PUSH_HEIGHT), (*cube.tolist(), z), goal)
        _place(env, 1, (*edge.tolist(), TABLE_TOP + 2 * HALF + 0.006), (*cube.tolist(), z),
               goal)
        pose = push_pose(env.task, std=0.2).tolist()
        low = push_low(env.task, std=0.03).tolist()
        assert abs(pose[0] - pose[1]) < 0.05 * pose[0], pose  # the trap: alike
        assert low[1] < 0.5 * low[0], low
    finally:
        env.close()


def test_push_progress_pays_pushing_and_not_waiting():
    """``push_progress`` pays the cube's speed towards the goal while the tcp pushes it:
    the pushing expert earns it (about 1 per step of a full-speed push), the one waiting
    at the pose never."""
    push, wait = _episode_sums(4, [PushExpert, WaitAtPushingPose],
                               lambda task: push_progress(task, speed=0.1))
    assert push.mean() > 5.0, push
    assert (wait < 0.05).all(), wait


def _in_goal_twice_and_outside(env, dof: int, speed: float) -> None:
    """Envs 0 and 1: the cube at rest in the goal, env 2: the cube outside it; the tcp
    10 cm above the table beside the goal; then ``qvel[dof] = speed`` in env 1 only."""
    z, goal = TABLE_TOP + HALF, (0.55, 0.1)
    for i, cube in enumerate([(0.55, 0.1, z), (0.55, 0.1, z), (0.45, -0.05, z)]):
        _place(env, i, (0.4, 0.1, 0.1), cube, goal)
    env.state.qvel[1, dof] = speed
    env.physics.forward(torch.tensor([1]))
    env.task.clear_cache()
    assert env.task.success().tolist() == [True, True, False]


def _assert_pays_rest_only(paid: torch.Tensor, rest_min: float) -> None:
    """``paid`` [3] on :func:`_in_goal_twice_and_outside`: above ``rest_min`` at rest in
    the goal, less than a tenth of that with the motion, nothing outside the goal."""
    rest, moving, outside = paid.tolist()
    assert rest > rest_min, rest
    assert moving < 0.1 * rest, (rest, moving)
    assert outside == 0.0


def test_cube_sliding_through_the_goal_scores_less_than_resting_in_it():
    """The overshoot PPO fell into: a cube pushed through the goal at speed meets the
    success criterion on its way. ``goal_rest`` pays the cube at rest in the goal, far
    less the same cube sliding at 0.1 m/s, and nothing outside the goal."""
    env = make_env("panda_push", num_envs=3, seed=0, obs_noise=False)
    try:
        task = env.task
        _in_goal_twice_and_outside(env, task.cube_dofs.start, 0.1)  # free joint: vx first
        assert task.cube_speed[1].item() == pytest.approx(0.1)
        _assert_pays_rest_only(goal_rest(task, speed=0.02), 0.95)
    finally:
        env.close()


def test_hand_still_at_the_goal_scores_more_than_pushing_on():
    """What loses success: the hand keeps moving at pushing speed once the cube is in the
    goal and pushes it back out. ``goal_hold`` pays the tcp at rest while the cube is in
    the goal, far less the tcp moving at about 0.2 m/s (the arm's base joint turning, so
    :attr:`ee_speed` is its planar distance from the base axis times the turn rate), and
    nothing with the cube outside the goal."""
    env = make_env("panda_push", num_envs=3, seed=0, obs_noise=False)
    try:
        task = env.task
        # joint 1 turns the arm about the vertical axis through link1
        _in_goal_twice_and_outside(env, task.dof_ids.start, 0.5)
        axis = env.state.xpos[1, env.task.sim.body_id("link1"), :2]
        radius = (task.ee_pos[1, :2] - axis).norm().item()
        assert task.ee_speed.tolist() == pytest.approx([0.0, 0.5 * radius, 0.0], abs=1e-6)
        _assert_pays_rest_only(goal_hold(task, speed=0.1), 0.99)
    finally:
        env.close()


def test_push_progress_taper_stops_paying_speed_on_arrival():
    """With a 10 cm taper, pushing the cube at 0.1 m/s pays in full 15 cm from the goal
    and 0.6 of it 6 cm from the goal; without the taper both pay in full."""
    env = make_env("panda_push", num_envs=2, seed=0, obs_noise=False)
    try:
        z, goal = TABLE_TOP + HALF, torch.tensor([0.65, 0.0])
        for i, cube_x in enumerate([0.5, 0.59]):
            back = (cube_x - HALF - 0.012, 0.0, TABLE_TOP + PUSH_HEIGHT)
            _place(env, i, back, (cube_x, 0.0, z), goal.tolist())
        task = env.task
        start = task.cube_dofs.start
        env.state.qvel[:, start] = 0.1  # towards the goal (+x)
        env.physics.forward(torch.tensor([0, 1]))
        task.clear_cache()
        assert task.pushing.tolist() == [True, True]
        far, near = push_progress(task, speed=0.1, taper=0.1).tolist()
        assert far == pytest.approx(1.0, abs=0.02), far
        assert near < 0.7 * far, (far, near)
        assert push_progress(task, speed=0.1).tolist() == pytest.approx([1.0, 1.0], abs=0.02)
    finally:
        env.close()


def test_push_lateral_pays_the_tcp_on_the_push_line_only_while_pushing():
    """On a diagonal push (cube to goal along +x and +y), the tcp at the cube's back face
    on the push line earns ``push_lateral`` in full; 1.5 cm to either side of the line it
    earns the same little (the offset's size, not its sign); raised 6 cm above the
    pushing pose, or with the cube in the goal, nothing. :attr:`ee_push_frame` reads the
    offsets: along (behind the cube: negative), lateral (left of the direction:
    positive) and up."""
    env = make_env("panda_push", num_envs=5, seed=0, obs_noise=False)
    try:
        z, cube, goal, direction, behind = _diagonal_push()
        left = torch.stack([-direction[1], direction[0]])
        height = TABLE_TOP + PUSH_HEIGHT
        cube_xyz = (*cube.tolist(), z)
        _place(env, 0, (*behind.tolist(), height), cube_xyz, goal)
        _place(env, 1, (*(behind + 0.015 * left).tolist(), height), cube_xyz, goal)
        _place(env, 2, (*(behind - 0.015 * left).tolist(), height), cube_xyz, goal)
        _place(env, 3, (*behind.tolist(), height + 0.06), cube_xyz, goal)
        _place(env, 4, (0.55, 0.02, height), (*goal, z), goal)  # cube in the goal
        task = env.task
        assert task.pushing.tolist() == [True, True, True, False, True]
        assert task.success().tolist() == [False, False, False, False, True]
        frame = task.ee_push_frame
        assert frame[:4, 0].tolist() == pytest.approx([-(HALF + 0.012)] * 4, abs=3e-3)
        assert frame[:4, 1].tolist() == pytest.approx([0.0, 0.015, -0.015, 0.0], abs=3e-3)
        assert frame[3, 2].item() - frame[0, 2].item() == pytest.approx(0.06, abs=3e-3)
        on_line, to_left, to_right, raised, done = push_lateral(task, std=0.01).tolist()
        assert on_line > 0.7, on_line
        assert to_left < 0.3 * on_line and to_right < 0.3 * on_line, (to_left, to_right)
        assert to_left == pytest.approx(to_right, abs=0.1)
        assert raised == 0.0 and done == 0.0
    finally:
        env.close()


@pytest.mark.parametrize("radius", [0.03, 0.05])
def test_the_release_radius_setting_sets_where_the_target_lets_go(radius):
    """The task's ``release_radius`` setting: the cube 4 cm from the goal (inside the
    5 cm success radius) lets the push target go (the target is the tcp, the observation
    0) at 0.05, not at the default 0.03, where the target still leads into the cube."""
    task_cfg = {"settings": {"release_radius": radius}}
    env = make_env("panda_push", num_envs=2, seed=0, obs_noise=False, task_cfg=task_cfg)
    try:
        z = TABLE_TOP + HALF
        _place(env, 0, (0.4, 0.1, 0.15), (0.5, 0.0, z), (0.54, 0.0))  # 4 cm from the goal
        _place(env, 1, (0.4, 0.1, 0.15), (0.5, 0.0, z), (0.52, 0.0))  # 2 cm from the goal
        assert env.task.release_radius == radius
        rel = env.observe(noise=False)[:, -3:].abs().max(1).values.tolist()
        assert rel[1] < 1e-6
        assert (rel[0] < 1e-6) == (radius == 0.05)
    finally:
        env.close()


def test_an_unknown_task_setting_is_refused():
    from sim.task import TaskConfigError

    with pytest.raises(TaskConfigError, match="has no setting 'release'; its settings: "
                                              r"\['release_radius'\]"):
        make_env("panda_push", num_envs=1, nthread=1, task_cfg={"settings": {"release": 0.05}})
