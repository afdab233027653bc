"""Training data for the learned PRM: simulated multi-view episodes with progress labels.

Episodes come from the task's scripted expert (near-clean and noisy), from failed
rollouts (smoothed random joint targets), optionally from the expert wandering off at
random once the task's success holds (``wander_episodes``: the states after success, with
the robot anywhere and the scene left as the expert left it or disturbed, which the
expert alone never shows; with ``wander_box`` the tcp goes to random waypoints in a box
instead, so the hand also reaches poses random targets seldom do) and from given policies
(``policies``: PPO checkpoints at several stages of training, with action noise, or
uniformly random actions), so the model also sees the states an RL policy visits. Each
has every camera view rendered every ``stride`` control steps and the task's privileged
progress and success at the same states. Episodes are split into train and held-out
(``val``) by episode, never by frame.

On-disk format (a folder, version ``FORMAT_VERSION``; written by :func:`save_frames`,
read by :func:`load_frames`):

- ``meta.json``: ``format``, ``version``, ``task``, ``instruction``, ``cameras`` (the
  view order), ``height``, ``width``, ``stride``, ``counterfactual_instructions`` and
  ``episodes``: one record per episode with ``index``, ``split`` (train | val), ``kind``
  (expert | noisy | failed | wander | policy), ``noise``, ``start`` and ``length`` (its rows in
  the arrays below), ``success`` (it succeeded at some recorded state) and, for kind
  policy, ``policy`` (the checkpoint file, or ``random``).
- ``frames.npy``: uint8 [N, V, H, W, 3], row i the V views of one state (memory-mappable
  with ``np.load(..., mmap_mode="r")``). Rows of an episode are contiguous and in time
  order.
- ``labels.npz``: per row ``episode`` int32, ``step`` int32 (control step within its
  episode), ``progress`` float32 in [0, 1] and ``success`` bool.

Discretised labels (K bins) are derived at training time (``labels.py``), so one
dataset serves any K.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodied.reward.prm.labels import counterfactual_instructions

FORMAT = "embodied-prm-frames"
FORMAT_VERSION = 1


@dataclass
class DataConfig:
    """What to simulate: how many episodes of which kind, rendered how."""

    task: str = "panda_reach"
    episodes: int = 160            # total, over all kinds
    expert_fraction: float = 0.5   # scripted expert with ``expert_noise``
    noisy_fraction: float = 0.25   # scripted expert with ``noisy_noise`` (partial / failed)
    # the rest: failed rollouts (smoothed random joint targets around the default pose)
    expert_noise: float = 0.05
    noisy_noise: float = 0.6
    random_scale: float = 0.4      # std of the random joint targets (action units)
    # beside ``episodes``: the near-clean expert until the task's success holds, then the
    # failed rollouts' random targets for the rest of the episode
    wander_episodes: int = 0
    # wander episodes: after success, the tcp moves with the expert's own motion to random
    # waypoints drawn uniformly in this box ([low xyz, high xyz], m, the task's frame), each
    # with a random hand yaw, instead of the random targets; None: the random targets
    wander_box: list[list[float]] | None = None
    batch_envs: int = 16           # episodes simulated together
    stride: int = 4                # control steps between recorded states
    width: int = 64
    height: int = 64
    cameras: list[str] | None = None  # None: the task's cameras
    val_fraction: float = 0.2
    episode_length_s: float | None = None  # None: the task's own
    # The env the episodes run in, as the task config group sets it (None: the task's own):
    # the action space (robots/actions.py), physics steps per control step, and the ROS
    # node's target filters. Given policies must have been trained in this env.
    action: str | None = None
    decimation: int | None = None
    deploy_limits: bool = False
    seed: int = 0
    # Visual randomisation of the frames (sim.visual.VisualRandomization settings as a
    # mapping); None: frames as the scene is built.
    visual: dict[str, Any] | None = None
    # Rollouts of given policies, beside the episodes above. Each entry: ``checkpoint``
    # (a checkpoint file of `embodied train`, a run folder: ``stages`` of its checkpoints
    # spread over training, or its ``first`` N checkpoints, or ``random``: uniform random
    # actions), ``episodes`` per checkpoint, ``noise`` (std of Gaussian noise added to the
    # deterministic actions).
    policies: list[dict[str, Any]] = field(default_factory=list)
    # A run folder of `embodied train` (dense reward, checkpoints every few iterations)
    # whose rollouts cover the states an RL policy visits: adds :data:`COVERAGE` of it to
    # ``policies`` (see :func:`coverage_policies`). None: ``policies`` alone.
    policy_run: str | None = None

    def __post_init__(self) -> None:
        """A malformed ``wander_box`` raises ``ValueError`` naming the fix."""
        if self.wander_box is not None:
            box_corners(self.wander_box)


@dataclass(frozen=True)
class PolicySource:
    """One policy whose rollouts become training data."""

    checkpoint: str        # a checkpoint file, or "random"
    episodes: int
    noise: float = 0.0


# The policy-coverage recipe (``DataConfig.policy_run``): of a dense-reward PPO run, its
# checkpoints at 4 stages spread over training (action noise 0.2), its first 3
# checkpoints, before it succeeds (noise 0.3), and uniformly random actions.
COVERAGE: tuple[dict[str, Any], ...] = (
    {"stages": 4, "episodes": 32, "noise": 0.2},
    {"first": 3, "episodes": 32, "noise": 0.3},
    {"checkpoint": "random", "episodes": 16},
)


def coverage_policies(run: str | Path) -> list[dict[str, Any]]:
    """The ``policies`` entries of :data:`COVERAGE` for the run folder ``run``.

    Raises ``FileNotFoundError`` naming the fix if ``run`` holds no checkpoints.
    """
    if not any(Path(run).glob("checkpoints/model_*.pt")):
        raise FileNotFoundError(f"data.policy_run: no checkpoints in {run}; pass a run folder "
                                "of `embodied train` (a dense-reward run with save_interval=10)")
    return [{"checkpoint": str(run)} | entry if "checkpoint" not in entry else dict(entry)
            for entry in COVERAGE]


def all_policies(cfg: DataConfig) -> list[dict[str, Any]]:
    """``cfg.policies`` and, if ``cfg.policy_run`` is set, the coverage recipe of that run."""
    run = [] if cfg.policy_run is None else coverage_policies(cfg.policy_run)
    return [*cfg.policies, *run]


def policy_sources(entries: list[dict[str, Any]]) -> list[PolicySource]:
    """``DataConfig.policies`` with run folders expanded into checkpoints of several stages.

    A run folder gives ``stages`` of its checkpoints spread over training from the first
    to the last (one stage: the last, the trained policy), or with ``first: N`` its N
    earliest. Raises ``FileNotFoundError`` / ``ValueError`` naming the
    entry and the fix.
    """
    out = []
    for entry in entries:
        unknown = set(entry) - {"checkpoint", "episodes", "noise", "stages", "first"}
        if unknown or "checkpoint" not in entry:
            raise ValueError(f"data.policies entry {dict(entry)}: give checkpoint (a file, a "
                             "run folder or random), episodes, and optionally noise, stages "
                             "or first")
        ckpt, episodes = str(entry["checkpoint"]), int(entry.get("episodes", 16))
        noise, stages = float(entry.get("noise", 0.0)), int(entry.get("stages", 4))
        first = entry.get("first")
        if episodes < 1 or noise < 0 or stages < 1 or (first is not None and int(first) < 1):
            raise ValueError(f"data.policies entry {dict(entry)}: episodes, stages and first "
                             "must be >= 1 and noise >= 0")
        if ckpt == "random":
            out.append(PolicySource("random", episodes, noise))
            continue
        path = Path(ckpt)
        files = sorted(path.glob("checkpoints/model_*.pt")) if path.is_dir() else [path]
        if not files or not files[0].is_file():
            raise FileNotFoundError(f"data.policies: no checkpoint at {ckpt}; pass a checkpoint "
                                    "file or run folder of `embodied train`, or random")
        if first is not None:
            picks = np.arange(min(int(first), len(files)))
        else:
            picks = (np.array([len(files) - 1]) if stages == 1 else
                     np.unique(np.linspace(0, len(files) - 1, min(stages, len(files))).round()))
        out += [PolicySource(str(files[int(i)]), episodes, noise) for i in picks]
    return out


@dataclass
class FrameDataset:
    """A loaded dataset: arrays of all rows plus the episode table (see module doc)."""

    frames: np.ndarray          # uint8 [N, V, H, W, 3]
    episode: np.ndarray         # int32 [N]
    step: np.ndarray            # int32 [N]
    progress: np.ndarray        # float32 [N]
    success: np.ndarray         # bool [N]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def episodes(self) -> list[dict[str, Any]]:
        """Per-episode metadata rows, in episode order."""
        return self.meta["episodes"]

    @property
    def instruction(self) -> str:
        """The task's language instruction."""
        return self.meta["instruction"]

    @property
    def cameras(self) -> list[str]:
        """Camera names, in view order."""
        return list(self.meta["cameras"])

    def rows(self, split: str | None = None, kinds: tuple[str, ...] | None = None) -> np.ndarray:
        """Row indices of the episodes of a split (train | val) and kinds, in order."""
        out = [np.arange(e["start"], e["start"] + e["length"]) for e in self.episodes
               if (split is None or e["split"] == split) and (kinds is None or e["kind"] in kinds)]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def episode_rows(self, split: str | None = None,
                     kinds: tuple[str, ...] | None = None) -> list[np.ndarray]:
        """Row indices of each selected episode (time order), one array per episode."""
        return [np.arange(e["start"], e["start"] + e["length"]) for e in self.episodes
                if (split is None or e["split"] == split) and (kinds is None or e["kind"] in kinds)]


