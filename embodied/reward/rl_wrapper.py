"""Reward models inside the RL loop: a batched env whose ``step`` returns the mode's reward.

``RewardEnv(env, mixer, model)`` keeps the batched-env interface (the PPO runner does
not know it is there) and replaces the env's reward by ``mixer``'s (sparse, prm,
prm+sparse, oracle; ``embodied.reward.shaping``). Where the progress potential comes
from (``scoring``):

- state models (``sim_progress``): the simulator's own progress, no pixels.
- ``direct``: every ``every`` steps the task cameras of *all* envs are rendered and
  scored in one batched call; in between, the last scores are held. Envs that finished
  get their terminal frames scored (rendered before the auto-reset,
  ``env.request_final_frames``) and their new first frames rendered and scored, so the
  potential of every episode boundary is exact.
- ``distilled``: the reward model scores only ``label_envs`` envs every ``label_every``
  steps; a small MLP on the policy's own observations learns to predict those scores
  (regression, trained online) and gives the potential of every env at every step
  and of terminal observations (``info["final_obs"]``), without rendering them (the
  way ONI distils LLM feedback into an intrinsic reward network). The potential is a
  frozen copy of that MLP, refreshed every ``refresh_every`` env steps (PPO's rollout
  length): within a rollout every transition is shaped by one fixed potential, so the
  shaping is exactly potential-based there; the learning MLP changes it only between
  rollouts. A state model (``sim_progress``) can be distilled the same way: the
  simulator's progress of the labelled envs then takes the place of the reward
  model's scores, which is the control that tells distillation error from model error.
- ``refresh`` (``reward.loop.refresh``, ``embodied.reward.prm.refresh``): the learned
  PRM is fine-tuned during RL on the frames the distillation labels (kept with their
  simulator's progress, or label-free), every ``every`` rollouts at a rollout boundary;
  the kept states are then scored again by the new PRM and replace the MLP's buffer
  (older labels of the old PRM are dropped; with ``distill.keep_older_labels`` they stay
  and only the rescored states' labels change), and the MLP is refitted before it is
  copied into the potential. The potential still changes only between rollouts.
- a PRM with temporal context (``start_context``) also reads the views of each env's
  first state: they are rendered at every episode start (of the envs that began an
  episode) and kept, and handed to the model as the cameras ``<camera>@start`` beside
  the current views (a terminal frame with the start of its own episode). With
  ``start_views=False`` it scores the current views alone (no start renders; the model
  was trained with context dropout for this).
- ``reward.shaping_target: advantage``: the weighted shaping term is not in the
  returned reward but in ``info["advantage_shaping"]`` [B], for the PPO runner to add
  to the advantages (``embodied.rl.storage``); the critic then learns the base reward.
- ``plane_extent``: the frames are rendered with the floor drawn out to that many metres
  only (``EnvConfig.render_plane_extent``; several times faster software rendering,
  pixels of floor inside the extent unchanged).
- episode models (``embodied.reward.episodic``: RoboReward, GRM, SARM-style) read each
  env's episode so far: ``direct`` only; every scored row carries its env id, and a
  finished env's terminal frames are scored before its episode is ended, so its new
  first frame begins a new history.

Time per part (``timing``): physics (the wrapped env's step), render, model, distill.

How well the paid shaping follows the task (``timing_summary()["potential_step_delta"]``,
distilled mode on a task with a simulator progress): the Pearson correlation of the
potential's change over each transition, ``phi(s') - phi(s)`` as the shaping used them,
with the simulator's change of progress, over every env and step that did not end an
episode, overall and per window of ``DELTA_WINDOW_ROLLOUTS`` rollouts.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from embodied.config import ConfigError
from embodied.reward.base import RewardModel
from embodied.reward.episodic import EpisodeRewardModel
from embodied.reward.prm.checkpoint import CHECKPOINT_NAME
from embodied.reward.prm.refresh import PRMRefresher, RefreshConfig
from embodied.reward.shaping import RewardMixer
from embodied.rl.normalizer import EmpiricalNormalization

SCORING = ("direct", "distilled")
DELTA_WINDOW_ROLLOUTS = 64  # rollouts per window of the step-delta correlation's log


class RunningPearson:
    """Pearson correlation of pairs added in batches, from running sums (float64)."""

    def __init__(self) -> None:
        self.sums = torch.zeros(6, dtype=torch.float64)  # n, x, y, xx, yy, xy

    def add(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Add the pairs ``(x[i], y[i])``."""
        x, y = x.double().flatten(), y.double().flatten()
        self.sums += torch.stack([torch.tensor(float(len(x)), dtype=torch.float64), x.sum(),
                                  y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum()])

    @property
    def count(self) -> int:
        """Pairs added so far."""
        return int(self.sums[0])

    def value(self) -> float | None:
        """The correlation; None with fewer than 2 pairs or a constant side."""
        n, sx, sy, sxx, syy, sxy = self.sums.tolist()
        if n < 2:
            return None
        vx, vy = sxx - sx * sx / n, syy - sy * sy / n
        if vx <= 0 or vy <= 0:
            return None
        return (sxy - sx * sy / n) / (vx * vy) ** 0.5


