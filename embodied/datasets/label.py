"""Score every frame of a dataset with a reward model into a NEW dataset (`embodied label`).

The source is only read. The output root holds the same data files (with the
columns ``progress``, ``next.reward``, ``next.success`` added or replaced; the
source's reward columns are kept as ``source.next.*``), the same videos (hard links
or copies), and metadata with the new columns' statistics.

Resumable: each episode's labels are written atomically to
``<out>/.labelling/episode_<i>.npz`` as soon as they are computed, each output data
file as soon as all its episodes are labelled, and the metadata last. Killed at any
moment, the same command continues from there; the model scores the frames of one
episode in the same batches either way, so the result equals an uninterrupted run.
An error (a damaged file, a missing camera, an fps mismatch) names the file and
keeps everything labelled so far.

Under torchrun each rank builds its own model and scores every ``world_size``-th
episode into the same ``.labelling/`` folder; rank 0 then writes the data files and
the metadata from those per-episode labels, so the output is the single-process
one, byte for byte. A killed rank's job resumes like a single-process one (with
any number of ranks).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from embodied import distributed
from embodied.datasets import stats as st
from embodied.datasets.format import (
    DONE,
    INFO_PATH,
    PROGRESS,
    REWARD,
    SIM_PREFIX,
    SOURCE_PREFIX,
    STATS_PATH,
    SUCCESS,
    TASKS_PATH,
    TRUNCATED,
    DatasetError,
)
from embodied.datasets.meta import (
    read_json,
    to_column,
    write_episodes,
    write_json,
    write_parquet,
)
from embodied.datasets.rabc import RABC_WEIGHT, rabc_weights
from embodied.datasets.reader import LeRobotDataset
from embodied.files import atomic_path, writing
from embodied.plots import plot_progress
from embodied.reward import make_reward_model
from embodied.reward.episodic import EpisodeRewardModel, score_whole_episode

WORK_DIR = ".labelling"
LABEL_FEATURES = {
    PROGRESS: {"dtype": "float32", "shape": [1], "names": None},
    REWARD: {"dtype": "float32", "shape": [1], "names": None},
    SUCCESS: {"dtype": "bool", "shape": [1], "names": None},
    RABC_WEIGHT: {"dtype": "float32", "shape": [1], "names": None},
}


def episode_state(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What a state model may read: every column, and ``sim.<x>`` also as ``<x>``."""
    state = dict(data)
    state |= {k.removeprefix(SIM_PREFIX): v for k, v in data.items() if k.startswith(SIM_PREFIX)}
    return state


