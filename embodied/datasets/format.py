"""The LeRobot dataset layout: path templates, reserved keys, and the format error.

Version 3.0 (what the writer produces; files hold many episodes)::

    meta/info.json                       fps, features, path templates, counts
    meta/stats.json                      per-feature min/max/mean/std/count
    meta/tasks.parquet                   task strings and their task_index
    meta/episodes/chunk-000/file-000.parquet   one row per episode: length, tasks,
                                         data file + [from, to) frame rows, per camera the
                                         video file + [from, to) timestamps, per-episode stats
    data/chunk-000/file-000.parquet      one row per frame
    videos/<camera key>/chunk-000/file-000.mp4   episodes one after another

Version 2.1 (read only; one parquet and one MP4 per episode, metadata in JSON lines)::

    meta/info.json, meta/episodes.jsonl, meta/tasks.jsonl, meta/episodes_stats.jsonl
    data/chunk-000/episode_000000.parquet
    videos/chunk-000/<camera key>/episode_000000.mp4

A frame of episode ``e`` at ``timestamp`` t is frame ``round((from_timestamp + t) * fps)``
of the episode's video file. Keys of one frame row: ``observation.state``, ``action``,
``timestamp``, ``frame_index``, ``episode_index``, ``index``, ``task_index`` and the
reward columns ``next.reward``, ``next.done``, ``next.success``, ``progress``.
"""

from __future__ import annotations

from pathlib import Path

CODEBASE_VERSION = "v3.0"
READABLE_VERSIONS = ("v2.0", "v2.1", "v3.0")

DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
INFO_PATH = "meta/info.json"
COLLECTING_PATH = ".collecting.json"  # an unfinished collection's state at its last file
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
# v2.1
LEGACY_EPISODES_PATH = "meta/episodes.jsonl"
LEGACY_TASKS_PATH = "meta/tasks.jsonl"
LEGACY_EPISODES_STATS_PATH = "meta/episodes_stats.jsonl"

CHUNK_SIZE = 1000  # files per chunk folder

STATE = "observation.state"
ACTION = "action"
IMAGE_PREFIX = "observation.images."
TIMESTAMP = "timestamp"
FRAME_INDEX = "frame_index"
EPISODE_INDEX = "episode_index"
INDEX = "index"
TASK_INDEX = "task_index"
REWARD = "next.reward"
DONE = "next.done"
TRUNCATED = "next.truncated"  # done by a time limit (the next state exists but is not stored)
SUCCESS = "next.success"
PROGRESS = "progress"
SIM_PREFIX = "sim."  # privileged simulator state per frame (e.g. sim.progress), for oracles
SOURCE_PREFIX = "source."  # a labelled dataset keeps the source's reward columns here

DEFAULT_FEATURES = {
    TIMESTAMP: {"dtype": "float32", "shape": [1], "names": None},
    FRAME_INDEX: {"dtype": "int64", "shape": [1], "names": None},
    EPISODE_INDEX: {"dtype": "int64", "shape": [1], "names": None},
    INDEX: {"dtype": "int64", "shape": [1], "names": None},
    TASK_INDEX: {"dtype": "int64", "shape": [1], "names": None},
}


class DatasetError(ValueError):
    """A dataset that cannot be read or written as asked; the message names the file."""


def unfinished_message(root: Path) -> str | None:
    """Why ``root`` is an unfinished collection and how to go on; None if it is not one.

    An unfinished collection has dataset files but no ``meta/info.json`` (written last).
    """
    if (root / INFO_PATH).exists() or not any(
            (root / d).exists() for d in ("data", "videos", COLLECTING_PATH)):
        return None
    what = (f"{root}: unfinished collection ({INFO_PATH}, written last, is missing: the "
            "`embodied collect` that wrote it was stopped or failed); ")
    if (root / COLLECTING_PATH).is_file():
        return what + f"continue it by running the same collect command with out={root}"
    return what + f"delete {root} and run the collect again"


def camera_key(camera: str) -> str:
    """The feature key of a camera's video: ``observation.images.<camera>``."""
    return camera if camera.startswith(IMAGE_PREFIX) else IMAGE_PREFIX + camera


def camera_name(key: str) -> str:
    """The camera name of a video feature key (``observation.images.front`` -> ``front``)."""
    return key.removeprefix(IMAGE_PREFIX)
