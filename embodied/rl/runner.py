"""The on-policy loop: collect a rollout, update, log, checkpoint; resumable.

Checkpoints hold everything a run needs to continue the same learning curve:
the policy with its observation normaliser, the optimiser and the adapted
learning rate, the iteration and env-step counters, the recent episode
statistics and the RNG states (torch's and the env's generator). After every
periodic checkpoint all envs are reset (a time-out for the episodes in flight,
bootstrapped like any other), so a run resumed from that checkpoint is
bitwise the same as the uninterrupted one without snapshotting the simulator.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from embodied import distributed
from embodied.rl.actor_critic import ActorCritic
from embodied.rl.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    checkpoint_path,
    find_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from embodied.rl.logger import MetricsLogger, RewardTermStats
from embodied.rl.normalizer import EmpiricalNormalization
from embodied.rl.ppo import PPO, PPOConfig
from embodied.rl.storage import RolloutStorage, bootstrap_time_outs
from sim.protocol import BatchedEnv, RngStateful


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)``: 1 is a perfect critic, <= 0 a useless one."""
    var = returns.var()
    return float("nan") if var == 0 else (1 - (returns - values).var() / var).item()


class OnPolicyRunner:
    """Trains an :class:`ActorCritic` with :class:`PPO` on a :class:`BatchedEnv`.

    Seeds torch's global RNG with ``seed`` (it drives action sampling and minibatch
    shuffling); the env is seeded by whoever builds it. Checkpoints go to
    ``run_dir/checkpoints/model_<iteration>.pt`` every ``save_interval`` iterations
    and at the end.

    Under torchrun (:mod:`embodied.distributed`) each rank runs one runner on its own
    env batch (``seed`` is the rank's own): parameters start as rank 0's, gradients,
    the learning-rate KL and the normaliser statistics are shared, metrics are
    averaged, ``env_steps`` counts every rank's steps and rank 0 alone writes.
    """

    def __init__(self, env: BatchedEnv, cfg: PPOConfig, run_dir: str | Path, seed: int = 0,
                 save_interval: int = 50, progress: bool = True):
        self.env, self.cfg, self.run_dir = env, cfg, Path(run_dir)
        self.save_interval, self.progress = save_interval, progress
        torch.manual_seed(seed)
        self.policy = ActorCritic(env.obs_dim, env.action_dim, cfg.actor_hidden,
                                  cfg.critic_hidden, cfg.activation, cfg.init_noise_std,
                                  cfg.normalize_obs).to(env.device)
        distributed.broadcast_module(self.policy)
        norm = self.policy.obs_normalizer
        self.normalizer_sync = distributed.NormalizerSync(
            norm if isinstance(norm, EmpiricalNormalization) else None)
        self.alg = PPO(self.policy, cfg)
        self.storage = RolloutStorage(cfg.num_steps, env.num_envs, env.obs_dim, env.action_dim,
                                      env.device)
        self.iteration = 0
        self.global_step = 0
        self.wall_time = 0.0  # seconds of training, summed over resumes
        window = max(100, env.num_envs)
        self.episodes: deque[tuple[float, float, float]] = deque(maxlen=window)
        self.reward_terms = RewardTermStats(window)
        self.obs: torch.Tensor | None = None  # None: reset the envs before the next rollout
        self.resumed_from: Path | None = None

    # ------------------------------------------------------------ collection
    @torch.inference_mode()
    def collect(self) -> dict[str, float]:
        """One rollout of ``num_steps`` steps of every env into the storage, then GAE."""
        env, policy, storage, cfg = self.env, self.policy, self.storage, self.cfg
        policy.train()  # the normaliser learns from what the policy sees
        if self.obs is None:
            self.obs = env.reset()
            self.reward_terms.reset()
        storage.clear()
        diverged = nan_actions = 0
        for _ in range(cfg.num_steps):
            obs = policy.normalize(self.obs)
            actions, log_probs, dist = policy.act(obs)
            values = policy.evaluate(obs)
            next_obs, rewards, terminated, truncated, info = env.step(actions)
            rewards = rewards.to(values.dtype)
            if "done_ids" in info:
                ids = info["done_ids"]
                final_values = torch.zeros_like(values)
                final_obs = policy.normalize(info["final_obs"][ids], update=False)
                final_values[ids] = policy.evaluate(final_obs)
                rewards = bootstrap_time_outs(rewards, final_values, truncated, terminated,
                                              info["diverged"], cfg.gamma)
                success = info["final_success"][ids]
                for ret, ok, length in zip(info["episode_return"].tolist(), success.tolist(),
                                           info["episode_length"].tolist(), strict=True):
                    self.episodes.append((ret, float(ok), float(length)))
            self.reward_terms.step(info.get("reward_terms", {}), info.get("done_ids"))
            diverged += int(info["diverged"].sum())
            if "nan_actions" in info:  # env steps whose action held a NaN (sent as 0)
                nan_actions += int((info["nan_actions"] > 0).sum())
            storage.add(obs, actions, dist.mean, dist.stddev, log_probs, values, rewards,
                        terminated | truncated, info.get("advantage_shaping"))
            self.obs = next_obs
        last_values = policy.evaluate(policy.normalize(self.obs, update=False))
        storage.compute_returns(last_values, cfg.gamma, cfg.lam)
        return {"diverged": float(diverged), "nan_actions": float(nan_actions)}

    # -------------------------------------------------------------- the loop
    def learn(self, max_iterations: int, logger: MetricsLogger | None = None) -> dict[str, Any]:
        """Train until ``max_iterations`` iterations in total (resumed ones included).

        Ctrl-C writes a checkpoint (unless this iteration's periodic one exists: that
        one resumes exactly) and re-raises ``KeyboardInterrupt``. Returns the last
        iteration's metrics.
        """
        steps_per_iter = self.cfg.num_steps * self.env.num_envs * distributed.world_size()
        bar = tqdm(total=max_iterations, initial=self.iteration, unit="it", disable=not
                   (self.progress and distributed.is_main()), desc="train", dynamic_ncols=True)
        row: dict[str, Any] = {}
        try:
            while self.iteration < max_iterations:
                start = time.perf_counter()
                self.normalizer_sync.mark()
                extra = self.collect()
                self.normalizer_sync.merge()
                collected = time.perf_counter()
                stats = self.alg.update(self.storage)
                learned = time.perf_counter()
                self.iteration += 1
                self.global_step += steps_per_iter
                collect_s, learn_s = collected - start, learned - collected
                self.wall_time += learned - start
                row = distributed.reduce_metrics(
                    self._metrics_row(stats, extra, collect_s, learn_s, steps_per_iter))
                if logger is not None:
                    logger.log(row)
                bar.update(1)
                bar.set_postfix(success=f"{row['success_rate']:.2f}",
                                ret=f"{row['episode_return']:.1f}",
                                sps=f"{row['fps']:.0f}", refresh=False)
                if self.save_interval and self.iteration % self.save_interval == 0:
                    self.save()
                    self.obs = None  # episodes restart at checkpoints: see the module doc
            if self.iteration and not distributed.broadcast_object(
                    self.checkpoint_path().exists()):
                self.save()
        except KeyboardInterrupt:
            bar.close()
            path = self.checkpoint_path()
            if distributed.is_distributed():  # no collective save mid-flight: the periodic one
                print(f"\ninterrupted: resume from the newest checkpoint in {path.parent}")
            elif path.exists():  # the periodic one of this iteration: exact, keep it
                print(f"\ninterrupted: the checkpoint of iteration {self.iteration} is {path}")
            else:
                print(f"\ninterrupted: checkpoint written to {self.save()}")
            raise
        finally:
            bar.close()
        return row

    def _metrics_row(self, stats: dict[str, float], extra: dict[str, float], collect_s: float,
                     learn_s: float, steps: int) -> dict[str, Any]:
        eps = torch.tensor(list(self.episodes), dtype=torch.float64).reshape(-1, 3)
        mean = eps.mean(0).tolist() if len(eps) else [math.nan] * 3
        storage = self.storage
        return {
            "iteration": self.iteration,
            "env_steps": self.global_step,
            "wall_time": round(self.wall_time, 3),
            "episode_return": mean[0],
            "success_rate": mean[1],
            "episode_length": mean[2],
            "fps": steps / (collect_s + learn_s),
            "collection_fps": steps / collect_s,
            "learning_fps": steps / learn_s,
            "collection_s": collect_s,
            "learning_s": learn_s,
            "approx_kl": stats["approx_kl"],
            "clip_fraction": stats["clip_fraction"],
            "explained_variance": explained_variance(storage.values.flatten(),
                                                     storage.returns.flatten()),
            "entropy": stats["loss/entropy"],
            "learning_rate": stats["learning_rate"],
            "policy_loss": stats["loss/policy"],
            "value_loss": stats["loss/value"],
            "action_std": self.policy.log_std.exp().mean().item(),
            "diverged": extra["diverged"],
            "nan_actions": extra.get("nan_actions", 0.0),
            **self.reward_terms.means(),
        }

    # ----------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue this run.

        A collective under torchrun: ``ranks`` holds every rank's RNG states and episodes.
        """
        ranks = distributed.gather_objects(self._rank_state()) \
            if distributed.is_distributed() else None
        return {
            "format": CHECKPOINT_FORMAT,
            "policy": self.policy.state_dict(),
            "ppo": self.alg.state_dict(),
            "iteration": self.iteration,
            "global_step": self.global_step,
            "wall_time": self.wall_time,
            "episodes": torch.tensor(list(self.episodes), dtype=torch.float64).reshape(-1, 3),
            "rng": {"torch": torch.get_rng_state(),
                    "env": self.env.rng_state() if isinstance(self.env, RngStateful)
                    else None},
            "obs_dim": self.env.obs_dim,
            "action_dim": self.env.action_dim,
            "config": asdict(self.cfg),
            "world_size": distributed.world_size(),
            **({"ranks": ranks} if ranks is not None else {}),
        }

    def _rank_state(self) -> dict[str, Any]:
        """This rank's own RNG states and recent episodes."""
        return {"torch": torch.get_rng_state(),
                "env": self.env.rng_state() if isinstance(self.env, RngStateful) else None,
                "episodes": torch.tensor(list(self.episodes),
                                         dtype=torch.float64).reshape(-1, 3)}

    def checkpoint_path(self) -> Path:
        """Where the checkpoint of the current iteration goes."""
        return checkpoint_path(self.run_dir, self.iteration)

    def save(self, path: str | Path | None = None) -> Path:
        """Write a checkpoint atomically (tmp file + ``os.replace``); returns its path.

        Called on every rank under torchrun; rank 0 writes, and every rank returns once
        the file is there.
        """
        state, path = self.state_dict(), Path(path or self.checkpoint_path())
        if distributed.is_main():
            save_checkpoint(state, path)
        distributed.barrier()
        return path

    def load(self, path: str | Path) -> Path:
        """Restore a checkpoint (a file or a run folder's newest); returns the file read."""
        path = find_checkpoint(path)
        state = load_checkpoint(path)
        try:
            distributed.check_world_size(state.get("world_size"), str(path))
        except distributed.WorldSizeError as err:
            raise CheckpointError(str(err)) from err
        if "ranks" in state:
            state = {**state, **state["ranks"][distributed.rank()]}
            state["rng"] = {"torch": state["torch"], "env": state["env"]}
        if (state.get("obs_dim"), state.get("action_dim")) != (self.env.obs_dim,
                                                                self.env.action_dim):
            raise CheckpointError(
                f"{path} was trained with obs/action dims {state.get('obs_dim')}/"
                f"{state.get('action_dim')}, this env has {self.env.obs_dim}/"
                f"{self.env.action_dim}")
        try:
            self.policy.load_state_dict(state["policy"])
            self.alg.load_state_dict(state["ppo"])
        except (RuntimeError, KeyError, ValueError) as err:
            raise CheckpointError(f"{path} does not fit this policy/config: {err}") from err
        self.iteration = int(state["iteration"])
        self.global_step = int(state["global_step"])
        self.wall_time = float(state.get("wall_time", 0.0))
        self.episodes.clear()
        self.episodes.extend(tuple(r) for r in state.get("episodes", torch.zeros(0, 3)).tolist())
        torch.set_rng_state(state["rng"]["torch"])
        if isinstance(self.env, RngStateful) and state["rng"].get("env") is not None:
            self.env.set_rng_state(state["rng"]["env"])
        self.obs = None
        self.resumed_from = path
        return path