@dataclass
class DistillConfig:
    """The distilled potential: which states the reward model labels, and the MLP."""

    label_envs: int = 16          # envs rendered and scored per labelling step
    label_every: int = 2          # env steps between labelling steps
    hidden: list[int] = field(default_factory=lambda: [128, 128])
    learning_rate: float = 1e-3
    updates: int = 8              # gradient steps per labelling step
    batch_size: int = 256
    buffer_size: int = 50_000
    refresh_every: int = 32       # env steps between copies of the MLP into the potential
    keep_older_labels: bool = False  # after a PRM refresh: rewrite the rescored states' labels
                                     # and keep the older ones (False: drop them)


class ProgressMLP(nn.Module):
    """Policy observation -> progress in [0, 1] (normalised input, sigmoid output)."""

    def __init__(self, obs_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.norm = EmpiricalNormalization(obs_dim)
        layers, d = [], obs_dim
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ELU()]
            d = h
        self.net = nn.Sequential(*layers, nn.Linear(d, 1))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Progress [B] in [0, 1] of observations ``obs`` [B, obs_dim]."""
        return self.net(self.norm.normalize(obs)).squeeze(-1).sigmoid()


class Distiller:
    """Online regression of a reward model's progress onto the policy observation."""

    def __init__(self, obs_dim: int, cfg: DistillConfig, seed: int = 0) -> None:
        self.cfg = cfg
        if cfg.refresh_every < 1:
            raise ValueError(f"distill.refresh_every must be >= 1 env step, got "
                             f"{cfg.refresh_every}")
        self.mlp = ProgressMLP(obs_dim, cfg.hidden)
        self.potential = copy.deepcopy(self.mlp).requires_grad_(False)
        # fused: one kernel per step for all parameters (the MLP is small, so per-tensor
        # dispatch was most of a fitting step); the same update up to float rounding
        self.opt = torch.optim.Adam(self.mlp.parameters(), lr=cfg.learning_rate, fused=True)
        self.obs = torch.zeros(cfg.buffer_size, obs_dim)
        self.target = torch.zeros(cfg.buffer_size)
        self.size = self.head = 0
        self.gen = torch.Generator().manual_seed(seed)
        self.last_loss = float("nan")

    def add(self, obs: torch.Tensor, progress: torch.Tensor) -> None:
        """Store labelled states and fit the MLP ``updates`` steps on the buffer."""
        with torch.inference_mode(False):
            obs, progress = obs.detach().float().clone(), progress.detach().float().clone()
            n = len(obs)
            idx = (self.head + torch.arange(n)) % self.cfg.buffer_size
            self.obs[idx], self.target[idx] = obs, progress
            self.head = int((self.head + n) % self.cfg.buffer_size)
            self.size = min(self.size + n, self.cfg.buffer_size)
            self.mlp.norm.update(obs)
        self.fit(self.cfg.updates)

    def relabel(self, obs: torch.Tensor, progress: torch.Tensor) -> None:
        """The reward model changed and scored ``obs`` [n, D] again: targets ``progress`` [n].

        ``obs`` are the newest ``n`` states added, oldest first (the states the refresh
        keeps). By default they become the whole buffer: labels the old model gave to
        older states no longer hold and are dropped. With ``keep_older_labels`` those
        older states stay with the labels they had, so the MLP keeps fitting every state
        the buffer holds (as it does with a reward model that never changes); ``obs``
        must then be the buffer's newest states (``ValueError`` if not). The MLP keeps
        its weights either way.
        """
        n = min(len(obs), self.cfg.buffer_size)
        obs, progress = obs[len(obs) - n:].float(), progress[len(progress) - n:].float()
        if not self.cfg.keep_older_labels:
            self.obs[:n], self.target[:n] = obs, progress
            self.size, self.head = n, n % self.cfg.buffer_size
            return
        idx = (self.head - n + torch.arange(n)) % self.cfg.buffer_size
        if n > self.size or not torch.equal(self.obs[idx], obs):
            raise ValueError(f"relabel: the {n} rescored states are not the newest of the "
                             f"distillation buffer ({self.size} states)")
        self.target[idx] = progress

    def fit(self, steps: int) -> None:
        """``steps`` gradient steps of the MLP on minibatches of the buffer."""
        if self.size == 0:
            return
        with torch.inference_mode(False), torch.enable_grad():
            for _ in range(steps):
                pick = torch.randint(self.size, (min(self.cfg.batch_size, self.size),),
                                     generator=self.gen)
                loss = (self.mlp(self.obs[pick]) - self.target[pick]).square().mean()
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()
            self.last_loss = loss.item()

    def refresh(self) -> None:
        """Copy the learning MLP into the potential (call between rollouts only)."""
        self.potential.load_state_dict(self.mlp.state_dict())

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """The potential's progress [B] in [0, 1] for ``obs`` [B, obs_dim] (no gradient).

        The frozen copy, not the MLP being fitted: it changes only at ``refresh``.
        """
        return self.potential(obs.float())


