"""Dataset videos: append episodes to an MP4 file, decode a file once and index it by time.

Encoding and decoding use PyAV (FFmpeg). The codec is the first of a preference list
the installed FFmpeg can encode (default AV1, what LeRobot writes; then H.264, then
MPEG-4 Part 2); OpenCV's FFmpeg does not decode AV1, so decoding is PyAV's too.
Decoding reads the whole file once into memory; ``VideoCache`` keeps the most recently
used files so a pass over the episodes of a file decodes it once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import av
import numpy as np

from embodied.datasets.format import DatasetError
from sim import video as sv
from sim.video import CODECS, Mp4Encoder, check_written

__all__ = ["CODECS", "VideoAppender", "VideoCache", "check_frame", "decode", "probe"]


class VideoAppender:
    """An MP4 file that episodes are appended to; ``frames`` counts what was written.

    Written under a temporary name and renamed by ``close()``. ``codec`` is the codec
    chosen from ``codecs`` (the first the installed FFmpeg can encode).
    """

    def __init__(self, path: Path, fps: int, width: int, height: int,
                 codecs: Sequence[str] = CODECS):
        if width % 2 or height % 2:
            raise DatasetError(f"{path}: video frames must have even width and height, got "
                               f"{width}x{height}; render at an even size")
        self.path, self.fps, self.size = Path(path), int(fps), (int(width), int(height))
        self.tmp = self.path.with_name(self.path.name + ".tmp.mp4")
        try:
            self._encoder = Mp4Encoder(self.tmp, self.fps, width, height, codecs)
        except ValueError as e:
            raise DatasetError(f"{self.path}: {e}") from e
        self.codec = self._encoder.codec

    @property
    def frames(self) -> int:
        """Frames written so far."""
        return self._encoder.frames

    def append(self, frames: np.ndarray) -> tuple[float, float]:
        """Write RGB uint8 frames [T, H, W, 3]; returns their ``[from, to)`` timestamps."""
        if frames.ndim != 4 or frames.shape[1:] != (self.size[1], self.size[0], 3) \
                or frames.dtype != np.uint8:
            raise DatasetError(f"{self.path}: frames must be uint8 [T, {self.size[1]}, "
                               f"{self.size[0]}, 3], got {frames.dtype} {list(frames.shape)}")
        start = self.frames
        for frame in frames:
            self._encoder.write(frame)
        return start / self.fps, self.frames / self.fps

    def close(self) -> Path:
        """Finish the file (written under a temporary name, then renamed).

        An :class:`OSError` names it if not every frame reached the disk.
        """
        self._encoder.close()
        check_written(self.tmp, self.frames, self.path)
        self.tmp.replace(self.path)
        return self.path


def probe(path: Path) -> tuple[str, float, int, int, int]:
    """(codec, fps, frame count, width, height) of a video file, from its header."""
    try:
        return sv.probe(path)
    except OSError as e:
        raise DatasetError(f"{path}: cannot open the video (missing, truncated or not a "
                           "video file)") from e


def _frames(path: Path, stop: int | None = None) -> list[np.ndarray]:
    """RGB frames of ``path`` from the first, up to ``stop`` of them (all if None)."""
    frames: list[np.ndarray] = []
    try:
        with av.open(str(path)) as container:
            for frame in container.decode(video=0):
                frames.append(frame.to_ndarray(format="rgb24"))
                if stop is not None and len(frames) >= stop:
                    break
    except av.error.FFmpegError as e:
        if not frames:
            raise DatasetError(f"{path}: cannot open the video (truncated or not a video "
                               f"file: {e})") from e
    return frames


def check_frame(path: Path, index: int) -> None:
    """A :class:`DatasetError` naming ``path`` unless frame ``index`` (0-based) decodes."""
    count = len(_frames(path, index + 1))
    if count <= index:
        raise DatasetError(f"{path}: frame {index} cannot be decoded (the file has {count} "
                           f"frames, {index + 1} are needed): truncated or damaged video")


def decode(path: Path) -> np.ndarray:
    """Every frame of a video file as RGB uint8 [N, H, W, 3]."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"video file {path} is missing")
    frames = _frames(path)
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