def _kinds(cfg: DataConfig) -> list[tuple[str, float, str | None]]:
    """(kind, noise, policy checkpoint) of every batch of ``batch_envs`` episodes."""
    batches = max(1, round(cfg.episodes / cfg.batch_envs))
    n_expert = max(1, round(batches * cfg.expert_fraction))
    n_noisy = min(batches - n_expert, round(batches * cfg.noisy_fraction))
    n_failed = batches - n_expert - n_noisy
    none: str | None = None
    out = ([("expert", cfg.expert_noise, none)] * n_expert
           + [("noisy", cfg.noisy_noise, none)] * n_noisy
           + [("failed", cfg.random_scale, none)] * n_failed
           + [("wander", cfg.expert_noise, none)] * round(cfg.wander_episodes / cfg.batch_envs))
    for src in policy_sources(all_policies(cfg)):
        out += [("policy", src.noise, src.checkpoint)] * max(1, round(src.episodes
                                                                      / cfg.batch_envs))
    return out


Policy = Callable[[torch.Tensor], torch.Tensor]


def rollout_policy(env: Any, kind: str, noise: float, checkpoint: str | None,
                   seed: int, random_scale: float = 0.4,
                   wander_box: list[list[float]] | None = None) -> Policy:
    """Observations -> actions of one batch of episodes of ``kind`` (see ``DataConfig``).

    ``random_scale``: the random targets' std of a ``wander`` episode after its success;
    ``wander_box``: waypoints there instead (``DataConfig.wander_box``).
    """
    gen = torch.Generator().manual_seed(seed)
    if kind == "failed":
        targets = _RandomTargets(env.num_envs, env.action_dim, noise, seed)
        return lambda obs: targets()
    if kind != "policy":
        from sim.experts import make_expert

        expert = make_expert(env, noise=noise, seed=seed)
        if kind == "wander":
            after = _RandomTargets(env.num_envs, env.action_dim, random_scale, seed) \
                if wander_box is None else _Waypoints(expert, wander_box, seed)
            return _WanderAfterSuccess(env, expert, after)
        return lambda obs: expert()
    if checkpoint is None or checkpoint == "random":
        return lambda obs: torch.rand(obs.shape[0], env.action_dim, generator=gen) * 2 - 1
    from embodied.export import load_checkpoint_policy

    net = load_checkpoint_policy(checkpoint)[0]
    if net.actor[0].in_features != env.obs_dim:
        raise ValueError(f"data.policies: {checkpoint} takes {net.actor[0].in_features} "
                         f"observations, task {env.task.name} gives {env.obs_dim}; pass a "
                         "checkpoint trained on this task")

    @torch.no_grad()
    def act(obs: torch.Tensor) -> torch.Tensor:
        action = net(obs.float())
        return action + noise * torch.randn(action.shape, generator=gen)

    return act


