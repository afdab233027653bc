"""rsl_rl (rsl-rl-lib 5.x) on our batched env: the ``rsl_rl`` contender of bench/ppo.py.

Runs in the peer venv made by ``scripts/peer_env.sh rsl_rl`` (it has rsl-rl-lib and the
project), as a subprocess of bench/ppo.py:

    .venv-rsl_rl/bin/python bench/peers/rsl_rl_adapter.py --task panda_reach --seed 0 \\
        --budget-s 600 --eval-episodes 64 --eval-every 5 --out result.json

:class:`RslRlVecEnv` exposes a :class:`sim.protocol.BatchedEnv` as rsl_rl's ``VecEnv``:
observations as a TensorDict ``{"policy": obs}``, ``dones = terminated | truncated``,
``extras["time_outs"]`` (the truncations rsl_rl bootstraps; diverged envs excluded, as our
runner does) and ``extras["episode"]`` (means over the episodes that ended this step).
:func:`rsl_rl_config` maps our shipped PPO settings (``configs/algo/ppo/<task>.yaml``) onto
rsl_rl's runner config. rsl_rl's own ``OnPolicyRunner.learn`` trains; between its calls
(``eval_every`` iterations each) the deterministic policy is scored by bench/ppo.py's
:class:`Probe` on the same fixed episodes as ours. Training wall-clock excludes those
evaluations; learning time is the time spent in ``PPO.update``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from omegaconf import DictConfig
from ppo import TARGET, CpuClock, Probe, contender_result, train_cfg
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from tensordict import TensorDict

from embodied.envs import make_train_env
from sim.protocol import BatchedEnv


class RslRlVecEnv(VecEnv):
    """rsl_rl's ``VecEnv`` over one of our batched envs (which auto-resets finished envs)."""

    def __init__(self, env: BatchedEnv):
        self.env = env
        self.num_envs, self.num_actions = env.num_envs, env.action_dim
        self.max_episode_length = env.max_episode_steps
        self.device = env.device
        self.cfg: dict[str, Any] = {}
        self._obs = env.reset()

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Steps taken in each env's current episode [B]."""
        return self.env.episode_step

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_step[:] = value

    def _wrap(self, obs: torch.Tensor) -> TensorDict:
        return TensorDict({"policy": obs}, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        """The current observations (the env is not stepped or reset)."""
        return self._wrap(self._obs)

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor,
                                                   dict[str, Any]]:
        """One control step of every env: (observations, rewards [B], dones [B], extras)."""
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self._obs = obs
        extras: dict[str, Any] = {"time_outs": truncated & ~terminated & ~info["diverged"]}
        if "done_ids" in info:
            ids = info["done_ids"]
            extras["episode"] = {
                "success": info["final_success"][ids].float().mean(),
                "return": info["episode_return"].float().mean(),
                "length": info["episode_length"].float().mean(),
            }
        return self._wrap(obs), rewards.float(), terminated | truncated, extras


def rsl_rl_config(algo: DictConfig) -> dict[str, Any]:
    """rsl_rl's ``OnPolicyRunner`` config with our PPO settings (``PPOConfig`` keys).

    rsl_rl clips the value loss with the policy's clip range or not at all (our
    ``value_clip: null``) and bounds the adaptive lr to [1e-5, 1e-2]: settings of ours
    that differ from that are an error, not ignored.
    """
    clip_values = algo.value_clip is not None
    if clip_values and float(algo.value_clip) != float(algo.clip):
        raise ValueError(f"rsl_rl clips values with clip_param: value_clip {algo.value_clip} "
                         f"!= clip {algo.clip}")
    if algo.schedule == "adaptive" and (float(algo.min_lr), float(algo.max_lr)) != (1e-5, 1e-2):
        raise ValueError("rsl_rl's adaptive lr is bounded to [1e-5, 1e-2]")

    def model(hidden: Any, distribution: dict[str, Any] | None) -> dict[str, Any]:
        return {"class_name": "MLPModel", "hidden_dims": [int(h) for h in hidden],
                "activation": str(algo.activation), "obs_normalization": bool(algo.normalize_obs),
                "distribution_cfg": distribution}

    return {
        "num_steps_per_env": int(algo.num_steps),
        "save_interval": 10**9,
        "check_for_nan": True,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "actor": model(algo.actor_hidden, {"class_name": "GaussianDistribution",
                                           "init_std": float(algo.init_noise_std),
                                           "std_type": "log"}),
        "critic": model(algo.critic_hidden, None),
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": int(algo.num_epochs),
            "num_mini_batches": int(algo.num_mini_batches),
            "clip_param": float(algo.clip),
            "use_clipped_value_loss": clip_values,
            "gamma": float(algo.gamma),
            "lam": float(algo.lam),
            "value_loss_coef": float(algo.value_loss_coef),
            "entropy_coef": float(algo.entropy_coef),
            "learning_rate": float(algo.learning_rate),
            "max_grad_norm": float(algo.max_grad_norm),
            "schedule": str(algo.schedule),
            "desired_kl": float(algo.desired_kl),
            "normalize_advantage_per_mini_batch": False,
        },
    }


