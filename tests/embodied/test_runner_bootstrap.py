"""Time-out bootstrapping inside ``OnPolicyRunner.collect``: the stored reward of a
truncated step is ``r + gamma * V(final_obs)``, that of a terminated or diverged step is
``r``, on a scripted env whose final and reset observations have different values."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from embodied.rl import OnPolicyRunner, PPOConfig
from sim import BatchedEnv

GAMMA, REWARD, EPISODE = 0.9, 0.5, 2
# How each env's episodes end: a time-out, a termination, a divergence (reported truncated,
# as the BatchedEnv contract says), a termination on the time limit's step.
RUNNING, TERMINATING, DIVERGING, TERMINATING_LATE = 0, 1, 2, 3


class ScriptedEnv:
    """Four envs whose observation is the step within the episode (0 right after a reset).

    Every episode lasts ``EPISODE`` steps and ends as its env's kind says.
    """

    num_envs, obs_dim, action_dim = 4, 1, 1
    control_dt, max_episode_steps = 0.02, EPISODE
    device = torch.device("cpu")
    instruction, camera_names = "", ()

    def __init__(self):
        self.t = torch.zeros(self.num_envs)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        self.t.zero_()
        return self.observe()

    def observe(self, noise: bool = True) -> torch.Tensor:
        return self.t[:, None].clone()

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                    torch.Tensor, dict[str, Any]]:
        self.t += 1
        obs = self.observe()
        done = self.t >= EPISODE
        kind = torch.arange(self.num_envs)
        terminated = done & ((kind == TERMINATING) | (kind == TERMINATING_LATE))
        diverged = done & (kind == DIVERGING)
        truncated = done & (kind != TERMINATING)
        info: dict[str, Any] = {"success": terminated.clone(), "progress": self.t / EPISODE,
                                "diverged": diverged, "time_outs": truncated,
                                "reward_terms": {"constant": torch.full((self.num_envs,), REWARD)}}
        if done.any():
            ids = done.nonzero().flatten()
            info |= {"done_ids": ids, "final_obs": obs.clone(),
                     "final_success": terminated.clone(),
                     "episode_return": torch.full((len(ids),), REWARD * EPISODE),
                     "episode_length": torch.full((len(ids),), EPISODE)}
            self.t[ids] = 0
            obs[ids] = self.observe()[ids]
        return obs, torch.full((self.num_envs,), REWARD), terminated, truncated, info

    def render(self, cameras=None, env_ids=None, width=None, height=None) -> torch.Tensor:
        raise RuntimeError("the scripted env has no cameras")

    def close(self) -> None:
        pass


def value(obs: float) -> float:
    """The critic of the test: V(s) = 3 s + 1 (so V(final obs) = 7, V(reset obs) = 1)."""
    return 3.0 * obs + 1.0


@pytest.fixture
def runner(tmp_path) -> OnPolicyRunner:
    env = ScriptedEnv()
    assert isinstance(env, BatchedEnv)
    cfg = PPOConfig(num_steps=2 * EPISODE, gamma=GAMMA, actor_hidden=[4], critic_hidden=[],
                    normalize_obs=False)
    run = OnPolicyRunner(env, cfg, tmp_path, progress=False)
    with torch.no_grad():  # the critic is a single linear layer: set it to value()
        run.policy.critic[0].weight.fill_(value(1.0) - value(0.0))
        run.policy.critic[0].bias.fill_(value(0.0))
    return run


def test_collect_bootstraps_time_outs_from_the_final_observation(runner):
    extra = runner.collect()
    storage = runner.storage
    last_step = torch.tensor([t % EPISODE == EPISODE - 1 for t in range(2 * EPISODE)])
    # The critic saw the observations as they were (0, 1, 0, 1 in every env).
    torch.testing.assert_close(storage.values[:, RUNNING],
                               torch.tensor([value(0), value(1)] * 2))
    timed_out = torch.where(last_step, REWARD + GAMMA * value(EPISODE), REWARD)
    torch.testing.assert_close(storage.rewards[:, RUNNING], timed_out)
    for env in (TERMINATING, DIVERGING, TERMINATING_LATE):
        torch.testing.assert_close(storage.rewards[:, env], torch.full((4,), REWARD))
    assert storage.dones.equal(last_step[:, None].expand(-1, 4))
    assert extra["diverged"] == 2.0
    assert len(runner.episodes) == 2 * 4