class _RandomTargets:
    """Failed rollouts: joint targets drifting randomly around the default pose."""

    def __init__(self, num_envs: int, action_dim: int, scale: float, seed: int):
        self.gen = torch.Generator().manual_seed(seed)
        self.scale = scale
        self.action = torch.zeros(num_envs, action_dim)

    def __call__(self) -> torch.Tensor:
        noise = torch.randn(self.action.shape, generator=self.gen) * self.scale
        self.action = 0.9 * self.action + 0.1 * noise * 4.0
        return self.action.clamp(-1.0, 1.0)


class _Waypoints:
    """The tcp sent to random waypoints in a box by a scripted expert's own motion.

    Each env draws a waypoint uniformly in ``box`` ([low xyz, high xyz]) and a hand yaw
    uniformly in [-pi, pi], and draws again once the tcp is within ``reached`` of it or
    after ``patience`` steps. The gripper stays closed.
    """

    reached = 0.03  # m
    patience = 25   # control steps

    def __init__(self, expert: Any, box: list[list[float]], seed: int) -> None:
        if not hasattr(expert, "move"):
            raise ValueError("data.wander_box: the task's expert has no tcp motion to reach "
                             "waypoints with; leave data.wander_box unset (null)")
        self.expert = expert
        self.low, self.high = (torch.tensor(c, dtype=torch.float64) for c in box_corners(box))
        self.gen = torch.Generator().manual_seed(seed)
        n = expert.task.sim.num_envs
        self.point = torch.zeros(n, 3, dtype=torch.float64)
        self.yaw = torch.zeros(n, dtype=torch.float64)
        self.timer = torch.full((n,), self.patience)

    def __call__(self) -> torch.Tensor:
        ee = self.expert.task.ee_pos.cpu().to(torch.float64)
        due = ((ee - self.point).norm(dim=1) < self.reached) | (self.timer >= self.patience)
        k = int(due.sum())
        if k:
            u = torch.rand(k, 3, generator=self.gen, dtype=torch.float64)
            self.point[due] = self.low + u * (self.high - self.low)
            self.yaw[due] = (torch.rand(k, generator=self.gen, dtype=torch.float64) * 2
                             - 1) * torch.pi
            self.timer[due] = 0
        self.timer += 1
        dev = self.expert.task.ee_pos.device
        closed = torch.zeros(len(due), device=dev)
        return self.expert.move(self.point.to(dev), closed, self.yaw.to(dev))