def score_episode(model: Any, ds: LeRobotDataset, ep: int, instruction: str,
                  cameras: list[str], batch_size: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Progress [T] (and success probability [T] or None) of every frame of an episode."""
    data = ds.episode_data(ep)
    length = ds.episodes[ep].length
    views = ds.episode_views(ep, cameras) if model.requires_frames else None
    if isinstance(model, EpisodeRewardModel):  # reads the whole episode: one call
        try:
            return score_whole_episode(model, views, instruction, cameras)
        except ValueError as err:
            raise DatasetError(f"{ds.episodes[ep].data_file}: the reward model cannot score "
                               f"episode {ds.episodes[ep].index}: {err}") from err
    state = episode_state(data) if model.requires_state else None
    progress, success = [], []
    for start in range(0, length, batch_size):
        sl = slice(start, min(start + batch_size, length))
        frames = None if views is None else torch.from_numpy(views[sl])
        part = None if state is None else {k: v[sl] for k, v in state.items()
                                           if isinstance(v, np.ndarray) and v.ndim >= 1}
        try:
            with torch.inference_mode():
                out = model.score(frames, instruction, cameras=cameras, state=part)
        except ValueError as err:
            raise DatasetError(f"{ds.episodes[ep].data_file}: the reward model cannot score "
                               f"episode {ds.episodes[ep].index}: {err}") from err
        progress.append(out.progress.float().cpu().numpy())
        if out.success_prob is not None:
            success.append(out.success_prob.float().cpu().numpy())
    return np.concatenate(progress), (np.concatenate(success) if success else None)


def episode_labels(progress: np.ndarray, success_prob: np.ndarray | None,
                   data: dict[str, np.ndarray], cfg: DictConfig) -> dict[str, np.ndarray]:
    """The label columns of one episode from its per-frame progress.

    Frame t is state s_t; its transition reaches s_{t+1} = frame t+1. For the last
    frame the reached state is not stored: its own estimate stands in (as in
    ``PotentialShaping`` without ``phi_final``). ``next.success`` is the model's success
    of the reached state (``success_prob >= success_threshold``, or progress >=
    ``progress_success`` for models without a success head); ``next.reward`` is the
    reward of ``reward.mode`` with potential-based shaping by progress; ``rabc.weight``
    the RA-BC weight of the frame's progress gain (:mod:`embodied.datasets.rabc`).
    """
    from embodied.reward import combine_rewards, shaping_term, shaping_weight

    length = len(progress)
    succ_now = (success_prob >= float(cfg.success_threshold)) if success_prob is not None \
        else progress >= float(cfg.progress_success)
    nxt = np.minimum(np.arange(length) + 1, length - 1)
    done = data[DONE].astype(bool) if DONE in data else np.zeros(length, bool)
    truncated = data[TRUNCATED].astype(bool) if TRUNCATED in data else done
    terminated = done & ~truncated
    gamma = float(cfg.reward.gamma if cfg.reward.get("gamma") is not None else cfg.gamma)
    phi = torch.from_numpy(progress.astype(np.float32))
    shaping = shaping_term(phi, phi[nxt], torch.from_numpy(terminated), gamma,
                           str(cfg.reward.get("terminal_potential", "zero")))
    env_reward = torch.from_numpy(np.asarray(data.get(REWARD, np.zeros(length)), np.float32))
    reward = combine_rewards(str(cfg.reward.mode), env_reward,
                             torch.from_numpy(succ_now[nxt]), shaping,
                             float(cfg.reward.get("sparse_weight", 1.0)),
                             shaping_weight(cfg.reward, gamma))
    rabc = cfg.get("rabc") or {}
    return {PROGRESS: progress.astype(np.float32), REWARD: reward.numpy().astype(np.float32),
            SUCCESS: succ_now[nxt].astype(bool),
            RABC_WEIGHT: rabc_weights(progress, int(rabc.get("window", 25)),
                                      float(rabc.get("kappa", 0.01)))}


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` atomically."""
    with writing(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` (copy across file systems); atomic, skips existing."""
    if dst.exists():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic_path(dst)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def labelled_table(table: pa.Table, labels: dict[str, np.ndarray]) -> pa.Table:
    """``table`` with the label columns set (the source's reward columns kept as source.*)."""
    for key in (REWARD, SUCCESS):
        if key in table.column_names and SOURCE_PREFIX + key not in table.column_names:
            table = table.append_column(SOURCE_PREFIX + key, table[key])
    for key, values in labels.items():
        column = to_column(values, LABEL_FEATURES[key]["dtype"])
        if key in table.column_names:
            table = table.set_column(table.column_names.index(key), key, column)
        else:
            table = table.append_column(key, column)
    return table


def resolve_reward(cfg: DictConfig, ds: LeRobotDataset) -> DictConfig:
    """``cfg`` with a learned PRM's checkpoint set.

    A null checkpoint takes the newest one trained for the dataset's task (as ``embodied train
    reward=prm`` does).
    """
    model = cfg.reward.get("model")
    if model is None or model.get("name") != "prm" or model.get("checkpoint") is not None:
        return cfg
    from embodied.reward.prm.checkpoint import newest_prm_checkpoint

    task = (ds.info.get("embodied") or {}).get("task")
    if not task:
        raise DatasetError(f"{ds.root / INFO_PATH} does not say which task it shows; pass "
                           "reward.checkpoint=<a PRM run folder or prm.pt>")
    try:
        path = newest_prm_checkpoint(task)
    except FileNotFoundError as err:
        raise DatasetError(str(err)) from err
    print(f"reward: PRM checkpoint {path}")
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    cfg.reward.model.checkpoint = str(path)
    return cfg


def settings(cfg: DictConfig, source: Path) -> dict[str, Any]:
    """What determines the labels; a resumed run must have the same."""
    keep = ("reward", "batch_size", "gamma", "success_threshold", "progress_success",
            "instruction", "cameras", "rabc")
    return {"source": str(source.resolve()),
            **{k: OmegaConf.to_container(cfg, resolve=True).get(k) for k in keep}}


def default_out(cfg: DictConfig, source: Path) -> Path:
    """``<source>_<name>`` beside ``source``; ``name``: the reward model's (default ``reward``)."""
    name = (cfg.reward.get("model") or {}).get("name", "reward") if cfg.reward.get("model") \
        else "reward"
    return source.parent / f"{source.name}_{name}"


def label_dataset(cfg: DictConfig) -> dict[str, Any]:
    """Label ``cfg.dataset`` into ``cfg.out`` (configs/commands/label.yaml).

    Resumes an unfinished run. Returns (and prints) the summary.
    """
    if not cfg.get("dataset"):
        raise DatasetError("no dataset given: pass dataset=PATH (a LeRobot dataset folder)")
    source = Path(str(cfg.dataset)).expanduser()
    out = Path(str(cfg.out)).expanduser() if cfg.get("out") else default_out(cfg, source)
    if out.resolve() == source.resolve():
        raise DatasetError(f"out={out} is the source dataset; labels go to a new folder "
                           "(the source is never modified)")
    ds = LeRobotDataset(source)
    if ds.version != "v3.0":
        raise DatasetError(f"{ds.root / INFO_PATH}: a {ds.version} dataset; labelling writes "
                           "v3.0 (one metadata row per episode), convert it to v3.0 first")
    ds.validate()
    cfg = resolve_reward(cfg, ds)
    work = out / WORK_DIR
    wanted = settings(cfg, source)
    finished = (out / INFO_PATH).exists() and not work.exists()
    distributed.barrier()  # every rank has looked before anyone writes
    if finished:
        done = read_json(out / "meta" / "labelling.json")
        if done.get("settings") != wanted:
            raise DatasetError(f"{out} already holds a dataset labelled with other settings; "
                               "choose another out=")
        print(f"{out} is already labelled with these settings: nothing to do")
        return done["summary"]
    if out.exists() and not work.exists() and any(out.iterdir()):
        raise DatasetError(f"{out} exists and is not an unfinished labelling of {source}; "
                           "choose another out=")
    settings_path = work / "settings.json"
    if distributed.is_main():
        work.mkdir(parents=True, exist_ok=True)
        if not settings_path.exists():
            write_json(wanted, settings_path)
    distributed.barrier()
    if read_json(settings_path) != wanted:
        raise DatasetError(
            f"{out} holds an unfinished labelling with other settings ({settings_path}); "
            "rerun with the same settings to resume, or choose another out=")

    try:
        model = make_reward_model(cfg.reward)
    except (FileNotFoundError, ValueError) as err:
        raise DatasetError(f"cannot build the reward model: {err}") from err
    if model is None:
        raise DatasetError(f"reward={cfg.reward.get('mode')} has no reward model to label "
                           "with; choose e.g. reward=oracle, reward=clip or a learned PRM")
    cameras = list(cfg.cameras or ds.cameras)
    if model.requires_frames:
        want = list(model.camera_names or [])
        missing = [c for c in [*want, *cameras] if c not in ds.cameras]
        if missing:
            raise DatasetError(
                f"{ds.root / INFO_PATH}: the reward model expects camera(s) {missing} but the "
                f"dataset has {ds.cameras}; label a dataset recorded with those cameras or set "
                "the model's camera_names / cameras= to views the dataset has")
        if not ds.cameras:
            raise DatasetError(f"{ds.root / INFO_PATH}: the dataset has no camera videos, but "
                               f"{type(model).__name__} scores frames")
        for episode in ds.episodes:
            for key, (path, _) in episode.videos.items():
                ds.check_video(path, key)

    files = ds.data_files()
    todo = [i for i in range(ds.num_episodes)
            if not (work / f"episode_{ds.episodes[i].index:06d}.npz").exists()]
    if len(todo) < ds.num_episodes and distributed.is_main():
        print(f"resuming {out}: {ds.num_episodes - len(todo)} of {ds.num_episodes} episodes "
              "already labelled")
    mine = set(range(distributed.rank(), ds.num_episodes, distributed.world_size()))
    todo = [i for i in todo if i in mine]
    frames_todo = sum(ds.episodes[i].length for i in todo)
    bar = tqdm(total=frames_todo, unit="frame", desc="label", dynamic_ncols=True,
               disable=not (cfg.get("progress", True) and distributed.is_main()))
    start = time.perf_counter()
    scored = 0
    try:
        for data_file, eps in files.items():
            rel = data_file.relative_to(ds.root)
            for i in eps:
                path = work / f"episode_{ds.episodes[i].index:06d}.npz"
                if i not in mine or path.exists():
                    continue
                instruction = str(cfg.instruction) if cfg.get("instruction") else ds.task_of(i)
                progress, success = score_episode(model, ds, i, instruction, cameras,
                                                  int(cfg.batch_size))
                labels = episode_labels(progress, success, ds.episode_data(i), cfg)
                save_npz(path, labels)
                scored += len(progress)
                bar.update(len(progress))
            if not distributed.is_distributed() and not (out / rel).exists():
                write_parquet(_label_file(ds, data_file, eps, work), out / rel)
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    if distributed.is_distributed():  # every rank's episodes are labelled: rank 0 merges
        scored = int(distributed.sum_over_ranks(scored))
        distributed.barrier()
        if not distributed.is_main():
            distributed.barrier()
            return read_json(out / "meta" / "labelling.json")["summary"]
        for data_file, eps in files.items():
            if not (out / data_file.relative_to(ds.root)).exists():
                write_parquet(_label_file(ds, data_file, eps, work),
                              out / data_file.relative_to(ds.root))
    for episode in ds.episodes:
        for path, _ in episode.videos.values():
            link_or_copy(path, out / path.relative_to(ds.root))
    summary = _finish(ds, out, work, cfg, wanted, scored, seconds)
    distributed.barrier()  # the other ranks read the summary once it is written
    return summary


def _label_file(ds: LeRobotDataset, data_file: Path, eps: list[int], work: Path) -> pa.Table:
    """One output data file: the source file with its episodes' labels."""
    table = ds.table(data_file)
    ids = ds._table[2] if ds._table is not None else None
    assert ids is not None
    columns = {k: np.zeros(table.num_rows, np.dtype(f["dtype"])) for k, f in
               LABEL_FEATURES.items()}
    covered = np.zeros(table.num_rows, bool)
    for i in eps:
        rows = np.flatnonzero(ids == ds.episodes[i].index)
        with np.load(work / f"episode_{ds.episodes[i].index:06d}.npz") as labels:
            for key in columns:
                columns[key][rows] = labels[key]
        covered[rows] = True
    if not covered.all():
        raise DatasetError(f"{data_file}: {int((~covered).sum())} rows belong to no episode "
                           "of the metadata")
    return labelled_table(table, columns)


def _finish(ds: LeRobotDataset, out: Path, work: Path, cfg: DictConfig,
            wanted: dict[str, Any], scored: int, seconds: float) -> dict:
    """Metadata (info, stats, tasks, episodes), the progress plot, the summary; then cleanup."""
    per_episode: list[dict[str, st.Stats]] = []
    curves = []
    for episode in ds.episodes:
        with np.load(work / f"episode_{episode.index:06d}.npz") as labels:
            per_episode.append({k: st.array_stats(labels[k]) for k in LABEL_FEATURES})
            curves.append(labels[PROGRESS].copy())
    info = json.loads(json.dumps(ds.info))
    features = dict(info["features"])
    for key in (REWARD, SUCCESS):
        if key in features and SOURCE_PREFIX + key not in features:
            features[SOURCE_PREFIX + key] = features[key]
    features |= LABEL_FEATURES
    info["features"] = features
    source_stats = ds.stats()
    for key in (REWARD, SUCCESS):
        if key in source_stats and SOURCE_PREFIX + key not in source_stats:
            source_stats[SOURCE_PREFIX + key] = source_stats[key]
    new_stats = {k: st.aggregate(p[k] for p in per_episode) for k in LABEL_FEATURES}
    success = np.array([bool(e.meta.get("success", False)) for e in ds.episodes])
    final = np.array([c[-1] for c in curves])
    summary = {
        "dataset": str(out), "source": str(ds.root), "episodes": ds.num_episodes,
        "frames": ds.num_frames,
        "reward_model": (cfg.reward.get("model") or {}).get("name"),
        "mode": str(cfg.reward.mode),
        "frames_scored_this_run": scored,
        "frames_per_second": round(scored / seconds, 1) if scored and seconds > 0 else None,
        "mean_final_progress": float(final.mean()),
        "mean_final_progress_success": float(final[success].mean()) if success.any() else None,
        "mean_final_progress_failure": float(final[~success].mean()) if (~success).any()
        else None,
    }
    shown = min(len(curves), int(cfg.get("plot_episodes", 32)))
    longest = max(len(c) for c in curves[:shown])
    grid = np.full((longest, shown), np.nan)
    for j, c in enumerate(curves[:shown]):
        grid[: len(c), j] = c
    (out / "meta").mkdir(parents=True, exist_ok=True)
    plot = plot_progress(grid, 1.0 / ds.fps, out / "meta" / "label_progress.png",
                         f"{summary['reward_model']} progress of {shown} episodes "
                         "(green: the episode succeeded)", success[:shown])
    summary["progress_plot"] = str(plot)
    rows = []
    for episode, stats in zip(ds.episodes, per_episode, strict=True):
        row = dict(episode.meta)
        row |= {f"stats/{k}/{name}": v for k, s in stats.items() for name, v in s.items()}
        rows.append(row)
    write_episodes(rows, out)
    link_or_copy(ds.root / TASKS_PATH, out / TASKS_PATH)
    write_json(st.to_json({**source_stats, **new_stats}), out / STATS_PATH)
    write_json({"settings": wanted, "summary": summary}, out / "meta" / "labelling.json")
    write_json(info, out / INFO_PATH)
    shutil.rmtree(work)
    print(f"\nlabelled {ds.num_episodes} episodes, {ds.num_frames} frames with "
          f"{summary['reward_model']} (mode {summary['mode']})"
          + (f" at {summary['frames_per_second']:.0f} frames/s" if scored else ""))
    if summary["mean_final_progress_success"] is not None:
        print(f"  final progress      {summary['mean_final_progress_success']:.2f} in "
              f"successful episodes, {summary['mean_final_progress_failure'] or 0:.2f} in "
              "failed ones")
    print(f"  progress plot       {plot}")
    print(f"  dataset             {out}")
    return summary
