"""GAE with time-out bootstrapping against a hand-computed example."""

from __future__ import annotations

import torch

from embodied.rl import bootstrap_time_outs, compute_gae


def test_bootstrap_only_time_outs_that_did_not_terminate_or_diverge():
    rewards = torch.ones(4)
    final_values = torch.full((4,), 10.0)
    # env 0: running; 1: time-out; 2: terminated; 3: diverged (reported truncated)
    truncated = torch.tensor([False, True, False, True])
    terminated = torch.tensor([False, False, True, False])
    diverged = torch.tensor([False, False, False, True])
    out = bootstrap_time_outs(rewards, final_values, truncated, terminated, diverged, gamma=0.9)
    torch.testing.assert_close(out, torch.tensor([1.0, 10.0, 1.0, 1.0]))


def test_gae_three_steps_one_termination_one_time_out():
    gamma, lam = 0.9, 0.5
    # two envs, three steps, reward 1 everywhere; V(s_t) = 0.5, 1.0, 2.0; V(s_3) = 4.
    # env 0 terminates at t=1 (no bootstrap); env 1 times out at t=1 with V(final_obs) = 10.
    rewards = torch.ones(3, 2)
    values = torch.tensor([[0.5, 0.5], [1.0, 1.0], [2.0, 2.0]])
    terminated = torch.tensor([[False, False], [True, False], [False, False]])
    truncated = torch.tensor([[False, False], [False, True], [False, False]])
    final_values = torch.tensor([0.0, 10.0])
    rewards[1] = bootstrap_time_outs(rewards[1], final_values, truncated[1], terminated[1],
                                     torch.zeros(2, dtype=torch.bool), gamma)
    assert rewards[1].tolist() == [1.0, 10.0]  # 1 + 0.9 * 10 for the time-out only

    adv, ret = compute_gae(rewards, values, terminated | truncated, torch.tensor([4.0, 4.0]),
                           gamma, lam)
    # By hand: delta_t = r_t + gamma V(s_t+1) (1 - done_t) - V(s_t),
    #          A_t = delta_t + gamma lam (1 - done_t) A_t+1
    # t=2 (both): 1 + 0.9*4 - 2 = 2.6
    # t=1 env 0 (terminated): 1 - 1 = 0;  env 1 (time-out): 10 - 1 = 9
    # t=0 env 0: 1 + 0.9*1 - 0.5 + 0.45*0 = 1.4;  env 1: 1.4 + 0.45*9 = 5.45
    expected = torch.tensor([[1.4, 5.45], [0.0, 9.0], [2.6, 2.6]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + values)


def test_advantage_level_shaping_is_gae_under_the_critic_plus_the_potential():
    from embodied.rl.storage import RolloutStorage

    gamma, lam, steps, envs = 0.9, 0.8, 5, 3
    gen = torch.Generator().manual_seed(0)
    rewards = torch.rand(steps, envs, generator=gen)
    values = torch.rand(steps, envs, generator=gen)
    last_values = torch.rand(envs, generator=gen)
    phi = torch.rand(steps + 1, envs, generator=gen)  # phi of s_0..s_T
    dones = torch.zeros(steps, envs, dtype=torch.bool)
    dones[1, 0] = dones[3, 2] = True  # terminated: the terminal potential is 0
    shaping = gamma * phi[1:] * (~dones) - phi[:-1]
    storage = RolloutStorage(steps, envs, obs_dim=2, action_dim=1)
    for t in range(steps):
        z = torch.zeros(envs, 1)
        storage.add(torch.zeros(envs, 2), z, z, z, torch.zeros(envs), values[t], rewards[t],
                    dones[t], shaping[t])
    storage.compute_returns(last_values, gamma, lam)
    # the advantages: GAE of the reward alone under the critic V + phi
    expected, _ = compute_gae(rewards, values + phi[:-1], dones, last_values + phi[-1],
                              gamma, lam)
    torch.testing.assert_close(storage.advantages, expected)
    # the critic's targets: the reward alone under V (the potential is not in them)
    _, returns = compute_gae(rewards, values, dones, last_values, gamma, lam)
    torch.testing.assert_close(storage.returns, returns)
    # a rollout without shaping terms is plain GAE again
    storage.clear()
    for t in range(steps):
        z = torch.zeros(envs, 1)
        storage.add(torch.zeros(envs, 2), z, z, z, torch.zeros(envs), values[t], rewards[t],
                    dones[t])
    storage.compute_returns(last_values, gamma, lam)
    torch.testing.assert_close(storage.advantages, returns - values)
