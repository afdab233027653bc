"""The push and pick-and-place experts act on the state alone (Markovian experts).

A behaviour cloner sees observations only: an expert whose phase hides in its own
memory (timers, frozen directions, the phase itself) cannot be copied from them. So
a fresh expert dropped into the middle of an episode must act exactly as the expert
that has been driving it all along.
"""

from __future__ import annotations

import pytest
import torch

from sim import make_env
from sim.experts import make_expert


@pytest.mark.parametrize("task", ["panda_push", "panda_pick_place"])
@pytest.mark.parametrize("action", ["ee_delta_yaw", None])
def test_a_fresh_expert_mid_episode_acts_as_the_one_driving_it(task, action):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    env = make_env(task, num_envs=4, seed=0, **({"action": action} if action else {}))
    try:
        env.reset(seed=0)
        driver = make_expert(env, noise=0.0)
        checked = set()
        for step in range(150):
            actions = driver()
            if step % 10 == 9:  # every phase the driver has reached so far is checked
                fresh = make_expert(env, noise=0.0)
                assert torch.allclose(fresh(), actions, atol=1e-6), (step, driver.phase)
                checked |= set(driver.phase.tolist())
            env.step(actions)
        assert len(checked) >= 3, checked  # the episode went through several phases
    finally:
        env.close()
        torch.set_num_threads(threads)


def test_end_effector_commands_are_straight_lines_at_most_one_step_long():
    """In ``ee_delta_yaw`` the push expert's tcp command has norm <= 1 (no axis saturates on
    its own, which would bend the path), reaching full speed when far from its target."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    env = make_env("panda_push", num_envs=4, seed=0, action="ee_delta_yaw")
    try:
        env.reset(seed=0)
        expert = make_expert(env, noise=0.0)
        norms = []
        for _ in range(60):
            actions = expert()
            norms.append(actions[:, :3].norm(dim=1))
            env.step(actions)
        norms = torch.cat(norms)
        assert norms.max() <= 1.0 + 1e-6
        assert norms.max() > 0.99
    finally:
        env.close()
        torch.set_num_threads(threads)
