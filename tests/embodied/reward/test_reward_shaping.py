"""Potential-based shaping and reward modes, against hand-computed numbers."""

from __future__ import annotations

import pytest
import torch

from embodied.cli import main
from embodied.config import ConfigError, load_config
from embodied.reward import PotentialShaping, RewardMixer, combine_rewards, shape, shaping_term
from embodied.reward.shaping import shaping_weight

T, F = True, False


def t(*values):
    return torch.tensor(values, dtype=torch.float32)


def b(*values):
    return torch.tensor(values, dtype=torch.bool)


def test_shape_is_r_plus_gamma_phi_next_minus_phi():
    # 1 + 0.9 * 0.5 - 0.2 = 1.25; terminated: phi' = 0 -> 0 + 0 - 0.4 = -0.4
    out = shape(t(1.0, 0.0), phi=t(0.2, 0.4), phi_next=t(0.5, 0.8), terminated=b(F, T),
                gamma=0.9)
    torch.testing.assert_close(out, t(1.25, -0.4))
    final = shaping_term(t(0.2, 0.4), t(0.5, 0.8), b(F, T), 0.9, terminal_potential="final")
    torch.testing.assert_close(final, t(0.25, 0.32))  # 0.9 * 0.8 - 0.4
    with pytest.raises(ValueError, match="terminal_potential"):
        shaping_term(t(0.0), t(0.0), b(F), 0.9, terminal_potential="last")


def test_potential_shaping_across_auto_resets():
    s = PotentialShaping(gamma=0.9)
    s.reset(t(0.1, 0.2, 0.5))
    # env 0 continues, env 1 terminates (phi_final ignored: 0), env 2 is truncated
    # (phi_final = 0.7 of its last state); phi_obs of envs 1, 2 = the new episodes' first states.
    f = s.step(phi_obs=t(0.3, 0.0, 0.6), terminated=b(F, T, F), truncated=b(F, F, T),
               phi_final=t(9.0, 0.4, 0.7))
    torch.testing.assert_close(f, t(0.9 * 0.3 - 0.1, -0.2, 0.9 * 0.7 - 0.5))  # .17 -.2 .13
    # the next transition starts from the returned observations' potentials
    f = s.step(phi_obs=t(0.5, 0.1, 0.6), terminated=b(F, F, F), truncated=b(F, F, F))
    torch.testing.assert_close(f, t(0.15, 0.09, -0.06))


def test_terminal_final_convention_and_missing_phi_final_fallback():
    s = PotentialShaping(gamma=0.9, terminal_potential="final")
    s.reset(t(0.1, 0.2, 0.5))
    f = s.step(t(0.3, 0.0, 0.6), b(F, T, F), b(F, F, T), phi_final=t(9.0, 0.4, 0.7))
    torch.testing.assert_close(f, t(0.17, 0.9 * 0.4 - 0.2, 0.13))
    # without phi_final (frame models after auto-reset): truncated -> phi(s_{T-1}) stands in
    s = PotentialShaping(gamma=0.9)
    s.reset(t(0.1, 0.2, 0.5))
    f = s.step(t(0.3, 0.0, 0.6), b(F, T, F), b(F, F, T))
    torch.testing.assert_close(f, t(0.17, -0.2, 0.9 * 0.5 - 0.5))


def test_diverged_envs_get_no_shaping():
    s = PotentialShaping(gamma=0.9)
    s.reset(t(0.1, 0.2))
    f = s.step(t(0.3, 0.0), b(F, F), b(F, T), phi_final=t(0.0, 1.0), diverged=b(F, T))
    torch.testing.assert_close(f, t(0.17, 0.0))


def test_shaping_telescopes_to_minus_phi0_on_a_terminated_episode():
    gen = torch.Generator().manual_seed(0)
    gamma, length = 0.95, 7
    phis = torch.rand(length + 1, 4, generator=gen)  # phi(s_0..s_T) of 4 envs
    s = PotentialShaping(gamma)
    s.reset(phis[0])
    total = torch.zeros(4)
    for k in range(1, length + 1):
        last = k == length
        f = s.step(phis[k], terminated=b(*[last] * 4), truncated=b(F, F, F, F),
                   phi_final=phis[k])
        total += gamma ** (k - 1) * f
    torch.testing.assert_close(total, -phis[0])  # the same for every policy


def test_step_before_reset_and_bad_gamma():
    with pytest.raises(RuntimeError, match="reset"):
        PotentialShaping(0.9).step(t(0.0), b(F), b(F))
    with pytest.raises(ValueError, match="gamma"):
        PotentialShaping(1.5)


def test_reward_modes():
    env_reward, success, f = t(2.0, -1.0), b(T, F), t(0.17, -0.2)
    kw = {"sparse_weight": 10.0, "prm_weight": 2.0}
    torch.testing.assert_close(combine_rewards("sparse", env_reward, success, **kw), t(10, 0))
    torch.testing.assert_close(combine_rewards("prm", env_reward, success, f, **kw),
                               t(0.34, -0.4))
    torch.testing.assert_close(combine_rewards("prm+sparse", env_reward, success, f, **kw),
                               t(10.34, -0.4))
    torch.testing.assert_close(combine_rewards("oracle", env_reward, success, **kw), env_reward)
    with pytest.raises(ValueError, match="needs the shaping term"):
        combine_rewards("prm", env_reward, success)
    with pytest.raises(ValueError, match="unknown reward mode 'dense'"):
        combine_rewards("dense", env_reward, success)


