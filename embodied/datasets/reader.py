"""Read a LeRobot dataset (v3.0, and v2.0/v2.1) with pyarrow and PyAV.

``LeRobotDataset(root)`` loads the metadata; frames are read per episode
(``episode_data``) and camera views by timestamp (``episode_frames``), each video
file decoded once and cached. Everything inconsistent (a damaged parquet file, a
missing or short video, timestamps or a video that do not match the dataset's fps)
raises a :class:`DatasetError` naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from embodied.datasets import stats as st
from embodied.datasets.format import (
    EPISODE_INDEX,
    FRAME_INDEX,
    INFO_PATH,
    LEGACY_EPISODES_PATH,
    LEGACY_TASKS_PATH,
    READABLE_VERSIONS,
    STATS_PATH,
    TIMESTAMP,
    DatasetError,
    camera_key,
    camera_name,
    unfinished_message,
)
from embodied.datasets.meta import (
    from_column,
    read_episodes,
    read_json,
    read_jsonl,
    read_parquet,
    read_tasks,
)
from embodied.datasets.video import VideoCache, check_frame, probe


@dataclass
class Episode:
    """Where one episode lives: its rows of a data file and its span of each video file."""

    index: int
    length: int
    tasks: list[str]
    data_file: Path
    videos: dict[str, tuple[Path, float]] = field(default_factory=dict)  # key -> (file, from_ts)
    meta: dict[str, Any] = field(default_factory=dict)  # the raw metadata row


class LeRobotDataset:
    """A LeRobot dataset on disk (v3.0 or v2.x), read with pyarrow and PyAV."""

    def __init__(self, root: str | Path, video_cache_size: int = 4):
        self.root = Path(root)
        if not self.root.is_dir():
            raise DatasetError(f"dataset folder {self.root} does not exist")
        if (unfinished := unfinished_message(self.root)) is not None:
            raise DatasetError(unfinished)
        self.info: dict[str, Any] = read_json(self.root / INFO_PATH)
        self.version = str(self.info.get("codebase_version", ""))
        if self.version not in READABLE_VERSIONS:
            raise DatasetError(f"{self.root / INFO_PATH}: codebase_version "
                               f"'{self.version}' is not one of {list(READABLE_VERSIONS)}")
        self.fps = float(self.info["fps"])
        if not self.fps > 0:
            raise DatasetError(f"{self.root / INFO_PATH}: fps is {self.info['fps']}; it must be "
                               "> 0 (the frame rate the data and videos were recorded at)")
        self.features: dict[str, dict[str, Any]] = self.info["features"]
        self.camera_keys = [k for k, f in self.features.items() if f["dtype"] == "video"]
        self.cameras = [camera_name(k) for k in self.camera_keys]
        self.episodes = self._load_v3() if self.version == "v3.0" else self._load_v2()
        self.num_frames = sum(e.length for e in self.episodes)
        self._videos = VideoCache(video_cache_size)
        self._table: tuple[Path, pa.Table, np.ndarray] | None = None
        self._checked_videos: set[Path] = set()

    # ------------------------------------------------------------- metadata
    def _load_v3(self) -> list[Episode]:
        self.tasks = read_tasks(self.root)
        episodes = []
        for row in read_episodes(self.root):
            data = self.root / self.info["data_path"].format(
                chunk_index=int(row["data/chunk_index"]), file_index=int(row["data/file_index"]))
            videos = {}
            for key in self.camera_keys:
                path = self.root / self.info["video_path"].format(
                    video_key=key, chunk_index=int(row[f"videos/{key}/chunk_index"]),
                    file_index=int(row[f"videos/{key}/file_index"]))
                videos[key] = (path, float(row[f"videos/{key}/from_timestamp"]))
            episodes.append(Episode(int(row["episode_index"]), int(row["length"]),
                                    list(row.get("tasks") or []), data, videos, row))
        return episodes

    def _load_v2(self) -> list[Episode]:
        tasks = read_jsonl(self.root / LEGACY_TASKS_PATH)
        self.tasks = [t["task"] for t in sorted(tasks, key=lambda t: int(t["task_index"]))]
        chunks = int(self.info.get("chunks_size", 1000))
        episodes = []
        for row in sorted(read_jsonl(self.root / LEGACY_EPISODES_PATH),
                          key=lambda r: int(r["episode_index"])):
            ep = int(row["episode_index"])
            fmt = {"episode_chunk": ep // chunks, "episode_index": ep}
            data = self.root / self.info["data_path"].format(**fmt)
            videos = {key: (self.root / self.info["video_path"].format(video_key=key, **fmt), 0.0)
                      for key in self.camera_keys}
            episodes.append(Episode(ep, int(row["length"]), list(row.get("tasks") or []),
                                    data, videos, row))
        return episodes

    @property
    def num_episodes(self) -> int:
        """Number of episodes in ``meta/episodes``."""
        return len(self.episodes)

    def stats(self) -> dict[str, st.Stats]:
        """``meta/stats.json`` as numpy arrays (empty if the dataset has none)."""
        path = self.root / STATS_PATH
        return st.from_json(read_json(path)) if path.is_file() else {}

    def data_files(self) -> dict[Path, list[int]]:
        """Data files in order, each with the episodes it holds."""
        files: dict[Path, list[int]] = {}
        for i, ep in enumerate(self.episodes):
            files.setdefault(ep.data_file, []).append(i)
        return files

    def task_of(self, ep: int) -> str:
        """The (first) task string of an episode."""
        tasks = self.episodes[ep].tasks
        return tasks[0] if tasks else (self.tasks[0] if self.tasks else "")

    # ---------------------------------------------------------------- frames
    def table(self, path: Path) -> pa.Table:
        """A data file's table (the last one read is cached)."""
        if self._table is None or self._table[0] != path:
            table = read_parquet(path)
            if EPISODE_INDEX not in table.column_names:
                raise DatasetError(f"{path}: no '{EPISODE_INDEX}' column")
            self._table = (path, table, from_column(table[EPISODE_INDEX]))
        return self._table[1]

    def episode_rows(self, ep: int) -> pa.Table:
        """The rows of episode ``ep`` (by position in ``episodes``) of its data file."""
        episode = self.episodes[ep]
        self.table(episode.data_file)
        assert self._table is not None
        _, table, ids = self._table
        rows = np.flatnonzero(ids == episode.index)
        if len(rows) != episode.length:
            raise DatasetError(
                f"{episode.data_file}: holds {len(rows)} rows of episode {episode.index} but "
                f"the metadata says {episode.length} (truncated or rewritten data file?)")
        if len(rows) and rows[-1] - rows[0] + 1 != len(rows):
            raise DatasetError(f"{episode.data_file}: the rows of episode {episode.index} are "
                               "not contiguous")
        out = table.slice(int(rows[0]), len(rows)) if len(rows) else table.slice(0, 0)
        self._check_timestamps(out, episode)
        return out

    def _check_timestamps(self, rows: pa.Table, episode: Episode) -> None:
        if TIMESTAMP not in rows.column_names or FRAME_INDEX not in rows.column_names:
            return
        ts = from_column(rows[TIMESTAMP]).astype(np.float64)
        expected = from_column(rows[FRAME_INDEX]).astype(np.float64) / self.fps
        if len(ts) and np.abs(ts - expected).max() > 0.5 / self.fps:
            i = int(np.abs(ts - expected).argmax())
            raise DatasetError(
                f"{episode.data_file}: episode {episode.index} has timestamp {ts[i]:.4f} s at "
                f"frame {i}, which is frame_index / fps = {expected[i]:.4f} s at the "
                f"{self.fps:g} fps of {self.root / INFO_PATH}: the fps does not match the data")

    def episode_data(self, ep: int, keys: list[str] | None = None) -> dict[str, np.ndarray]:
        """Columns of episode ``ep`` as numpy arrays [T] or [T, *shape]."""
        rows = self.episode_rows(ep)
        keys = keys or [k for k in rows.column_names if not k.startswith("__")]
        out = {}
        for key in keys:
            if key not in rows.column_names:
                raise DatasetError(f"{self.episodes[ep].data_file}: no column '{key}' (it has "
                                   f"{rows.column_names})")
            shape = self.features.get(key, {}).get("shape", [1])
            out[key] = from_column(rows[key], shape)
        return out

    def check_video(self, path: Path, key: str) -> None:
        """Exists, and runs at the dataset's fps (checked once per file)."""
        if path in self._checked_videos:
            return
        if not path.is_file():
            raise DatasetError(f"video file {path} ({key}) is missing")
        _, fps, _, _, _ = probe(path)
        declared = self.features[key].get("info", {}).get("video.fps", self.fps)
        for value, source in ((fps, str(path)), (float(declared), f"features['{key}']")):
            if abs(value - self.fps) > 1e-3 * self.fps:
                raise DatasetError(
                    f"{path}: {source} runs at {value:g} fps but {self.root / INFO_PATH} says "
                    f"{self.fps:g} fps; frames would be read at the wrong times (re-encode the "
                    "video or fix the fps)")
        self._checked_videos.add(path)

    def validate(self) -> None:
        """Check everything a full pass would read, before any work starts.

        Every data file (checksums, rows of each episode, timestamps at the fps) and every
        video file (present, at the fps, decodable up to the last frame an episode needs).
        The first problem is a :class:`DatasetError` naming the file.
        """
        for ep in range(self.num_episodes):
            self.episode_rows(ep)
        needed: dict[tuple[Path, str], int] = {}
        for episode in self.episodes:
            last = (episode.length - 1) / self.fps
            for key, (path, start) in episode.videos.items():
                frame = int(np.rint((start + last) * self.fps))
                needed[(path, key)] = max(needed.get((path, key), 0), frame)
        for (path, key), frame in needed.items():
            self.check_video(path, key)
            check_frame(path, frame)

    def episode_frames(self, ep: int, camera: str,
                       timestamps: np.ndarray | None = None) -> np.ndarray:
        """Frames uint8 [T, H, W, 3] of one camera of episode ``ep`` at its timestamps."""
        key = camera_key(camera)
        episode = self.episodes[ep]
        if key not in episode.videos:
            raise DatasetError(f"{self.root / INFO_PATH}: the dataset has no camera "
                               f"'{camera_name(key)}' (it has {self.cameras})")
        path, start = episode.videos[key]
        self.check_video(path, key)
        if timestamps is None:
            timestamps = from_column(self.episode_rows(ep)[TIMESTAMP]).astype(np.float64)
        return self._videos.get_frames(path, timestamps, self.fps, start)

    def episode_views(self, ep: int, cameras: list[str] | None = None) -> np.ndarray:
        """All (or the given) camera views of an episode: uint8 [T, V, H, W, 3]."""
        ts = from_column(self.episode_rows(ep)[TIMESTAMP]).astype(np.float64)
        return np.stack([self.episode_frames(ep, c, ts) for c in (cameras or self.cameras)], 1)
