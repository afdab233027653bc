"""Worker of tests/embodied/test_distributed.py, launched by torchrun (2 ranks, gloo).

``python dist_worker.py <check> <out_dir>``: rank 0 writes ``<out_dir>/<check>.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from embodied import distributed
from embodied.reward.prm.data import load_frames
from embodied.reward.prm.network import PRMConfig
from embodied.reward.prm.train import TrainConfig, train_prm
from embodied.rl import OnPolicyRunner, PPOConfig
from embodied.rl.actor_critic import ActorCritic
from sim import make_env

SMALL = PPOConfig(num_steps=8, num_epochs=2, num_mini_batches=2, actor_hidden=[32, 32],
                  critic_hidden=[32, 32])
ENVS = 4  # per rank


def runner(run_dir: Path, seed: int = 0) -> OnPolicyRunner:
    env = make_env("panda_reach", num_envs=ENVS, seed=distributed.rank_seed(seed), nthread=1)
    return OnPolicyRunner(env, SMALL, run_dir, seed=distributed.rank_seed(seed),
                          save_interval=2, progress=False)


def flat_state(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([v.double().reshape(-1) for v in module.state_dict().values()])


def spread(module: torch.nn.Module) -> float:
    """The largest difference of any parameter or buffer between the ranks."""
    states = distributed.gather_objects(flat_state(module))
    return max(float((s - states[0]).abs().max()) for s in states)


def check_training(out: Path) -> dict:
    """Parameters stay identical over updates; a resumed run equals an uninterrupted one."""
    straight = runner(out / "straight")
    initial = spread(straight.policy)
    straight.learn(4)
    first = runner(out / "resumed")
    first.learn(2)
    resumed = runner(out / "resumed", seed=123)
    resumed.load(out / "resumed")
    resumed.learn(4)
    mine = flat_state(straight.policy)
    return {"initial_spread": initial, "spread": spread(straight.policy),
            "resume_diff": float((flat_state(resumed.policy) - mine).abs().max()),
            "env_steps": straight.global_step,
            "normalizer_count": int(straight.policy.obs_normalizer.count),
            "learning_rates": distributed.gather_objects(straight.alg.learning_rate)}


def ppo_like_loss(policy: ActorCritic, obs: torch.Tensor, actions: torch.Tensor,
                  adv: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    dist_ = policy.distribution(obs)
    log_prob = dist_.log_prob(actions).sum(-1)
    value = policy.evaluate(obs)
    return -(log_prob * adv).mean() + (value - returns).square().mean() \
        - 0.01 * dist_.entropy().sum(-1).mean()


def check_gradient(out: Path) -> dict:
    """Averaged per-rank gradients of a mean loss equal the gradient on the whole batch."""
    gen = torch.Generator().manual_seed(7)
    n, obs_dim, act_dim = 64, 12, 4
    batch = [torch.randn(n, obs_dim, generator=gen), torch.randn(n, act_dim, generator=gen),
             torch.randn(n, generator=gen), torch.randn(n, generator=gen)]
    torch.manual_seed(distributed.rank_seed(0))  # a different init per rank ...
    policy = ActorCritic(obs_dim, act_dim, [32], [32], "elu", 1.0, False)
    distributed.broadcast_module(policy)  # ... replaced by rank 0's
    half = n // distributed.world_size()
    mine = slice(distributed.rank() * half, (distributed.rank() + 1) * half)
    ppo_like_loss(policy, *(b[mine] for b in batch)).backward()
    distributed.average_gradients(policy.parameters())
    averaged = torch.cat([p.grad.reshape(-1) for p in policy.parameters()])
    policy.zero_grad()
    ppo_like_loss(policy, *batch).backward()
    whole = torch.cat([p.grad.reshape(-1) for p in policy.parameters()])
    return {"grad_diff": float((averaged - whole).abs().max()),
            "grad_scale": float(whole.abs().max())}


def check_prm(out: Path) -> dict:
    """DDP keeps the PRM identical on both ranks though each draws its own minibatches."""
    data = load_frames(out / "prm" / "data")
    net, stats = train_prm(data, PRMConfig(cameras=data.cameras, image_size=32, text="learned",
                                           dim=32, channels=[8, 8, 8]),
                           TrainConfig(epochs=1, batch_size=8), log=False)
    return {"spread": spread(net), "steps": stats["steps"], "states": stats["train_states"]}


def main() -> None:
    check, out = sys.argv[1], Path(sys.argv[2])
    torch.set_num_threads(1)
    assert distributed.init() and dist.get_backend() == "gloo"
    result = {"check_training": check_training, "check_gradient": check_gradient,
              "check_prm": check_prm}[check](out)
    if distributed.is_main():
        (out / f"{check}.json").write_text(json.dumps(result))
    distributed.leave()


if __name__ == "__main__":
    main()
