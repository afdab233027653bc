"""SimProgressReward: the simulator's progress through the reward-model interface."""

from __future__ import annotations

import pytest
import torch

import sim
from embodied.reward import make_reward_model
from embodied.reward.oracle import SimProgressReward


def test_sim_progress_reads_the_step_info_without_frames():
    threads = torch.get_num_threads()
    env = sim.make_env("panda_reach", num_envs=3)
    try:
        env.reset(seed=0)
        model = make_reward_model({"name": "sim_progress"})
        assert model.requires_state and not model.requires_frames
        for _ in range(3):
            *_, info = env.step(torch.rand(3, env.action_dim) * 2 - 1)
        out = model.score(None, env.instruction, state=info)
    finally:
        env.close()
        torch.set_num_threads(threads)
    torch.testing.assert_close(out.progress, info["progress"].float())
    torch.testing.assert_close(out.success_prob, info["success"].float())
    assert out.progress.dtype == torch.float32 and out.progress.shape == (3,)


def test_sim_progress_clamps_and_names_missing_state():
    model = SimProgressReward(success_key=None)
    out = model.score(None, "x", state={"progress": torch.tensor([-0.5, 0.25, 1.5])})
    torch.testing.assert_close(out.progress, torch.tensor([0.0, 0.25, 1.0]))
    assert out.success_prob is None
    with pytest.raises(ValueError, match="state=info"):
        model.score(None, "x")
    with pytest.raises(ValueError, match=r"state\['progress'\].*progress_key"):
        model.score(None, "x", state={"stage": torch.zeros(2)})
    # frames, if given, fix the batch size and are still checked
    with pytest.raises(ValueError, match="uint8"):
        model.score(torch.zeros(2, 1, 4, 4, 3), "x", state={"progress": torch.zeros(2)})


def test_oracle_progress_shaping_through_an_auto_reset():
    """prm+sparse with the simulator's progress over a time-limit reset, checked by hand."""
    from embodied.reward import RewardMixer

    threads = torch.get_num_threads()
    env = sim.make_env("panda_reach", num_envs=2, episode_length_s=0.2)  # a few steps
    try:
        model, mixer = SimProgressReward(), RewardMixer("prm+sparse", gamma=0.9)
        env.reset(seed=1)
        phi = model.score(None, env.instruction, state=model.env_state(env)).progress
        mixer.reset(phi)
        for _ in range(env.max_episode_steps):
            _, r_env, term, trunc, info = env.step(torch.rand(2, env.action_dim) * 2 - 1)
            phi_final = model.score(None, env.instruction, state=info).progress
            phi_obs = model.score(None, env.instruction, state=model.env_state(env)).progress
            r = mixer(r_env, term, trunc, info, phi_obs=phi_obs, phi_final=phi_final)
            expected = info["success"].float() + 0.9 * info["progress"] - phi
            torch.testing.assert_close(r, expected)
            phi = phi_obs
    finally:
        env.close()
        torch.set_num_threads(threads)
    assert trunc.all()  # the last step crossed the boundary
