"""Write RGB frames to an MP4 file with OpenCV."""

from __future__ import annotations

import errno
import itertools
import os
import resource
from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np

__all__ = ["check_written", "write_mp4"]

LOW_SPACE = 1 << 20  # bytes free below which a short video is put down to a full disk


def _even_pad(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """Pad ``frame`` with black at the bottom/right to ``height`` x ``width``."""
    h, w = frame.shape[:2]
    if (h, w) == (height, width):
        return frame
    return np.pad(frame, ((0, height - h), (0, width - w), (0, 0)))


def write_mp4(path: str | Path, frames: Iterable[np.ndarray] | np.ndarray, fps: int) -> Path:
    """Encode RGB uint8 frames as an MPEG-4 ('mp4v') video.

    Args:
        path: Output file; parent directories are created.
        frames: An array ``[T, H, W, 3]`` or an iterable of ``[H, W, 3]`` arrays, uint8
            RGB, all of one size. Odd heights/widths are padded with one black row or
            column (many players reject odd sizes).
        fps: Frames per second, > 0.

    Returns:
        The path written.

    Raises:
        ValueError: No frames, a frame of another shape or dtype, or ``fps <= 0``.
        RuntimeError: OpenCV could not open the writer or wrote an empty file.
    """
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    it = iter(frames)
    first = next(it, None)
    if first is None:
        raise ValueError("write_mp4 got no frames")
    first = np.asarray(first)
    if first.ndim != 3 or first.shape[2] != 3 or first.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 [H, W, 3] RGB, got {first.dtype} {first.shape}")
    h, w = first.shape[:2]
    height, width = h + h % 2, w + w % 2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), float(fps),
                             (width, height))
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV could not open an 'mp4v' video writer for {path} "
                           f"({width}x{height} @ {fps} fps)")
    count = 0
    try:
        for i, frame in enumerate(itertools.chain([first], it)):
            frame = np.asarray(frame)
            if frame.shape != first.shape or frame.dtype != np.uint8:
                raise ValueError(f"frame {i} is {frame.dtype} {frame.shape}; expected uint8 "
                                 f"{first.shape} like frame 0")
            bgr = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR)
            writer.write(_even_pad(bgr, height, width))
            count += 1
    finally:
        writer.release()
    if not path.is_file() or path.stat().st_size == 0:
        raise RuntimeError(f"OpenCV wrote no video data to {path} ({count} frames given); "
                           "is this OpenCV build missing its FFmpeg backend?")
    check_written(path, count)
    return path


def check_written(path: Path, frames: int, name: Path | None = None) -> None:
    """Raise an :class:`OSError` naming ``name`` unless the video holds ``frames`` frames.

    ``name`` defaults to ``path``. OpenCV's writer reports no write errors, so a full
    disk (``ENOSPC``) or a file-size limit (``EFBIG``) shows only as a short file.
    """
    cap = cv2.VideoCapture(str(path))
    written = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) if cap.isOpened() else 0
    cap.release()
    if written >= frames:
        return
    name = name or path
    size = path.stat().st_size if path.is_file() else 0
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    stat = os.statvfs(path.parent)
    if limit != resource.RLIM_INFINITY and size >= limit:
        code = errno.EFBIG
    elif stat.f_bavail * stat.f_frsize < LOW_SPACE:
        code = errno.ENOSPC
    else:
        raise OSError(errno.EIO, f"the video writer wrote {written} of {frames} frames",
                      str(name))
    raise OSError(code, os.strerror(code), str(name))
