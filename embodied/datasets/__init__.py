"""Datasets in the LeRobot format (v3.0 written, v3.0 and v2.x read), collection, labelling."""

from __future__ import annotations

from embodied.datasets.format import DatasetError, camera_key, camera_name
from embodied.datasets.reader import Episode, LeRobotDataset
from embodied.datasets.writer import DatasetWriter, video_feature

__all__ = [
    "DatasetError",
    "DatasetWriter",
    "Episode",
    "LeRobotDataset",
    "camera_key",
    "camera_name",
    "video_feature",
]