def box_corners(box: Any) -> tuple[list[float], list[float]]:
    """``box`` ([low xyz, high xyz]) as two lists of 3 floats, checked.

    Raises ``ValueError`` naming the fix for any other shape or a low above its high.
    """
    try:
        low, high = ([float(v) for v in corner] for corner in box)
        ok = len(low) == len(high) == 3 and all(a <= b for a, b in zip(low, high, strict=True))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"data.wander_box: {box} is not [[x, y, z], [x, y, z]] with low <= "
                         "high; pass e.g. [[0.25, -0.3, 0.03], [0.7, 0.3, 0.7]] (null: off)")
    return low, high


class _WanderAfterSuccess:
    """A wander batch's actions: the expert's, then ``after``'s once the env's success held.

    From the step on which an env's success first holds, to the end of its episode, the
    env gets ``after``'s actions (the failed rollouts' drifting random targets, or
    :class:`_Waypoints`) instead of the expert's.
    """

    def __init__(self, env: Any, expert: Callable[[], torch.Tensor],
                 after: Callable[[], torch.Tensor]) -> None:
        self.env, self.expert, self.after = env, expert, after
        self.wandering = torch.zeros(env.num_envs, dtype=torch.bool)

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        self.wandering |= self.env.task.success().bool().cpu()
        action, other = self.expert(), self.after()
        return torch.where(self.wandering[:, None], other.to(action), action)


