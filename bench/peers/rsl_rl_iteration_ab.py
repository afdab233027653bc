"""Per-iteration cost of our PPO and rsl_rl's, interleaved in one process, and where it goes.

Runs in the peer venv made by ``scripts/peer_env.sh rsl_rl`` (it has both learners):

    .venv-rsl_rl/bin/python bench/peers/rsl_rl_iteration_ab.py --repeats 12 --out ab.json

Both train ``panda_reach`` with the shipped settings, each on its own env (the same seed),
one iteration each in turn after a warm-up, so both see the same load on a shared machine.
Every iteration is timed in wall-clock and in process CPU seconds, and split into the same
parts for both: physics stepping (``Physics.step``), the rest of the env step (observation,
reward and reset terms), the rest of collection (the policy's passes, storage, bookkeeping),
GAE, and in learning the backward passes, gradient clipping, the optimiser step and the
rest (forward passes, losses, minibatches). Printed as JSON: per contender the minimum and
median of the iteration totals and the median of every part.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from omegaconf import OmegaConf
from ppo import train_cfg

from embodied.envs import make_train_env
from embodied.rl import OnPolicyRunner, PPOConfig

try:
    from rsl_rl_adapter import make_runner
except ImportError as err:  # not the peer venv
    sys.exit(f"error: {err}; run this with .venv-rsl_rl/bin/python (made by "
             "scripts/peer_env.sh rsl_rl)")

PARTS = ("physics", "env_rest", "collection_rest", "gae", "backward", "clip_grad",
         "optimizer", "learning_rest")


class Spans:
    """Wall-clock seconds spent in wrapped calls, per key, for the contender running now."""

    def __init__(self) -> None:
        self.current = ""
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, owner: Any, name: str, key: str) -> None:
        """Replace ``owner.name`` by a timed call that adds to ``<current>/<key>``."""
        fn: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[f"{self.current}/{key}"] += time.perf_counter() - start

        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        """The current contender's seconds per key since the last call; resets them."""
        prefix = f"{self.current}/"
        out = {k[len(prefix):]: v for k, v in self.seconds.items() if k.startswith(prefix)}
        for key in [k for k in self.seconds if k.startswith(prefix)]:
            del self.seconds[key]
        return out


def split(total: float, s: dict[str, float]) -> dict[str, float]:
    """An iteration's parts from its total and the timed spans (see the module doc)."""
    get = s.get
    learning = get("learning", 0.0)
    collection = total - learning
    backward, clip, opt = get("backward", 0.0), get("clip_grad", 0.0), get("optimizer", 0.0)
    return {"total": total, "collection": collection, "learning": learning,
            "physics": get("physics", 0.0),
            "env_rest": get("env_step", 0.0) - get("physics", 0.0),
            "collection_rest": collection - get("env_step", 0.0) - get("gae", 0.0),
            "gae": get("gae", 0.0), "backward": backward, "clip_grad": clip,
            "optimizer": opt, "learning_rest": learning - backward - clip - opt}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=12, help="timed iterations per contender")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations first")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = p.parse_args()
    cfg = train_cfg("panda_reach", f"seed={args.seed}")
    torch.set_num_threads(int(cfg.torch_threads))
    spans = Spans()
    spans.wrap(torch.Tensor, "backward", "backward")  # both call loss.backward()
    spans.wrap(torch.nn.utils, "clip_grad_norm_", "clip_grad")  # both: nn.utils.clip_...

    env = make_train_env(cfg, int(cfg.num_envs), args.seed)
    algo = PPOConfig.from_dict(OmegaConf.to_container(cfg.algo, resolve=True))
    ours = OnPolicyRunner(env, algo, tempfile.mkdtemp(), seed=args.seed, save_interval=0,
                          progress=False)
    spans.wrap(env.physics, "step", "physics")
    spans.wrap(env, "step", "env_step")
    spans.wrap(ours.storage, "compute_returns", "gae")
    spans.wrap(ours.alg, "update", "learning")
    spans.wrap(ours.alg.optimizer, "step", "optimizer")

    peer_env = make_train_env(cfg, int(cfg.num_envs), args.seed)
    peer = make_runner(peer_env, cfg.algo, args.seed)
    spans.wrap(peer_env.physics, "step", "physics")
    spans.wrap(peer_env, "step", "env_step")
    spans.wrap(peer.alg, "compute_returns", "gae")
    spans.wrap(peer.alg, "update", "learning")
    spans.wrap(peer.alg.optimizer, "step", "optimizer")

    def our_iteration() -> None:  # OnPolicyRunner.learn's work, without its checkpoint
        ours.collect()
        ours.alg.update(ours.storage)

    def peer_iteration() -> None:
        peer.learn(1)

    rows: dict[str, list[dict[str, float]]] = {"ours": [], "rsl_rl": []}
    cpu: dict[str, list[float]] = {"ours": [], "rsl_rl": []}
    for i in range(args.warmup + args.repeats):
        for name, step in (("ours", our_iteration), ("rsl_rl", peer_iteration)):
            spans.current = name
            start, start_cpu = time.perf_counter(), time.process_time()
            step()
            total, total_cpu = time.perf_counter() - start, time.process_time() - start_cpu
            parts = spans.take()
            if i >= args.warmup:
                rows[name].append(split(total, parts))
                cpu[name].append(total_cpu)
    result: dict[str, Any] = {"task": "panda_reach", "num_envs": int(cfg.num_envs),
                              "steps_per_iteration": int(cfg.num_envs) * int(algo.num_steps),
                              "repeats": args.repeats, "unit": "ms per iteration"}
    for name, its in rows.items():
        totals = [r["total"] for r in its]
        result[name] = {
            "total_min": round(min(totals) * 1e3, 1),
            "total_median": round(statistics.median(totals) * 1e3, 1),
            "cpu_median": round(statistics.median(cpu[name]) * 1e3, 1),
            **{key: round(statistics.median(r[key] for r in its) * 1e3, 1)
               for key in ("collection", "learning", *PARTS)},
        }
    result["rsl_rl_over_ours_median"] = round(result["rsl_rl"]["total_median"]
                                              / result["ours"]["total_median"], 3)
    result["rsl_rl_over_ours_cpu_median"] = round(result["rsl_rl"]["cpu_median"]
                                                  / result["ours"]["cpu_median"], 3)
    env.close()
    peer_env.close()
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
