"""Online refresh of a learned PRM during RL (RoboFuME / PROGRESSOR style).

Inside PPO the reward loop renders and scores a few envs' states (``rl_wrapper``'s
distilled scoring). :class:`PRMRefresher` keeps those frames, with the policy
observations they belong to, in a bounded buffer (:class:`LoopBuffer`, the newest
``buffer_size`` states) and, every ``every`` PPO rollouts, fine-tunes the PRM ``steps``
gradient steps on them. Each minibatch mixes ``replay_fraction`` rows of the PRM's own
training data (its checkpoint names the dataset; with that part's counterfactual,
near-miss and paraphrased instructions as in ``train.py``), so it does not forget what
it learned there. The caller swaps the PRM only between rollouts, so the potential
stays fixed within each one and the shaping stays potential-based.

Labels of the loop's states (``labels``):

- ``sim``: the simulator's progress and success of each kept state (simulation only).
- ``pushdown``: label-free, no progress label is read (PROGRESSOR's push-down): states of
  episodes that ended without the task's success are trained towards ``1 - push`` times
  the PRM's own current prediction, so the policy cannot collect potential from states
  unlike the demonstrations; states where success held (the sparse reward the loop has
  anyway) towards progress 1 and success 1. States of episodes still running are not used.

What is trained (``train``):

- ``all``: every trainable weight of the PRM; each gradient step runs the whole network
  on the minibatch's frames, and after the refresh every kept state is scored again.
- ``top``: the PRM's convolutional trunk is frozen; the layers above it (the encoder's
  projection, the view embeddings, the instruction encoder, the heads) are trained.
  The trunk's features of each loop state are computed once, when it is labelled (the
  same pass that scores it), and kept instead of its frames; those of the replayed
  training data once, when the refresher starts. A gradient step and the rescoring of
  the kept states then run only the small layers above the trunk. Needs the ``cnn``
  encoder. Training on the cached features is training the whole network with the
  trunk's weights fixed (tested to float tolerance).

When it runs (``overlap``):

- ``false``: at the rollout boundary where it is due, before the next rollout begins
  (the loop waits for it).
- ``true``: a copy of the buffer is taken there and the refresh trains a copy of the PRM
  on it in a background thread while the next rollout is collected (labelled by the PRM
  of before); at the next rollout boundary the loop waits for it, takes its weights and
  its rescoring of the copied states, and scores only the states labelled since. The
  same computation as ``false`` one rollout later; it saves wall-clock time only where
  a core is free for the thread.

The loop's frames are scored without start views (``start_views=False``): a PRM with
temporal context is trained here on its current views alone, as its context dropout did.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodied.config import ConfigError
from embodied.reward.prm.checkpoint import save_prm
from embodied.reward.prm.data import FrameDataset, load_frames
from embodied.reward.prm.inference import FastScorer, make_scorer
from embodied.reward.prm.labels import expected_progress, near_miss_instructions
from embodied.reward.prm.metrics import pearson
from embodied.reward.prm.model import LearnedPRM
from embodied.reward.prm.network import view_dropout_mask
from embodied.reward.prm.train import TrainConfig, instructions, prm_loss

LABELS = ("sim", "pushdown")
TRAIN = ("all", "top")
TRUNK = "encoder.conv."  # parameter-name prefix of the cnn encoder's convolutional trunk


@dataclass
class RefreshConfig:
    """``reward.loop.refresh``: when and how the PRM is fine-tuned on the loop's states."""

    enabled: bool = False
    every: int = 2                # PPO rollouts between refreshes
    steps: int = 32               # gradient steps per refresh
    batch_size: int = 64          # states per gradient step (loop + replay)
    replay_fraction: float = 0.5  # share of each minibatch from the PRM's training data
    learning_rate: float = 3e-4
    weight_decay: float = 1e-4
    buffer_size: int = 4096       # loop states kept (the newest)
    labels: str = "sim"           # sim | pushdown (label-free)
    push: float = 0.5             # pushdown: target = (1 - push) x prediction
    train: str = "all"            # all | top (the trunk frozen, its features cached)
    overlap: bool = False         # train in a background thread during the next rollout

    def __post_init__(self) -> None:
        """Reject settings that cannot work, naming the fix."""
        if self.labels not in LABELS:
            raise ConfigError(f"reward.loop.refresh.labels must be one of {list(LABELS)}, "
                             f"got '{self.labels}'")
        if self.train not in TRAIN:
            raise ConfigError(f"reward.loop.refresh.train must be one of {list(TRAIN)}, "
                             f"got '{self.train}'")
        if self.every < 1 or self.steps < 1 or self.batch_size < 2 or self.buffer_size < 1:
            raise ConfigError("reward.loop.refresh: every and steps must be >= 1, batch_size "
                             ">= 2 and buffer_size >= 1")
        if not 0.0 <= self.replay_fraction < 1.0 or not 0.0 <= self.push <= 1.0:
            raise ConfigError("reward.loop.refresh: replay_fraction must be in [0, 1) and push "
                             "in [0, 1]")