def make_runner(env: BatchedEnv, algo: DictConfig, seed: int) -> OnPolicyRunner:
    """rsl_rl's runner on ``env`` with our settings; torch's RNG seeded with ``seed``."""
    torch.manual_seed(seed)
    return OnPolicyRunner(RslRlVecEnv(env), rsl_rl_config(algo), log_dir=None,
                          device=str(env.device))


def run_rsl_rl(cfg: DictConfig, budget_s: float, eval_every: int, probe: Probe,
               target: float = TARGET) -> dict[str, Any]:
    """rsl_rl until ``target`` deterministic success or ``budget_s`` of training."""
    torch.set_num_threads(int(cfg.torch_threads))
    env = make_train_env(cfg, int(cfg.num_envs), int(cfg.seed))
    runner = make_runner(env, cfg.algo, int(cfg.seed))
    learn_s = 0.0
    update = runner.alg.update

    def timed_update() -> dict[str, float]:
        nonlocal learn_s
        start = time.perf_counter()
        stats = update()
        learn_s += time.perf_counter() - start
        return stats

    runner.alg.update = timed_update
    actor = runner.alg.get_policy()

    def policy(obs: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return actor(TensorDict({"policy": obs}, batch_size=[obs.shape[0]]))

    steps_per_iter = int(cfg.num_envs) * int(cfg.algo.num_steps)
    curve: list[tuple[float, int, float]] = []
    train_s, iterations = 0.0, 0
    cpu = CpuClock()  # the same span as the wall clock: rsl_rl's learn()
    learn = cpu.timed(runner.learn)
    while iterations < int(cfg.max_iterations):
        start = time.perf_counter()
        learn(eval_every)
        train_s += time.perf_counter() - start
        iterations += eval_every
        cpu.mark()
        runner.alg.eval_mode()
        curve.append((train_s, iterations * steps_per_iter, probe(policy)))
        runner.alg.train_mode()
        print(f"  rsl_rl: {curve[-1]}", file=sys.stderr, flush=True)
        if curve[-1][2] >= target or train_s >= budget_s:
            break
    env.close()
    steps = iterations * steps_per_iter
    collect_s = train_s - learn_s
    return contender_result(
        curve, budget_s, train_s, steps, probe.seconds, num_envs=int(cfg.num_envs),
        iterations=iterations, **cpu.result(curve),
        collection_steps_per_s=round(steps / collect_s) if collect_s > 0 else None,
        learning_steps_per_s=round(steps / learn_s) if learn_s > 0 else None,
        learning_time_fraction=round(learn_s / train_s, 3) if train_s else None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="panda_reach")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-s", type=float, required=True)
    p.add_argument("--eval-episodes", type=int, required=True)
    p.add_argument("--eval-every", type=int, required=True, help="iterations between evals")
    p.add_argument("--out", type=Path, required=True, help="where the result JSON goes")
    p.add_argument("overrides", nargs="*", help="config overrides, e.g. num_envs=32")
    args = p.parse_args()
    cfg = train_cfg(args.task, f"seed={args.seed}", *args.overrides)
    probe = Probe(cfg, args.eval_episodes)
    result = run_rsl_rl(cfg, args.budget_s, args.eval_every, probe)
    probe.close()
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