def test_reward_mixer_one_step():
    info = {"success": b(T, F, T), "diverged": b(F, F, T)}
    mixer = RewardMixer("prm+sparse", gamma=0.5)
    assert mixer.needs_progress
    mixer.reset(t(0.2, 0.4, 0.6))
    r = mixer(t(5.0, 5.0, 5.0), b(F, T, F), b(F, F, T), info, phi_obs=t(0.6, 0.0, 0.0),
              phi_final=t(1.0, 1.0, 1.0))
    # env 0: 1 + 0.5 * 0.6 - 0.2; env 1 terminated: 0 + 0 - 0.4; env 2 diverged: 0
    torch.testing.assert_close(r, t(1.1, -0.4, 0.0))
    sparse = RewardMixer("sparse")
    assert not sparse.needs_progress
    sparse.reset()
    torch.testing.assert_close(sparse(t(5, 5, 5), b(F, F, F), b(F, F, F), info), t(1, 0, 0))
    with pytest.raises(ValueError, match="phi_obs"):
        mixer(t(0, 0, 0), b(F, F, F), b(F, F, F), info)


def test_shaping_weight_relative_to_the_sparse_return():
    # sparse_weight 2, gamma 0.9: the sparse return bound is 2 / 0.1 = 20
    cfg = {"mode": "prm+sparse", "gamma": 0.9, "sparse_weight": 2.0, "prm_weight": 0.25,
           "prm_weight_unit": "sparse_return"}
    assert shaping_weight(cfg, 0.9) == pytest.approx(5.0)
    mixer = RewardMixer.from_config(cfg)
    assert mixer.prm_weight == pytest.approx(5.0)
    assert mixer.prm_weight_relative == pytest.approx(0.25)
    mixer.reset(t(0.2))
    r = mixer(t(0.0), b(F), b(F), {"success": b(T)}, phi_obs=t(0.6))
    torch.testing.assert_close(r, t(2.0 + 5.0 * (0.9 * 0.6 - 0.2)))
    # absolute (and missing): the weight as written; the relative share still reported
    absolute = RewardMixer.from_config({**cfg, "prm_weight_unit": "absolute"})
    assert absolute.prm_weight == 0.25 and absolute.prm_weight_relative == pytest.approx(0.0125)
    assert shaping_weight({"prm_weight": 3.0}, 0.99) == 3.0
    with pytest.raises(ConfigError, match="prm_weight_unit=relative: choose one of"):
        shaping_weight({**cfg, "prm_weight_unit": "relative"}, 0.9)
    with pytest.raises(ConfigError, match="discount below 1"):
        shaping_weight(cfg, 1.0)


def test_shaping_in_the_advantage_leaves_the_reward_sparse():
    info = {"success": b(T, F, T), "diverged": b(F, F, T)}
    mixer = RewardMixer.from_config({"mode": "prm+sparse", "prm_weight": 2.0,
                                     "shaping_target": "advantage"}, gamma=0.5)
    mixer.reset(t(0.2, 0.4, 0.6))
    r = mixer(t(5.0, 5.0, 5.0), b(F, T, F), b(F, F, T), info, phi_obs=t(0.6, 0.0, 0.0),
              phi_final=t(1.0, 1.0, 1.0))
    torch.testing.assert_close(r, t(1.0, 0.0, 0.0))  # the sparse reward alone
    # the weighted term of test_reward_mixer_one_step, for the learner's advantages
    torch.testing.assert_close(mixer.advantage_term, 2.0 * t(0.1, -0.4, 0.0))
    assert RewardMixer("prm+sparse").advantage_term is None  # shaping_target=return


@pytest.mark.parametrize("override, fragment", [
    ("reward.prm_weight_unit=relative", "reward.prm_weight_unit=relative: choose one of"),
    ("reward.shaping_target=value", "reward.shaping_target=value: choose one of"),
    ("reward.mode=dense", "unknown reward mode 'dense' (reward.mode)")])
def test_bad_shaping_settings_are_one_line(override, fragment, tmp_path, capsys):
    args = ["train", "task=panda_reach", "reward=prm", override, "num_envs=2",
            "max_iterations=1", "progress=false", f"run_dir={tmp_path}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and fragment in err, err


def test_reward_prm_brings_the_clipped_value_loss_shaping_needs():
    reach = load_config("train", ["task=panda_reach"])
    shaped = load_config("train", ["task=panda_reach", "reward=prm"])
    assert reach.algo.value_clip is None  # the task's own dense-reward setting
    assert shaped.algo.value_clip == 0.2
    assert shaped.algo.learning_rate == reach.algo.learning_rate  # the rest is the task's
    assert shaped.num_envs == reach.num_envs
    assert load_config("train", ["task=panda_reach", "reward=sparse"]).algo.value_clip is None
    kept = load_config("train", ["task=panda_reach", "reward=prm", "algo.value_clip=null"])
    assert kept.algo.value_clip is None  # the command line still wins
    assert "value_clip" not in load_config("train", ["task=panda_reach", "reward=prm",
                                                     "algo=sb3_ppo"]).algo


def test_a_task_ships_its_own_prm_loop_settings():
    push = load_config("train", ["task=panda_push", "reward=prm"]).reward.loop.refresh
    reach = load_config("train", ["task=panda_reach", "reward=prm"]).reward.loop.refresh
    assert (push.train, push.every, push.steps, push.learning_rate) == ("top", 1, 128, 1e-3)
    assert (reach.train, reach.every, reach.steps) == ("all", 2, 32)  # the reward's defaults
    assert "loop" not in load_config("train", ["task=panda_push", "reward=oracle"]).reward
    mine = load_config("train", ["task=panda_push", "reward=prm", "reward.loop.refresh.steps=7"])
    assert mine.reward.loop.refresh.steps == 7  # the command line still wins
