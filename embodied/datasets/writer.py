"""Write a LeRobot v3.0 dataset: frames to parquet, camera views to MP4, meta/ last.

``meta/info.json`` is written by ``close()`` after everything else, so a folder
without it is an unfinished dataset, never a silently partial one. Until then
``.collecting.json`` holds the writer's state as of the last finished data file, so
a writer opened with ``resume=True`` continues an interrupted collection from there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from embodied.datasets import stats as st
from embodied.datasets.format import (
    ACTION,
    CHUNK_SIZE,
    CODEBASE_VERSION,
    COLLECTING_PATH,
    DATA_PATH,
    DEFAULT_FEATURES,
    EPISODE_INDEX,
    FRAME_INDEX,
    INDEX,
    INFO_PATH,
    STATS_PATH,
    TASK_INDEX,
    TIMESTAMP,
    VIDEO_PATH,
    DatasetError,
    camera_key,
    unfinished_message,
)
from embodied.datasets.meta import (
    read_json,
    to_column,
    write_episodes,
    write_json,
    write_parquet,
    write_tasks,
)
from embodied.datasets.video import CODECS, VideoAppender
from sim.video import pick_encoder


def video_feature(height: int, width: int, fps: int, codec: str = CODECS[0]) -> dict[str, Any]:
    """The ``info.json`` feature entry of one camera's video in ``codec`` (FFmpeg's name)."""
    return {"dtype": "video", "shape": [height, width, 3],
            "names": ["height", "width", "channels"],
            "info": {"video.height": height, "video.width": width, "video.codec": codec,
                     "video.pix_fmt": "yuv420p", "video.is_depth_map": False,
                     "video.fps": fps, "video.channels": 3, "has_audio": False}}


def _jsonable(row: Mapping[str, Any]) -> dict[str, Any]:
    """An episode metadata row with numpy values as JSON lists and numbers."""
    return {k: v.tolist() if isinstance(v, np.ndarray | np.generic) else v
            for k, v in row.items()}


def chunk_file(n: int) -> tuple[int, int]:
    """(chunk_index, file_index) of the n-th file."""
    return n // CHUNK_SIZE, n % CHUNK_SIZE


class DatasetWriter:
    """Appends episodes to a new dataset at ``root``; ``close()`` writes the metadata.

    ``features``: the frame features beyond the default index columns, e.g.
    ``{"observation.state": {"dtype": "float32", "shape": [41], "names": None}, ...}``.
    ``cameras``: camera names; each becomes the video feature
    ``observation.images.<name>`` of ``image_size`` (height, width).
    ``episodes_per_file`` episodes share one data file and one video file per camera.
    ``video_codecs``: codecs in order of preference (:func:`sim.video.pick_encoder`);
    the first the installed FFmpeg can encode is written and recorded in ``info.json``.
    """

    def __init__(self, root: str | Path, fps: int, features: Mapping[str, Mapping[str, Any]],
                 cameras: Sequence[str] = (), image_size: tuple[int, int] = (96, 96),
                 robot_type: str | None = None, episodes_per_file: int = 50,
                 extra_info: Mapping[str, Any] | None = None, resume: bool = False,
                 video_codecs: Sequence[str] = CODECS):
        self.root = Path(root)
        unfinished = unfinished_message(self.root)
        if unfinished is not None and not (resume and (self.root / COLLECTING_PATH).is_file()):
            raise DatasetError(unfinished)
        if (self.root / INFO_PATH).exists():
            raise DatasetError(f"{self.root} already holds a dataset; choose a new folder "
                               "(datasets are never overwritten)")
        if ACTION not in features:
            raise DatasetError(f"features must include '{ACTION}'")
        self.fps, self.robot_type = int(fps), robot_type
        self.features = {k: dict(v) for k, v in features.items()}
        self.cameras = [camera_key(c) for c in cameras]
        self.image_size = (int(image_size[0]), int(image_size[1]))
        self.episodes_per_file = int(episodes_per_file)
        self.extra_info = dict(extra_info or {})
        self.video_codecs = [str(c) for c in video_codecs]
        try:
            self.video_codec = pick_encoder(self.video_codecs)[0] if self.cameras else None
        except ValueError as e:
            raise DatasetError(f"video_codecs: {e}") from e
        self.tasks: list[str] = []
        self.episodes: list[dict[str, Any]] = []
        self.frame_stats: list[dict[str, st.Stats]] = []
        self._tables: list[pa.Table] = []
        self._videos: dict[str, VideoAppender] = {}
        self._file = 0  # running file number (chunk, file) = divmod(n, CHUNK_SIZE)
        self._in_file = 0
        self._frames = 0
        if unfinished is not None:
            self._restore()

    def _settings(self) -> dict[str, Any]:
        """What the dataset's files depend on; a resumed writer must have the same."""
        return json.loads(json.dumps({
            "fps": self.fps, "features": self.features, "cameras": self.cameras,
            "image_size": self.image_size, "episodes_per_file": self.episodes_per_file,
            "robot_type": self.robot_type, "extra_info": self.extra_info,
            "video_codecs": self.video_codecs}))

    def _save_progress(self) -> None:
        """Record the state as of the finished files (called before a new file starts)."""
        write_json({"settings": self._settings(), "tasks": self.tasks, "file": self._file,
                    "frames": self._frames, "episodes": [_jsonable(r) for r in self.episodes],
                    "frame_stats": [st.to_json(s) for s in self.frame_stats]},
                   self.root / COLLECTING_PATH)

    def _restore(self) -> None:
        """Continue from the state of an interrupted collection with the same settings."""
        state = read_json(self.root / COLLECTING_PATH)
        if state.get("settings") != self._settings():
            raise DatasetError(f"{self.root}: an unfinished collection with other settings "
                               f"({self.root / COLLECTING_PATH}); continue it with the same "
                               "settings, or choose another out=")
        self.tasks, self.episodes = list(state["tasks"]), list(state["episodes"])
        self.frame_stats = [st.from_json(s) for s in state["frame_stats"]]
        self._file, self._frames = int(state["file"]), int(state["frames"])

    def _task_index(self, task: str) -> int:
        if task not in self.tasks:
            self.tasks.append(task)
        return self.tasks.index(task)

    def add_episode(self, data: Mapping[str, np.ndarray], task: str,
                    videos: Mapping[str, np.ndarray] | None = None,
                    extra: Mapping[str, Any] | None = None) -> int:
        """Append one episode and return its index.

        ``data[key]`` [T, ...] per feature, ``videos[camera]`` uint8 [T, H, W, 3]; ``extra`` goes
        into the episode's metadata row.
        """
        missing = sorted(set(self.features) - set(data))
        unknown = sorted(set(data) - set(self.features))
        if missing or unknown:
            raise DatasetError(f"episode data does not match the features: missing "
                               f"{missing}, unknown {unknown}")
        length = len(data[ACTION])
        videos = {camera_key(k): v for k, v in (videos or {}).items()}
        if sorted(videos) != sorted(self.cameras):
            raise DatasetError(f"episode videos {sorted(videos)} do not match the cameras "
                               f"{sorted(self.cameras)}")
        for key, values in [*data.items(), *videos.items()]:
            if len(values) != length:
                raise DatasetError(f"'{key}' has {len(values)} frames, '{ACTION}' has {length}")
        if length == 0:
            raise DatasetError("an episode needs at least one frame")
        if self._in_file == 0:  # a new file starts: what is finished so far can resume
            self._save_progress()
        ep = len(self.episodes)
        chunk, file = chunk_file(self._file)
        columns = {k: to_column(data[k], self.features[k]["dtype"]) for k in self.features}
        columns[TIMESTAMP] = to_column(np.arange(length) / self.fps, "float32")
        columns[FRAME_INDEX] = to_column(np.arange(length), "int64")
        columns[EPISODE_INDEX] = to_column(np.full(length, ep), "int64")
        columns[INDEX] = to_column(np.arange(self._frames, self._frames + length), "int64")
        columns[TASK_INDEX] = to_column(np.full(length, self._task_index(task)), "int64")
        self._tables.append(pa.table(columns))
        ep_stats = {k: st.array_stats(np.asarray(data[k])) for k in self.features}
        ep_stats |= {k: st.array_stats(columns[k].to_numpy()) for k in DEFAULT_FEATURES}
        row: dict[str, Any] = {
            "episode_index": ep, "tasks": [task], "length": length,
            "data/chunk_index": chunk, "data/file_index": file,
            "dataset_from_index": self._frames, "dataset_to_index": self._frames + length,
        }
        for key, frames in videos.items():
            if key not in self._videos:
                h, w = self.image_size
                self._videos[key] = VideoAppender(
                    self.root / VIDEO_PATH.format(video_key=key, chunk_index=chunk,
                                                  file_index=file), self.fps, w, h,
                    self.video_codecs)
            start, end = self._videos[key].append(np.asarray(frames))
            row |= {f"videos/{key}/chunk_index": chunk, f"videos/{key}/file_index": file,
                    f"videos/{key}/from_timestamp": start, f"videos/{key}/to_timestamp": end}
            ep_stats[key] = st.image_stats(np.asarray(frames))
        row |= {"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0}
        row |= {f"stats/{k}/{name}": v for k, s in ep_stats.items() for name, v in s.items()}
        row |= dict(extra or {})
        self.episodes.append(row)
        self.frame_stats.append(ep_stats)
        self._frames += length
        self._in_file += 1
        if self._in_file >= self.episodes_per_file:
            self._flush()
        return ep

    def _flush(self) -> None:
        """Finish the current data file and video files; the next episode starts new ones."""
        for appender in self._videos.values():
            appender.close()
        if self._tables:
            chunk, file = chunk_file(self._file)
            write_parquet(pa.concat_tables(self._tables),
                          self.root / DATA_PATH.format(chunk_index=chunk, file_index=file))
        self._tables, self._videos = [], {}
        if self._in_file:
            self._file += 1
        self._in_file = 0

    def info(self) -> dict[str, Any]:
        """The ``meta/info.json`` content."""
        h, w = self.image_size
        features = {**self.features,
                    **{k: video_feature(h, w, self.fps, self.video_codec or CODECS[0])
                       for k in self.cameras},
                    **DEFAULT_FEATURES}
        return {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": self.robot_type,
            "total_episodes": len(self.episodes),
            "total_frames": self._frames,
            "total_tasks": len(self.tasks),
            "chunks_size": CHUNK_SIZE,
            "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 500,
            "fps": self.fps,
            "splits": {"train": f"0:{len(self.episodes)}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if self.cameras else None,
            "features": features,
            **self.extra_info,
        }

    def close(self) -> Path:
        """Write the last files and the metadata; returns the dataset root."""
        if not self.episodes:
            raise DatasetError(f"{self.root}: no episode was added")
        self._flush()
        write_episodes(self.episodes, self.root)
        write_tasks(self.tasks, self.root)
        keys = list(self.frame_stats[0])
        write_json(st.to_json({k: st.aggregate(s[k] for s in self.frame_stats) for k in keys}),
                   self.root / STATS_PATH)
        write_json(self.info(), self.root / INFO_PATH)
        (self.root / COLLECTING_PATH).unlink(missing_ok=True)
        return self.root
