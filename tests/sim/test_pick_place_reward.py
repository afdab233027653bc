"""panda_pick_place's staged, gated reward: the exploits of a pick-and-place reward do
not score like success.

Each env is posed in one state (arm by torch IK, cube, fingers, stage latch) and the
task's weighted reward of that state is compared with the success state's.
"""

from __future__ import annotations

import pytest
import torch

from robots.actions import EEDeltaAction
from sim import make_env
from sim.tasks.panda_base import TABLE_TOP

HALF = 0.02  # the pick-and-place cube's half size
REST = TABLE_TOP + HALF
GOAL = (0.55, 0.1)
F64 = {"dtype": torch.float64}


def _pose(env, i: int, tcp, cube, closed: bool, lifted: bool) -> None:
    """Env ``i``: tcp at ``tcp`` (hand down), an upright cube centred at ``cube``, the
    fingers closed on a 4 cm cube or open, the task's ``lifted`` latch, the goal ``GOAL``."""
    task, state = env.task, env.state
    ik = EEDeltaAction(env.robot, num_envs=1)
    q = task.default_q[None].clone()
    want = torch.tensor([tcp], **F64)
    for _ in range(200):
        err = (want - ik.kinematics.position(q)).clamp(-0.02, 0.02)
        q = q + ik.joint_step(q, err, torch.zeros(1, **F64))
    assert (ik.kinematics.position(q) - want).norm() < 2e-3
    state.qpos[i, task.qpos_ids] = q[0]
    state.qpos[i, task.finger_qpos_ids] = HALF if closed else task.gripper.upper
    state.qpos[i, task.cube_qpos] = torch.tensor([*cube, 1.0, 0.0, 0.0, 0.0], **F64)
    task.goal[i] = torch.tensor([*GOAL, TABLE_TOP], **F64)
    task.lifted[i] = lifted
    env.physics.forward(torch.tensor([i]))
    task.clear_cache()


# name: (tcp, cube, fingers closed, lifted latch, grasped)
STATES = {
    "success": ((*GOAL, 0.15), (*GOAL, REST), False, True, False),
    "placed_not_released": ((*GOAL, REST), (*GOAL, REST), True, True, True),
    "dragged_not_lifted": ((*GOAL, REST), (*GOAL, REST), True, False, True),
    "pushed_not_grasped": ((GOAL[0] - 0.035, GOAL[1], REST), (*GOAL, REST), True, False,
                           False),
    "hovering_without_cube": ((*GOAL, 0.1), (0.45, -0.1, REST), False, False, False),
    "thrown_over_goal": ((0.45, -0.1, 0.15), (*GOAL, 0.1), False, True, False),
    "held_over_goal": ((*GOAL, 0.1), (*GOAL, 0.1), True, True, True),
}


@pytest.fixture(scope="module")
def posed():
    """The per-env weighted reward terms and flags of every state in ``STATES``."""
    env = make_env("panda_pick_place", num_envs=len(STATES), seed=0, obs_noise=False)
    try:
        for i, (tcp, cube, closed, lifted, _) in enumerate(STATES.values()):
            _pose(env, i, tcp, cube, closed, lifted)
        task = env.task
        terms = {t.name: t.weight * t.fn() for t in task.reward_terms()}
        yield {"reward": dict(zip(STATES, sum(terms.values()).tolist(), strict=True)),
               "terms": terms, "success": task.success().tolist(),
               "grasped": task.grasped().tolist(), "names": list(STATES)}
    finally:
        env.close()


def test_the_states_are_what_they_claim(posed):
    assert posed["grasped"] == [s[4] for s in STATES.values()]
    assert posed["success"] == [name == "success" for name in STATES]


@pytest.mark.parametrize("exploit", ["dragged_not_lifted", "pushed_not_grasped",
                                     "hovering_without_cube", "thrown_over_goal",
                                     "held_over_goal"])
def test_exploits_earn_less_than_half_of_success(posed, exploit):
    reward = posed["reward"]
    assert reward["success"] > 2.0 * reward[exploit], reward


def test_stages_pay_in_order(posed):
    """Placed but still grasped is the last stage before success: more than holding the
    cube over the target, more than dragging it there, and less than releasing it."""
    r = posed["reward"]
    assert r["success"] > r["placed_not_released"] > r["held_over_goal"]
    assert r["held_over_goal"] > 2.0 * r["dragged_not_lifted"], r
    # Opening the hand pays only around a placed cube, and only until success.
    paid = (posed["terms"]["release"] > 0).tolist()
    assert paid == [name == "placed_not_released" for name in STATES]


def test_carrying_terms_pay_only_for_a_grasped_lifted_cube(posed):
    grasped = posed["grasped"]
    assert (posed["terms"]["lift"] > 0).tolist() == [s[3] and g for s, g in
                                                      zip(STATES.values(), grasped, strict=True)]
    carrying = [s[3] and s[4] for s in STATES.values()]
    for name in ("place_coarse", "place_fine"):
        paid = (posed["terms"][name] > 0).tolist()
        assert paid == carrying, (name, dict(zip(posed["names"], paid, strict=True)))
