"""Domain randomisation draws what its configuration says: every env's friction, masses
and PD gains inside their own configured ranges, action latencies over the whole
inclusive range (and none when randomisation is off)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sim import DomainRandomization, make_env

# Disjoint ranges, far from each other and from the defaults: a factor drawn from the
# wrong range cannot land inside the right one.
RANGES = {"friction_scale": (1.6, 1.7), "mass_scale": (0.40, 0.45),
          "pd_gain_scale": (2.5, 2.6)}
NUM_ENVS = 60


@pytest.fixture(scope="module")
def env():
    e = make_env("panda_reach", num_envs=NUM_ENVS, seed=0, nthread=1,
                 randomization=DomainRandomization(**RANGES))
    yield e
    e.close()


def _factors(env, name: str, default: np.ndarray) -> np.ndarray:
    """Per-env factors [B, n] of the model parameter ``name`` where its default is not 0."""
    per_env = np.asarray(env.batch.expanded(name)).reshape(env.num_envs, -1)
    default = default.reshape(-1)
    used = default != 0
    return per_env[:, used] / default[used]


def _assert_one_factor_per_env_inside(factors: np.ndarray, low_high: tuple[float, float]):
    low, high = low_high
    assert factors.min() >= low - 1e-9 and factors.max() <= high + 1e-9, (
        f"factors {factors.min():.3f}..{factors.max():.3f} outside [{low}, {high}]")
    np.testing.assert_allclose(factors, factors[:, :1].repeat(factors.shape[1], 1), rtol=1e-9)
    assert np.ptp(factors[:, 0]) > 0.5 * (high - low)  # drawn across the range, not a constant


@pytest.mark.parametrize("reset", [False, True], ids=["first", "after_reset"])
def test_physical_parameters_lie_in_their_configured_ranges(env, reset):
    if reset:
        env.reset(seed=5)
    model, robot_actuators = env.model, slice(0, env.action_map.ctrl_dim)
    _assert_one_factor_per_env_inside(_factors(env, "geom_friction", model.geom_friction),
                                      RANGES["friction_scale"])
    _assert_one_factor_per_env_inside(_factors(env, "body_mass", model.body_mass),
                                      RANGES["mass_scale"])
    gains = np.asarray(env.batch.expanded("actuator_gainprm"))[:, robot_actuators, 0]
    _assert_one_factor_per_env_inside(gains / model.actuator_gainprm[robot_actuators, 0],
                                      RANGES["pd_gain_scale"])
    bias = np.asarray(env.batch.expanded("actuator_biasprm"))[:, robot_actuators, 1:3]
    default_bias = model.actuator_biasprm[robot_actuators, 1:3]
    used = default_bias != 0
    _assert_one_factor_per_env_inside(bias[:, used] / default_bias[used],
                                      RANGES["pd_gain_scale"])


def test_latency_draws_cover_the_inclusive_range():
    gen = torch.Generator().manual_seed(0)
    on = DomainRandomization(action_latency_steps=(0, 2)).sample_latency(2000, gen)
    assert set(on.tolist()) == {0, 1, 2}
    shifted = DomainRandomization(action_latency_steps=(1, 3)).sample_latency(2000, gen)
    assert set(shifted.tolist()) == {1, 2, 3}
    off = DomainRandomization(enabled=False).sample_latency(2000, gen)
    assert set(off.tolist()) == {0}


def _applied_delays(env) -> set[int]:
    """The delay (control steps) with which each env's robot received the actions sent."""
    env.reset(seed=1)
    for k in (1, 2, 3):  # joint 1's target is the action itself (default 0, scale 1)
        env.step(torch.full((env.num_envs, env.action_dim), 0.1 * k))
    received = env.state.ctrl[:, 0].numpy()
    delays = np.rint((0.3 - received) / 0.1)
    np.testing.assert_allclose(received, 0.3 - 0.1 * delays, atol=1e-9)
    return set(delays.astype(int).tolist())


def test_every_latency_in_the_range_reaches_the_robot(env):
    assert _applied_delays(env) == {0, 1, 2}
    off = make_env("panda_reach", num_envs=8, seed=0, nthread=1,
                   randomization=DomainRandomization(enabled=False))
    try:
        assert _applied_delays(off) == {0}
    finally:
        off.close()
