"""Dataset videos: append episodes to an MP4 file, decode a file once and index it by time.

Encoding is OpenCV's MPEG-4 Part 2 ('mp4v', lossy), which OpenCV, FFmpeg and PyAV
decode everywhere. Decoding reads the whole file once into memory; ``VideoCache``
keeps the most recently used files so a pass over the episodes of a file decodes
it once.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import cv2
import numpy as np

from embodied.datasets.format import DatasetError
from sim.video import check_written

CODEC = "mpeg4"  # the FFmpeg name of what the 'mp4v' fourcc writes


class VideoAppender:
    """An MP4 file that episodes are appended to; ``frames`` counts what was written."""

    def __init__(self, path: Path, fps: int, width: int, height: int):
        if width % 2 or height % 2:
            raise DatasetError(f"{path}: video frames must have even width and height, got "
                               f"{width}x{height}; render at an even size")
        self.path, self.fps, self.size = Path(path), int(fps), (int(width), int(height))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(self.path.name + ".tmp.mp4")
        self._writer = cv2.VideoWriter(str(self.tmp), cv2.VideoWriter_fourcc(*"mp4v"),
                                       float(fps), self.size)
        if not self._writer.isOpened():
            raise DatasetError(f"OpenCV could not open an 'mp4v' video writer for {self.path}")
        self.frames = 0

    def append(self, frames: np.ndarray) -> tuple[float, float]:
        """Write RGB uint8 frames [T, H, W, 3]; returns their ``[from, to)`` timestamps."""
        if frames.ndim != 4 or frames.shape[1:] != (self.size[1], self.size[0], 3) \
                or frames.dtype != np.uint8:
            raise DatasetError(f"{self.path}: frames must be uint8 [T, {self.size[1]}, "
                               f"{self.size[0]}, 3], got {frames.dtype} {list(frames.shape)}")
        start = self.frames
        for frame in frames:
            self._writer.write(cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR))
        self.frames += len(frames)
        return start / self.fps, self.frames / self.fps

    def close(self) -> Path:
        """Finish the file (written under a temporary name, then renamed).

        An :class:`OSError` names it if not every frame reached the disk.
        """
        self._writer.release()
        check_written(self.tmp, self.frames, self.path)
        self.tmp.replace(self.path)
        return self.path


def probe(path: Path) -> tuple[float, int, int, int]:
    """(fps, frame count, width, height) of a video file, from its header."""
    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            raise DatasetError(f"{path}: cannot open the video (missing, truncated or not a "
                               "video file)")
        return (float(cap.get(cv2.CAP_PROP_FPS)), int(cap.get(cv2.CAP_PROP_FRAME_COUNT)),
                int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    finally:
        cap.release()


def check_frame(path: Path, index: int) -> None:
    """A :class:`DatasetError` naming ``path`` unless frame ``index`` (0-based) decodes."""
    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            raise DatasetError(f"{path}: cannot open the video (truncated or not a video file)")
        count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        if index > 0:
            cap.set(cv2.CAP_PROP_POS_FRAMES, index)
        ok, _ = cap.read()
    finally:
        cap.release()
    if not ok:
        raise DatasetError(f"{path}: frame {index} cannot be decoded (the file has {count} "
                           f"frames, {index + 1} are needed): truncated or damaged video")


def decode(path: Path) -> np.ndarray:
    """Every frame of a video file as RGB uint8 [N, H, W, 3]."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"video file {path} is missing")
    cap = cv2.VideoCapture(str(path))
    frames = []
    try:
        if not cap.isOpened():
            raise DatasetError(f"{path}: cannot open the video (truncated or not a video file)")
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    finally:
        cap.release()
    if not frames:
        raise DatasetError(f"{path}: no frame could be decoded (truncated or empty video)")
    return np.stack(frames)


class VideoCache:
    """Decoded video files by path, keeping the ``capacity`` most recently used."""

    def __init__(self, capacity: int = 4):
        self.capacity = capacity
        self._files: OrderedDict[Path, np.ndarray] = OrderedDict()
        self.decoded = 0  # files decoded so far (a file decoded twice counts twice)

    def get(self, path: Path) -> np.ndarray:
        """All frames of ``path`` (decoded on first use)."""
        path = Path(path)
        if path in self._files:
            self._files.move_to_end(path)
            return self._files[path]
        frames = decode(path)
        self.decoded += 1
        self._files[path] = frames
        while len(self._files) > self.capacity:
            self._files.popitem(last=False)
        return frames

    def get_frames(self, path: Path, timestamps: np.ndarray, fps: float,
                  from_timestamp: float = 0.0) -> np.ndarray:
        """Frames [T, H, W, 3] of ``path`` at ``from_timestamp + timestamps`` (seconds).

        A timestamp beyond the decoded frames raises a :class:`DatasetError` that names
        the file, the frames it has and the frame asked for.
        """
        frames = self.get(path)
        ids = np.rint((from_timestamp + np.asarray(timestamps, dtype=np.float64)) * fps)
        ids = ids.astype(np.int64)
        if len(ids) and (ids.max() >= len(frames) or ids.min() < 0):
            raise DatasetError(
                f"{path}: the video is too short: it has {len(frames)} frames but frame "
                f"{int(ids.max())} (t = {from_timestamp + float(np.max(timestamps)):.3f} s at "
                f"{fps:g} fps) is needed; the file is truncated or does not belong to this "
                "dataset's metadata")
        return frames[ids]