def simulate(cfg: DataConfig, progress_bar: bool = False) -> FrameDataset:
    """Run the episodes of ``cfg`` and return them with frames and labels (in memory)."""
    from tqdm import tqdm

    from sim import make_env
    from sim.tasks import get_task_class, task_names

    extra: dict[str, Any] = {k: v for k, v in (("episode_length_s", cfg.episode_length_s),
                                               ("action", cfg.action),
                                               ("decimation", cfg.decimation)) if v is not None}
    if cfg.deploy_limits:
        extra["deploy_limits"] = True
    if cfg.visual is not None:  # the visual-randomisation hook (sim/visual.py)
        from sim.visual import VisualRandomization
        extra["visual"] = VisualRandomization.from_mapping(cfg.visual)
    env = make_env(cfg.task, num_envs=cfg.batch_envs, seed=cfg.seed, **extra)
    cameras = list(cfg.cameras or env.camera_names)
    rng = np.random.default_rng(cfg.seed)
    frames, episode, step, progress, success, episodes = [], [], [], [], [], []
    row = 0
    try:
        batches = _kinds(cfg)
        for b, (kind, noise, checkpoint) in enumerate(tqdm(batches, desc="simulate",
                                                           disable=not progress_bar)):
            seed = cfg.seed * 1000 + b
            obs = env.reset(seed=seed)
            policy = rollout_policy(env, kind, noise, checkpoint, seed, cfg.random_scale,
                                    cfg.wander_box)
            active = torch.ones(env.num_envs, dtype=torch.bool)
            recs: list[list[tuple]] = [[] for _ in range(env.num_envs)]
            for t in range(env.max_episode_steps):
                if t % cfg.stride == 0:
                    ids = active.nonzero().flatten()
                    views = env.render(cameras, env_ids=ids, width=cfg.width,
                                       height=cfg.height).numpy()
                    prog = env.task.progress()[ids].float().numpy()
                    ok = env.task.success()[ids].numpy()
                    for j, i in enumerate(ids.tolist()):
                        recs[i].append((views[j], t, prog[j], ok[j]))
                obs, _, terminated, truncated, _ = env.step(policy(obs))
                active &= ~(terminated | truncated)
                if not active.any():
                    break
            for i in range(env.num_envs):
                n = len(recs[i])
                frames.append(np.stack([r[0] for r in recs[i]]))
                step.append(np.array([r[1] for r in recs[i]], dtype=np.int32))
                progress.append(np.array([r[2] for r in recs[i]], dtype=np.float32))
                success.append(np.array([r[3] for r in recs[i]], dtype=bool))
                index = len(episodes)
                episode.append(np.full(n, index, dtype=np.int32))
                episodes.append({"index": index, "kind": kind, "noise": float(noise),
                                 "start": row, "length": n,
                                 "success": bool(success[-1].any())}
                                | ({"policy": checkpoint} if kind == "policy" else {}))
                row += n
    finally:
        env.close()
    # Held out by episode, the same fraction of every kind.
    for kind in {e["kind"] for e in episodes}:
        ids = [e["index"] for e in episodes if e["kind"] == kind]
        val = set(rng.choice(ids, size=max(1, round(len(ids) * cfg.val_fraction)),
                             replace=False).tolist())
        for i in ids:
            episodes[i]["split"] = "val" if i in val else "train"
    instruction = get_task_class(cfg.task).instruction
    others = [get_task_class(n).instruction for n in task_names() if n != cfg.task]
    meta = {"format": FORMAT, "version": FORMAT_VERSION, "task": cfg.task,
            "instruction": instruction, "cameras": cameras, "height": cfg.height,
            "width": cfg.width, "stride": cfg.stride,
            "counterfactual_instructions": counterfactual_instructions(instruction, others),
            "config": asdict(cfg), "episodes": episodes}
    return FrameDataset(np.concatenate(frames), np.concatenate(episode), np.concatenate(step),
                        np.concatenate(progress), np.concatenate(success), meta)


def save_frames(data: FrameDataset, folder: str | Path) -> Path:
    """Write ``data`` in the documented format (see the module doc); returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "frames.npy", data.frames)
    np.savez(folder / "labels.npz", episode=data.episode, step=data.step,
             progress=data.progress, success=data.success)
    (folder / "meta.json").write_text(json.dumps(data.meta, indent=1))
    return folder


def load_frames(folder: str | Path, mmap: bool = False) -> FrameDataset:
    """Read a dataset written by :func:`save_frames`; a clear error if it is not one."""
    folder = Path(folder)
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{folder} is not a PRM frame dataset (no meta.json); "
                                "create one with `embodied reward train task=...` or "
                                "embodied.reward.prm.data.simulate + save_frames")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION:
        raise ValueError(f"{meta_path}: format {meta.get('format')} v{meta.get('version')}, "
                         f"expected {FORMAT} v{FORMAT_VERSION}")
    labels = np.load(folder / "labels.npz")
    frames = np.load(folder / "frames.npy", mmap_mode="r" if mmap else None)
    return FrameDataset(frames, labels["episode"], labels["step"], labels["progress"],
                        labels["success"], meta)


def load_or_simulate(path: str | Path | None, cfg: DataConfig, save_to: Path,
                     progress_bar: bool = False) -> tuple[FrameDataset, Path]:
    """The frame dataset at ``path``, or one simulated per ``cfg`` and saved to ``save_to``."""
    if path is not None:
        return load_frames(path), Path(path)
    data = simulate(cfg, progress_bar=progress_bar)
    return data, save_frames(data, save_to)