class RewardEnv:
    """A :class:`sim.protocol.BatchedEnv` whose reward is that of a reward mode."""

    def __init__(self, env: Any, mixer: RewardMixer, model: RewardModel | None = None,
                 scoring: str = "direct", every: int = 1, cameras: Sequence[str] | None = None,
                 width: int | None = None, height: int | None = None,
                 instruction: str | None = None, distill: DistillConfig | None = None,
                 start_views: bool = True, plane_extent: float | None = None,
                 refresh: RefreshConfig | None = None, seed: int = 0) -> None:
        if scoring not in SCORING:
            raise ValueError(f"scoring must be one of {list(SCORING)}, got '{scoring}'")
        if mixer.needs_progress and model is None:
            raise ValueError(f"reward mode '{mixer.mode}' needs a reward model (reward.model)")
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.episodic = isinstance(model, EpisodeRewardModel)
        if self.episodic and scoring != "direct":
            raise ValueError(f"{type(model).__name__} reads each env's episode so far; it needs "
                             f"reward.loop.scoring=direct, got '{scoring}'")
        self.env, self.mixer, self.model = env, mixer, model
        self.scoring, self.every = scoring, int(every)
        self.frames = bool(mixer.needs_progress and model is not None and model.requires_frames)
        self.cameras = list(cameras or getattr(model, "camera_names", None) or env.camera_names)
        size = getattr(model, "image_size", None) or (None, None)
        self.height, self.width = height or size[0], width or size[1]
        self.instruction = instruction or env.instruction
        if self.frames and plane_extent is not None:  # the labels' frames: a nearer floor
            env.cfg.render_plane_extent = float(plane_extent)
        self.distiller = None
        if mixer.needs_progress and scoring == "distilled" and not self.episodic:
            self.distiller = Distiller(env.obs_dim, distill or DistillConfig(), seed)
        elif self.frames:
            env.request_final_frames(self.cameras, self.width, self.height)
        self.start_context = bool(self.frames and start_views
                                  and getattr(model, "start_context", False))
        self.refresher: PRMRefresher | None = None
        if refresh is not None and refresh.enabled and self.frames:
            if self.distiller is None or self.start_context:
                raise ConfigError("reward.loop.refresh fine-tunes the PRM on the distillation's "
                                 "labelled states: it needs reward.loop.scoring=distilled and "
                                 "reward.loop.start_views=false")
            self.refresher = PRMRefresher(model, refresh, env.obs_dim, self.cameras,
                                          self.instruction, seed)
        self._reached = torch.zeros(env.num_envs, dtype=torch.bool)  # success so far, per env
        self._rollouts = 0
        self.start_frames: torch.Tensor | None = None  # [N, V, H, W, 3] of each env's start
        self._final_start: torch.Tensor | None = None  # the finished envs' starts
        self.gen = torch.Generator().manual_seed(seed)
        self.timing = {"physics": 0.0, "render": 0.0, "model": 0.0, "distill": 0.0,
                       "refresh": 0.0}
        self.frames_scored = 0
        self.steps = 0
        self._t = 0
        self._prev_obs: torch.Tensor | None = None
        # (reward model's progress, simulator's progress) of scored states: how well the
        # potential tracks the truth on the states the policy actually visits
        self._pairs: dict[str, list[torch.Tensor]] = {"model": [], "distilled": []}
        # the paid potential's change per transition against the simulator's change
        self._delta_all, self._delta_window = RunningPearson(), RunningPearson()
        self._delta_log: list[dict[str, Any]] = []
        self._sim_prev: torch.Tensor | None = None

    def __getattr__(self, name: str) -> Any:  # obs_dim, num_envs, device, rng_state, ...
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    # ---------------------------------------------------------------- scoring
    def _render(self, env_ids: torch.Tensor | None = None) -> torch.Tensor:
        t = time.perf_counter()
        frames = self.env.render(self.cameras, env_ids=env_ids, width=self.width,
                                 height=self.height)
        self.timing["render"] += time.perf_counter() - t
        return frames

    def _new_starts(self, env_ids: torch.Tensor | None = None) -> None:
        """Render and keep the first views of the envs that just began an episode."""
        frames = self._render(env_ids)
        if env_ids is None or self.start_frames is None:
            self.start_frames = frames.clone()
        else:
            self._final_start = self.start_frames[env_ids].clone()
            self.start_frames[env_ids] = frames

    def _score_frames(self, env_ids: torch.Tensor | None = None,
                      frames: torch.Tensor | None = None, final: bool = False) -> torch.Tensor:
        """Progress of ``frames`` (rendered now if None) of ``env_ids`` (all if None).

        ``final``: the frames are terminal frames of envs that just finished (their
        start views are those of the episode that ended).
        """
        if frames is None:
            frames = self._render(env_ids)
        cameras = self.cameras
        if self.start_context and self.start_frames is not None:
            start = (self._final_start if final else self.start_frames if env_ids is None
                     else self.start_frames[env_ids])
            frames = torch.cat([frames, start], dim=1)
            cameras = [*self.cameras, *(f"{c}@start" for c in self.cameras)]
        t = time.perf_counter()
        kwargs = {}
        if self.episodic:  # which env each row is: the model continues its episode
            kwargs["env_ids"] = (torch.arange(frames.shape[0]) if env_ids is None else env_ids)
        progress = self.model.score(frames, self.instruction, cameras=cameras,
                                    **kwargs).progress
        self.timing["model"] += time.perf_counter() - t
        self.frames_scored += frames.shape[0] * frames.shape[1]
        return progress.float().cpu()

    def _score_state(self, info: Mapping[str, Any]) -> torch.Tensor:
        return self.model.score(None, self.instruction, state=info).progress.float().cpu()

    def _label(self, obs: torch.Tensor) -> None:
        """Distilled mode: score a random subset of envs and fit the MLP on them."""
        k = min(self.distiller.cfg.label_envs, self.env.num_envs)
        ids = torch.randperm(self.env.num_envs, generator=self.gen)[:k].sort().values
        if self.model.requires_state:  # the control: the simulator's progress, distilled
            progress = self._score_state(self._current_state())[ids]
        elif self.refresher is not None:  # kept (frames or features) for the PRM's refresh
            frames = self._render(ids)
            state = self._current_state()
            t = time.perf_counter()
            progress = self.refresher.score_and_add(obs[ids], frames, state["progress"][ids],
                                                    state["success"][ids], ids)
            self.timing["model"] += time.perf_counter() - t
            self.frames_scored += frames.shape[0] * frames.shape[1]
        else:
            progress = self._score_frames(ids)
        self._track("model", progress, ids)
        t = time.perf_counter()
        self._track("distilled", self.distiller(obs[ids]), ids)
        self.distiller.add(obs[ids], progress)
        self.timing["distill"] += time.perf_counter() - t

    def _episode_outcomes(self, info: Mapping[str, Any]) -> None:
        """Remember which envs' episodes reached success; tell the refresher which ended."""
        success = info["success"].bool().cpu()
        if info.get("diverged") is not None:
            success = success & ~info["diverged"].bool().cpu()
        self._reached |= success
        ids = info.get("done_ids")
        if ids is not None:
            self.refresher.end_episodes(ids, self._reached[ids])
            self._reached[ids] = False

    def _refresh_prm(self) -> None:
        """At a rollout boundary: fine-tune the PRM if due, relabel, refit the MLP.

        With ``refresh.overlap`` a refresh started at the previous boundary is collected
        here (the loop waits for it) and the next one, if due, starts in the background.
        """
        t = time.perf_counter()
        ref, relabelled = self.refresher, None
        due = self._rollouts % ref.cfg.every == 0
        if ref.cfg.overlap:
            relabelled = ref.finish()
            if due:
                ref.start()
        elif due and ref.update() is not None:
            relabelled = ref.relabel()
        if relabelled is not None:
            self.distiller.relabel(*relabelled)
            self.distiller.fit(self.distiller.cfg.updates * 8)
            ref.log[-1]["env_steps"] = self.steps * self.env.num_envs
        self.timing["refresh"] += time.perf_counter() - t

    def _track(self, key: str, progress: torch.Tensor, ids: torch.Tensor | None) -> None:
        """Remember (model progress, simulator progress) pairs, if the env has a task."""
        task = getattr(self.env, "task", None)
        if task is None or sum(len(p) for p in self._pairs[key]) > 50_000:
            return
        sim = task.progress().float()
        sim = sim if ids is None else sim[ids]
        self._pairs[key].append(torch.stack([progress.float().cpu(), sim.cpu()], 1))

    def _track_step_delta(self, phi_prev: torch.Tensor | None, phi_obs: torch.Tensor,
                          done_ids: torch.Tensor | None) -> None:
        """Add this step's ``phi(s') - phi(s)`` and the simulator's change, ongoing envs only."""
        task = getattr(self.env, "task", None)
        if task is None or phi_prev is None:
            return
        sim = task.progress().float().cpu()
        if self._sim_prev is not None:
            keep = torch.ones(len(sim), dtype=torch.bool)
            if done_ids is not None:
                keep[done_ids.cpu()] = False
            dphi = (phi_obs.float().cpu() - phi_prev.float().cpu())[keep]
            dsim = (sim - self._sim_prev)[keep]
            self._delta_all.add(dphi, dsim)
            self._delta_window.add(dphi, dsim)
        self._sim_prev = sim
        # env steps since the wrapper was made: the PPO runner resets the envs at checkpoints
        if self.steps % (self.distiller.cfg.refresh_every * DELTA_WINDOW_ROLLOUTS) == 0:
            self._close_delta_window()

    def _close_delta_window(self) -> None:
        if self._delta_window.count:
            self._delta_log.append(self._delta_window_entry())
        self._delta_window = RunningPearson()

    def _delta_window_entry(self) -> dict[str, Any]:
        """The open window's figures, ending at the env steps so far."""
        value = self._delta_window.value()
        return {"env_steps": self.steps * self.env.num_envs,
                "pearson": None if value is None else round(value, 4),
                "transitions": self._delta_window.count}

    def potential_step_delta(self) -> dict[str, Any] | None:
        """How the paid potential's per-step change tracks the simulator's (see the module doc).

        ``{"pearson": overall, "transitions": n, "windows": [{"env_steps", "pearson",
        "transitions"}, ...]}``; None when not tracked (no distillation or no task).
        """
        if not self._delta_all.count:
            return None
        value = self._delta_all.value()
        windows = list(self._delta_log)
        if self._delta_window.count:
            windows.append(self._delta_window_entry())
        return {"pearson": None if value is None else round(value, 4),
                "transitions": self._delta_all.count, "windows": windows}

    def _distilled(self, obs: torch.Tensor) -> torch.Tensor:
        t = time.perf_counter()
        phi = self.distiller(obs)
        self.timing["distill"] += time.perf_counter() - t
        return phi

    def _current_state(self) -> dict[str, torch.Tensor]:
        """Progress and success of the envs' current states (after any auto-reset)."""
        return {"progress": self.env.task.progress().float(), "success": self.env.task.success()}

    def _phi_reset(self, obs: torch.Tensor) -> torch.Tensor:
        if self.distiller is not None:
            self._label(obs)
            self.distiller.refresh()
            return self._distilled(obs)
        if self.model.requires_state:
            return self._score_state(self._current_state())
        return self._score_frames()

    # --------------------------------------------------------------- protocol
    def reset(self, seed: int | None = None) -> torch.Tensor:
        """``env.reset``; also restarts the reward mode's per-episode state."""
        obs = self.env.reset(seed=seed)
        self._t = 0
        task = getattr(self.env, "task", None)
        self._sim_prev = task.progress().float().cpu() if task is not None else None
        if self.episodic:
            self.model.end_episodes()
        if self.start_context:
            self._new_starts()
        if self.mixer.needs_progress:
            self.phi = self._phi_reset(obs)
            self.mixer.reset(self.phi)
        self._prev_obs = obs
        return obs

    def step(self, actions: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """``env.step`` with the reward replaced by the mode's (env reward in info)."""
        t = time.perf_counter()
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self.timing["physics"] += time.perf_counter() - t
        self._t += 1
        self.steps += 1
        phi_obs = phi_final = None
        if self.mixer.needs_progress:
            if (self.distiller is not None and self._t > 1
                    and (self._t - 1) % self.distiller.cfg.refresh_every == 0):
                # a new rollout: the potential takes the MLP's latest fit, and phi(s) of
                # its first transition is recomputed by it, so phi(s) and phi(s') of every
                # transition come from one function
                self._rollouts += 1
                if self.refresher is not None:
                    self._refresh_prm()
                self.distiller.refresh()
                self.mixer.shaping.phi = self._distilled(self._prev_obs)
            if self.start_context and info.get("done_ids") is not None:
                self._new_starts(info["done_ids"])
            if self.refresher is not None:
                self._episode_outcomes(info)
            phi_prev = self.mixer.shaping.phi
            phi_obs, phi_final = self._potentials(obs, info)
            if self.distiller is not None:
                self._track_step_delta(phi_prev, phi_obs, info.get("done_ids"))
            self.phi = phi_obs
        self._prev_obs = obs
        info["env_reward"] = reward
        mixed = self.mixer(reward, terminated, truncated, info, phi_obs, phi_final)
        if self.mixer.advantage_term is not None:  # reward.shaping_target=advantage
            info["advantage_shaping"] = self.mixer.advantage_term
        if phi_obs is not None:
            info["progress_model"] = phi_obs
        return obs, mixed.to(reward.dtype), terminated, truncated, info

    def _potentials(self, obs: torch.Tensor, info: Mapping[str, Any]
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """phi of the returned observations and of the terminal states of finished envs."""
        ids = info.get("done_ids")
        if self.model.requires_state and self.distiller is None:  # info: terminal states
            final = self._score_state(info)
            phi = final.clone()
            if ids is not None:
                phi[ids] = self.env.task.progress()[ids].float()
            return phi, final
        if self.distiller is not None:
            if self._t % self.distiller.cfg.label_every == 0:
                self._label(obs)
            phi = self._distilled(obs)
            final = None
            if ids is not None:
                final = phi.clone()
                final[ids] = self._distilled(info["final_obs"][ids])
            return phi, final
        final = None
        if ids is not None and self.episodic:  # end those episodes before the new first frames
            final = self.phi.clone()
            final[ids] = self._score_frames(ids, frames=info["final_frames"], final=True)
            self.model.end_episodes(ids)
        if self._t % self.every == 0:
            phi = self._score_frames()
            self._track("model", phi, None)
        else:
            phi = self.phi.clone()
            if ids is not None:
                phi[ids] = self._score_frames(ids)
        if ids is not None and not self.episodic:
            final = phi.clone()
            final[ids] = self._score_frames(frames=info["final_frames"], final=True)
        return phi, final

    def save_reward_model(self, folder: str | Path) -> Path | None:
        """The PRM as refreshed during RL, as ``<folder>/prm/prm.pt``; None if not refreshed.

        ``embodied reward eval reward.checkpoint=<folder>/prm`` evaluates it, and
        ``reward.checkpoint=<folder>/prm`` starts another run from it.
        """
        if self.refresher is None:
            return None
        return self.refresher.save(Path(folder) / "prm" / CHECKPOINT_NAME,
                                   self.steps * self.env.num_envs)

    def timing_summary(self) -> dict[str, Any]:
        """Seconds per part, the share of each, and scored frames per env step."""
        total = sum(self.timing.values())
        return {"seconds": {k: round(v, 3) for k, v in self.timing.items()},
                "share": {k: round(v / total, 3) if total else 0.0
                          for k, v in self.timing.items()},
                "frames_scored": self.frames_scored,
                "potential_vs_sim_pearson": self.potential_quality(),
                "potential_step_delta": self.potential_step_delta(),
                "env_steps": self.steps * self.env.num_envs,
                "scoring": self.scoring_kind(), "shaping": self.shaping_settings()}

    def scoring_kind(self) -> str:
        """direct | distilled (a frame model's scores) | state | state-distilled | none."""
        if not self.mixer.needs_progress:
            return "none"
        if self.frames:
            return self.scoring
        return "state-distilled" if self.distiller is not None else "state"

    def shaping_settings(self) -> dict[str, Any]:
        """The reward's scale and shaping settings, as the run used them."""
        out: dict[str, Any] = {"mode": self.mixer.mode,
                               "sparse_weight": self.mixer.sparse_weight,
                               "prm_weight": self.mixer.prm_weight,
                               "prm_weight_relative": self.mixer.prm_weight_relative,
                               "gamma": self.mixer.shaping.gamma,
                               "shaping_target": self.mixer.shaping_target,
                               "terminal_potential": self.mixer.shaping.terminal_potential}
        if self.distiller is not None:
            out["potential_refresh_every"] = self.distiller.cfg.refresh_every
            out["distill_buffer_size"] = self.distiller.cfg.buffer_size
        if self.refresher is not None:
            cfg = self.refresher.cfg
            out["prm_refresh"] = {"every_rollouts": cfg.every, "steps": cfg.steps,
                                  "train": cfg.train, "learning_rate": cfg.learning_rate,
                                  "labels": cfg.labels, "replay_fraction": cfg.replay_fraction,
                                  "buffer_size": cfg.buffer_size,
                                  "keep_older_labels": self.distiller.cfg.keep_older_labels,
                                  "log": self.refresher.log}
        return out

    def potential_quality(self) -> dict[str, float | None]:
        """Correlations of the scores with the simulator's progress.

        Pearson correlation with the simulator's progress of the reward model's scores and
        (distilled mode) of the MLP's predictions for the same states, before the MLP was fitted on
        them; None where nothing was recorded.
        """
        out: dict[str, float | None] = {}
        for key, pairs in self._pairs.items():
            if not pairs:
                out[key] = None
                continue
            x = torch.cat(pairs).double()
            x = x - x.mean(0)
            den = (x.square().sum(0).prod()).sqrt()
            out[key] = round(float((x[:, 0] * x[:, 1]).sum() / den), 4) if den > 0 else None
        return out

    def close(self) -> None:
        """Stop a background PRM refresh, close the wrapped env."""
        if self.refresher is not None:
            self.refresher.close()
        self.env.close()


def wrap_reward(env: Any, reward_cfg: Mapping[str, Any], gamma: float, seed: int = 0,
                task: str | None = None) -> Any:
    """``env`` with the reward of a ``configs/reward/*.yaml`` config.

    Mode ``oracle`` returns ``env`` itself (its reward *is* the oracle's). A ``prm``
    model without a checkpoint takes the newest trained for ``task``.
    """
    from omegaconf import DictConfig, OmegaConf

    from embodied.reward.base import make_reward_model

    if isinstance(reward_cfg, DictConfig):
        reward_cfg = OmegaConf.to_container(reward_cfg, resolve=True)
    mixer = RewardMixer.from_config(reward_cfg, gamma=gamma)
    if mixer.mode == "oracle":
        return env
    model = None
    if mixer.needs_progress:
        model_cfg = dict(reward_cfg.get("model") or {})
        if not model_cfg:
            raise ValueError(f"reward mode '{mixer.mode}' needs reward.model (e.g. reward=prm)")
        if model_cfg.get("name") == "prm" and model_cfg.get("checkpoint") is None:
            from embodied.reward.prm.checkpoint import newest_prm_checkpoint

            model_cfg["checkpoint"] = str(newest_prm_checkpoint(task or env.task.name))
            print(f"reward: PRM checkpoint {model_cfg['checkpoint']}")
        model = make_reward_model(model_cfg)
    loop = dict(reward_cfg.get("loop") or {})
    distill = DistillConfig(**loop.pop("distill", None) or {})
    refresh = RefreshConfig(**loop.pop("refresh", None) or {})
    return RewardEnv(env, mixer, model, distill=distill, refresh=refresh, seed=seed, **loop)