class LoopBuffer:
    """The newest ``size`` labelled loop states (a ring buffer).

    Per state: the policy observation, the PRM's input (``frames``: the views, uint8
    [V, H, W, 3] in the PRM's camera order, or the trunk's features of them [V, F]), the
    simulator's progress and success, the PRM's score when it was labelled, its env and
    its episode's outcome (-1 while the episode runs, then 0 failed / 1 succeeded).
    """

    def __init__(self, size: int, obs_dim: int) -> None:
        self.capacity, self.obs_dim = int(size), int(obs_dim)
        self.frames: torch.Tensor | None = None  # allocated at the first add
        self.obs = torch.zeros(size, obs_dim)
        self.progress = torch.zeros(size)
        self.success = torch.zeros(size, dtype=torch.bool)
        self.score = torch.zeros(size)
        self.env = torch.full((size,), -1, dtype=torch.long)
        self.outcome = torch.full((size,), -1, dtype=torch.long)
        self.fresh = torch.zeros(size, dtype=torch.bool)  # added since the last refresh
        self.size = self.head = 0
        self.added = 0  # states ever added

    def __len__(self) -> int:
        """How many states are kept."""
        return self.size

    def add(self, obs: torch.Tensor, frames: torch.Tensor, progress: torch.Tensor,
            success: torch.Tensor, score: torch.Tensor, env_ids: torch.Tensor) -> None:
        """Keep ``n`` states (oldest dropped): obs [n, D], frames [n, V, ...], rest [n]."""
        n = len(obs)
        if self.frames is None:
            self.frames = torch.zeros((self.capacity, *frames.shape[1:]), dtype=frames.dtype)
        idx = (self.head + torch.arange(n)) % self.capacity
        self.obs[idx] = obs.float()
        self.frames[idx] = frames
        self.progress[idx] = progress.float()
        self.success[idx] = success.bool()
        self.score[idx] = score.float()
        self.env[idx] = env_ids.long()
        self.outcome[idx] = -1
        self.fresh[idx] = True
        self.head = int((self.head + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        self.added += n

    def end_episodes(self, env_ids: torch.Tensor, succeeded: torch.Tensor) -> None:
        """Record the outcome of the running episodes of ``env_ids`` (``succeeded`` [n])."""
        pending = (self.outcome == -1) & (self.env >= 0)
        for env, ok in zip(env_ids.tolist(), succeeded.bool().tolist(), strict=True):
            self.outcome[pending & (self.env == env)] = int(ok)

    def rows(self) -> torch.Tensor:
        """Indices of the kept states, oldest first."""
        if self.size < self.capacity:
            return torch.arange(self.size)
        return (self.head + torch.arange(self.capacity)) % self.capacity


class PRMRefresher:
    """Fine-tunes a :class:`LearnedPRM` on the loop's states (see the module doc)."""

    def __init__(self, model: LearnedPRM, cfg: RefreshConfig, obs_dim: int,
                 cameras: Sequence[str], instruction: str, seed: int = 0) -> None:
        net = getattr(model, "net", None)
        if net is None or not isinstance(model, LearnedPRM):
            raise ConfigError("reward.loop.refresh fine-tunes the learned PRM (reward.model.name="
                             f"prm); {type(model).__name__} cannot be refreshed: set "
                             "reward.loop.refresh.enabled=false")
        missing = [c for c in net.cfg.cameras if c not in cameras]
        if missing:
            raise ConfigError(f"reward.loop.refresh: the loop renders {list(cameras)} but the PRM "
                             f"needs {missing}; set reward.loop.cameras=null")
        self.top = cfg.train == "top"
        if self.top and not isinstance(model.predict, FastScorer):
            raise ConfigError("reward.loop.refresh.train=top caches the features of the PRM's "
                             "cnn trunk; this PRM has another encoder: set "
                             "reward.loop.refresh.train=all")
        self.model, self.net, self.cfg = model, net, cfg
        self.order = [list(cameras).index(c) for c in net.cfg.cameras]
        self.instruction = instruction
        self.buffer = LoopBuffer(cfg.buffer_size, obs_dim)
        # the network the refresh trains: the PRM itself, or (overlap) a copy whose weights
        # the PRM takes when the refresh is collected (the sentence model stays shared)
        self.train_net = net
        if cfg.overlap:
            text = getattr(net.text, "embedder", None)
            self.train_net = copy.deepcopy(net, {id(text): text} if text is not None else {})
        params = [p for name, p in self.train_net.named_parameters()
                  if p.requires_grad and not (self.top and name.startswith(TRUNK))]
        self.params = params
        self.opt = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
        self.rng = np.random.default_rng(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.replay: FrameDataset | None = None
        if cfg.replay_fraction > 0:
            path = model.info.get("data")
            try:
                self.replay = load_frames(path, mmap=True)
            except (FileNotFoundError, TypeError) as e:
                raise FileNotFoundError(
                    f"reward.loop.refresh replays the PRM's training data, but {path!r} is not "
                    "there; keep the dataset (embodied reward train keep_data=true) or set "
                    "reward.loop.refresh.replay_fraction=0") from e
            self.replay_rows = self.replay.rows("train")
            self.replay_feats = self._replay_features() if self.top else None
            self.others = list(self.replay.meta["counterfactual_instructions"])
            self.near = [t for texts in near_miss_instructions(self.replay.instruction).values()
                         for t in texts]
        self.log: list[dict[str, Any]] = []
        self.seconds = 0.0
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None

    def _replay_features(self, chunk: int = 1024) -> torch.Tensor:
        """Trunk features [R, V, F] of the replayed training rows (``replay_rows`` order)."""
        trunk = self.model.predict.trunk
        rows = self.replay_rows
        return torch.cat([trunk(torch.from_numpy(np.ascontiguousarray(
            self.replay.frames[rows[i:i + chunk]]))) for i in range(0, len(rows), chunk)])

    # ---------------------------------------------------------------- collect
    def add(self, obs: torch.Tensor, frames: torch.Tensor, progress: torch.Tensor,
            success: torch.Tensor, score: torch.Tensor, env_ids: torch.Tensor) -> None:
        """Keep labelled loop states; ``frames`` [n, V, H, W, 3] in the loop's camera order.

        With ``train=top`` the trunk's features of the frames are kept instead.
        """
        frames = frames[:, self.order]
        if self.top:
            frames = self.model.predict.trunk(frames)
        self.buffer.add(obs, frames, progress, success, score, env_ids)

    def score_and_add(self, obs: torch.Tensor, frames: torch.Tensor, progress: torch.Tensor,
                      success: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        """The PRM's progress [n] of loop ``frames`` [n, V, H, W, 3], which are then kept.

        The same numbers as ``model.score`` of the frames with the loop's camera names;
        with ``train=top`` the trunk runs once for both the score and the kept features.
        """
        frames = frames[:, self.order]
        texts = [self.instruction] * len(frames)
        if self.top:
            feats = self.model.predict.trunk(frames)
            score = self.model.predict.from_trunk(feats, texts)[0].float().cpu()
            self.buffer.add(obs, feats, progress, success, score, env_ids)
            return score
        score = self.model.score(frames, self.instruction,
                                 cameras=list(self.net.cfg.cameras)).progress.float().cpu()
        self.buffer.add(obs, frames, progress, success, score, env_ids)
        return score

    def end_episodes(self, env_ids: torch.Tensor, succeeded: torch.Tensor) -> None:
        """The episodes of ``env_ids`` ended; ``succeeded``: success held in them at some step."""
        self.buffer.end_episodes(env_ids, succeeded)

    # ----------------------------------------------------------------- update
    def _loop_targets(self, buf: LoopBuffer, rows: torch.Tensor, frames: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        success = buf.success[rows].float()
        if self.cfg.labels == "sim":
            return buf.progress[rows], success
        with torch.no_grad():  # pushdown: below the PRM's own current belief
            logits = self._forward(frames, [self.instruction] * len(rows), None)[0]
            pred = expected_progress(logits)
        target = torch.where(buf.success[rows], 1.0, (1.0 - self.cfg.push) * pred)
        return target, success

    def _usable(self, buf: LoopBuffer) -> torch.Tensor:
        rows = buf.rows()
        if self.cfg.labels == "pushdown":  # finished episodes only
            rows = rows[buf.outcome[rows] >= 0]
            rows = rows[(buf.outcome[rows] == 0) | buf.success[rows]]
        return rows

    def _forward(self, inputs: torch.Tensor, texts: list[str], present: torch.Tensor | None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Progress logits [B, K] and success logits [B] of frames or (``top``) features."""
        if not self.top:
            return self.train_net(inputs, texts, present)
        out = self.train_net.fuse(self.train_net.encoder.fc(inputs), texts, present)
        return out[:, :-1], out[:, -1]

    def _replay_batch(self, n: int) -> tuple[torch.Tensor, list[str], torch.Tensor, torch.Tensor]:
        data = self.replay
        rows = np.sort(self.rng.choice(self.replay_rows, size=n))
        if self.replay_feats is not None:
            frames = self.replay_feats[np.searchsorted(self.replay_rows, rows)]
        else:
            frames = torch.from_numpy(np.ascontiguousarray(data.frames[rows]))
        texts, negative = instructions(data.instruction, self.others, self.near, n,
                                       TrainConfig(), self.rng)
        neg = torch.from_numpy(negative)
        target_p = torch.where(neg, 0.0, torch.from_numpy(data.progress[rows]))
        target_s = torch.where(neg, 0.0, torch.from_numpy(data.success[rows].astype(np.float32)))
        return frames, texts, target_p, target_s

    def update(self) -> dict[str, Any] | None:
        """``steps`` gradient steps on loop + replay minibatches; None if nothing to learn from.

        Afterwards the PRM's scoring path uses the new weights. The log entry (also kept
        in ``log``): the mean loss and, on the states labelled since the previous refresh
        (scored when they were labelled, by the PRM of that time), the Pearson correlation
        of the PRM's scores with the simulator's progress, their mean error (bias) and the
        spread (std) of the true progress there.
        """
        if self.cfg.overlap:
            raise RuntimeError("reward.loop.refresh.overlap: use start() and finish()")
        entry = self._train(self.buffer)
        if entry is not None:
            self.model.weights_changed()
            self.log.append(entry)
        return entry

    def start(self) -> None:
        """(``overlap``) Begin a refresh on a copy of the buffer in a background thread."""
        if self._pending is not None:
            raise RuntimeError("a refresh is still running: finish() it first")
        with torch.inference_mode(False):  # normal tensors: the thread is not in that mode
            snapshot = copy.deepcopy(self.buffer)
        self.buffer.fresh[:] = False
        self._pool = self._pool or ThreadPoolExecutor(1, thread_name_prefix="prm-refresh")
        self._pending = self._pool.submit(self._train_and_rescore, snapshot)

    def _train_and_rescore(self, buf: LoopBuffer
                           ) -> tuple[dict[str, Any] | None, LoopBuffer, torch.Tensor | None]:
        entry = self._train(buf)
        if entry is None:
            return None, buf, None
        return entry, buf, self._rescore(buf, buf.rows(), make_scorer(self.train_net))

    def finish(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(``overlap``) Wait for the running refresh and give the PRM its weights.

        Returns what ``relabel`` returns (the kept states and their progress by the new
        PRM: the copied states rescored in the thread, the states labelled since scored
        now), or None if no refresh ran or it had nothing to learn from.
        """
        if self._pending is None:
            return None
        entry, snap, scores = self._pending.result()
        self._pending = None
        if entry is None:
            return None
        self.net.load_state_dict(self.train_net.state_dict())
        self.model.weights_changed()
        self.log.append(entry)
        rows = self.buffer.rows()
        new = min(self.buffer.added - snap.added, len(rows))
        kept = scores[len(scores) - (len(rows) - new):]
        since = self._rescore(self.buffer, rows[len(rows) - new:], self.model.predict)
        return self.buffer.obs[rows], torch.cat([kept, since])

    def close(self) -> None:
        """Wait for a running refresh (its result is dropped) and stop the thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool, self._pending = None, None

    def _train(self, buf: LoopBuffer) -> dict[str, Any] | None:
        """The refresh's gradient steps on ``buf`` (training ``train_net``); its log entry."""
        usable = self._usable(buf)
        n_replay = round(self.cfg.batch_size * self.cfg.replay_fraction) if self.replay else 0
        n_loop = self.cfg.batch_size - n_replay
        if len(usable) < n_loop:
            return None
        t = time.perf_counter()
        fresh = buf.rows()[buf.fresh[buf.rows()]]
        score, true = buf.score[fresh], buf.progress[fresh]
        corr = pearson(score.numpy(), true.numpy()) if len(fresh) > 2 else math.nan
        bias = float((score - true).mean()) if len(fresh) else math.nan
        buf.fresh[:] = False
        self.train_net.train()
        losses = []
        with torch.inference_mode(False), torch.enable_grad():
            for _ in range(self.cfg.steps):
                pick = usable[torch.randint(len(usable), (n_loop,), generator=self.gen)]
                frames = buf.frames[pick]
                target_p, target_s = self._loop_targets(buf, pick, frames)
                texts = [self.instruction] * n_loop
                if n_replay:
                    r_frames, r_texts, r_p, r_s = self._replay_batch(n_replay)
                    frames = torch.cat([frames, r_frames])
                    texts += r_texts
                    target_p, target_s = torch.cat([target_p, r_p]), torch.cat([target_s, r_s])
                present = view_dropout_mask(len(frames), frames.shape[1],
                                            self.train_net.cfg.view_dropout, self.gen)
                loss = prm_loss(self._forward, frames, texts, target_p.float(),
                                target_s.float(), present)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.params, 1.0)
                self.opt.step()
                losses.append(loss.item())
        self.train_net.eval()
        self.seconds += time.perf_counter() - t
        return {"refresh": len(self.log) + 1, "loss": round(float(np.mean(losses)), 4),
                "loop_states": len(usable),
                "pearson_latest": None if math.isnan(corr) else round(corr, 4),
                "bias_latest": None if math.isnan(bias) else round(bias, 4),
                "true_std_latest": round(float(true.std()), 4) if len(fresh) > 1 else None}

    def save(self, path: str | Path, env_steps: int) -> Path:
        """Write the PRM as it is now as a checkpoint (``load_prm``, ``embodied reward eval``).

        Its ``info`` is the loaded checkpoint's (instruction, cameras, dataset, success
        calibration) without the held-out metrics, which were of the weights before the
        refresh, plus ``refreshed``: where it came from, the refreshes, their labels and
        the env steps of RL it was refreshed over.
        """
        info = {k: v for k, v in self.model.info.items() if k != "metrics"}
        info["refreshed"] = {"from": getattr(self.model, "checkpoint", None),
                             "refreshes": len(self.log), "labels": self.cfg.labels,
                             "env_steps": int(env_steps), "log": self.log}
        return save_prm(path, self.net, info)

    def relabel(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The kept states' observations [n, D] and their progress by the current PRM [n]."""
        rows = self.buffer.rows()
        return self.buffer.obs[rows], self._rescore(self.buffer, rows, self.model.predict)

    @torch.no_grad()
    def _rescore(self, buf: LoopBuffer, rows: torch.Tensor, scorer: Any,
                 batch: int = 512) -> torch.Tensor:
        """Progress [n] of ``buf``'s ``rows`` by ``scorer`` (``make_scorer``'s).

        Kept frames (in the PRM's camera order) or, with ``train=top``, kept trunk features
        (``FastScorer.from_trunk``).
        """
        score = scorer.from_trunk if self.top else scorer
        out = [score(buf.frames[rows[i:i + batch]],
                     [self.instruction] * len(rows[i:i + batch]))[0].float().cpu()
               for i in range(0, len(rows), batch)]
        return torch.cat(out) if out else torch.zeros(0)
