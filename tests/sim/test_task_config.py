"""Task term settings: weights, parameters and noise from the config change what the env
computes; unknown names are refused with the known ones."""

from __future__ import annotations

import pytest
import torch

from sim import TaskConfigError, make_env
from sim.tasks import get_task, task_names

STEPS = 5


def _rollout(task_cfg=None, task: str = "panda_push"):
    env = make_env(task, num_envs=4, seed=0, nthread=1, task_cfg=task_cfg)
    gen = torch.Generator().manual_seed(0)
    env.reset(seed=1)
    rewards, terms = [], []
    for _ in range(STEPS):
        _, reward, _, _, info = env.step(torch.rand(4, env.action_dim, generator=gen) * 2 - 1)
        rewards.append(reward)
        terms.append(info["reward_terms"])
    env.close()
    return torch.stack(rewards), {k: torch.stack([t[k] for t in terms]) for k in terms[0]}


def test_reward_terms_are_weighted_per_env_and_sum_to_the_reward():
    reward, terms = _rollout()
    assert set(terms) == set(get_task("panda_push").default_config().rewards)
    assert all(v.shape == (STEPS, 4) for v in terms.values())
    torch.testing.assert_close(sum(terms.values()), reward, rtol=1e-5, atol=1e-5)


def test_a_weight_override_changes_the_computed_reward():
    reward, terms = _rollout()
    reward2, terms2 = _rollout({"rewards": {"push_pose": {"weight": 0.4}}})  # default 0.2
    torch.testing.assert_close(terms2["push_pose"], 2 * terms["push_pose"])
    torch.testing.assert_close(reward2 - reward, terms["push_pose"], rtol=1e-5, atol=1e-5)
    assert terms["push_pose"].abs().sum() > 0
    for name in set(terms) - {"push_pose"}:
        torch.testing.assert_close(terms2[name], terms[name])


def test_a_parameter_override_changes_the_computed_reward():
    _, terms = _rollout()
    _, terms2 = _rollout({"rewards": {"push_pose": {"params": {"std": 0.5}}}})  # default 0.2
    # 1 - tanh(d / std) grows with the kernel width at every distance
    assert (terms2["push_pose"] > terms["push_pose"]).all()


def test_observation_noise_comes_from_the_config():
    env = make_env("panda_reach", num_envs=2, nthread=1,
                   task_cfg={"observations": {"joint_pos": {"noise": 0.3}}})
    noise = {t.name: t.noise for t in env.task.observation_terms()}
    env.close()
    assert noise["joint_pos"] == 0.3 and noise["joint_vel"] == 0.01


@pytest.mark.parametrize(("task_cfg", "match"), [
    ({"rewards": {"nope": {"weight": 1.0}}},
     r"task 'panda_push' has no reward term 'nope'; its reward terms: \['push_approach'"),
    ({"observations": {"nope": {"noise": 0.1}}},
     r"task 'panda_push' has no observation term 'nope'; its observation terms: \['joint_pos'"),
    ({"rewards": {"push_pose": {"params": {"sd": 1.0}}}},
     r"no parameter 'sd'; its parameters: \['std'\]"),
    ({"rewards": {"push_pose": {"scale": 1.0}}}, r"no setting 'scale'"),
])
def test_unknown_term_names_are_refused(task_cfg, match):
    with pytest.raises(TaskConfigError, match=match):
        make_env("panda_push", num_envs=1, nthread=1, task_cfg=task_cfg)


@pytest.mark.parametrize("task", task_names())
def test_every_term_has_a_setting(task):
    entry = get_task(task)
    cfg = entry.default_config()
    assert list(cfg.rewards) == list(entry.task.reward_functions)
    assert list(cfg.observations) == list(entry.task.observation_functions)


def test_registries_take_each_name_once_and_name_the_known_ones():
    from sim import BACKENDS
    from sim.adapters import gym_id
    from sim.registry import Registry
    from sim.tasks import TASKS, register_task

    assert gym_id("panda_pick_place") == get_task("panda_pick_place").gym_id
    with pytest.raises(ValueError, match="already registered"):
        register_task(get_task("panda_reach").task, gym_id="embodied/Other-v0")
    assert len(TASKS) == len(task_names())
    with pytest.raises(ValueError, match=r"unknown simulation backend 'nope'; choose sim= one "
                                         r"of \['isaaclab', 'mujoco', 'mujoco_warp'\]"):
        make_env("panda_reach", backend="nope")
    assert {"mujoco", "mujoco_warp", "isaaclab"} == set(BACKENDS)
    lazy: Registry[object] = Registry("thing", KeyError)
    lazy.register("path", "robots.math:wrap_angle")
    assert "path" in lazy and lazy.get("path").__name__ == "wrap_angle"
    with pytest.raises(KeyError, match=r"unknown thing 'x'; known: \['path'\]"):
        lazy.get("x")
