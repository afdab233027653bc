"""Encode RGB frames to MP4 files with PyAV (FFmpeg) and check what was written.

Codecs are named as FFmpeg names them and as LeRobot's ``info.json`` records them:
``av1`` (the SVT-AV1 encoder, what LeRobot writes), ``h264`` (x264; every browser plays
it) and ``mpeg4`` (MPEG-4 Part 2, which browsers do not play; the last fallback). A
codec list is a preference order: the first entry whose encoder the installed FFmpeg
has is used. An entry ``name:encoder`` names another FFmpeg encoder for the codec, e.g.
``h264:h264_nvenc``.
"""

from __future__ import annotations

import errno
import itertools
import os
import resource
from collections.abc import Iterable, Sequence
from pathlib import Path

import av
import numpy as np

__all__ = ["BROWSER_CODECS", "CODECS", "Mp4Encoder", "check_written", "pick_encoder",
           "write_mp4"]

os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its configuration unless told not to

LOW_SPACE = 1 << 20  # bytes free below which a short video is put down to a full disk
ENCODERS = {"av1": "libsvtav1", "h264": "libx264", "mpeg4": "mpeg4"}
CODECS = ("av1", "h264", "mpeg4")  # dataset videos: LeRobot's codec first
BROWSER_CODECS = ("h264", "mpeg4")  # eval / demo videos: what browsers play first
# Fast settings (2 CPU cores encode thousands of 224x224 frames/s with each).
OPTIONS = {"libsvtav1": {"preset": "12", "crf": "30"},
           "libx264": {"preset": "veryfast", "crf": "23"},
           "mpeg4": {"qmin": "2", "qmax": "4"}}  # quantiser 2-4 (its default: 200 kbit/s)


def pick_encoder(codecs: Sequence[str]) -> tuple[str, str]:
    """(codec, FFmpeg encoder) of the first entry of ``codecs`` this FFmpeg can encode.

    An entry whose encoder is missing, or is not a video encoder, is skipped.

    Raises:
        ValueError: An unknown codec name, or no entry has an encoder here.
    """
    tried = []
    for entry in codecs:
        name, _, encoder = str(entry).partition(":")
        if not encoder and name not in ENCODERS:
            raise ValueError(f"unknown video codec '{name}'; use one of {list(ENCODERS)} "
                             "(or name:ffmpeg_encoder)")
        encoder = encoder or ENCODERS[name]
        try:
            is_video = av.codec.Codec(encoder, "w").type == "video"
        except (av.error.FFmpegError, ValueError):
            is_video = False
        if is_video:
            return name, encoder
        tried.append(f"{name} ({encoder})")
    raise ValueError(f"the installed FFmpeg (PyAV {av.__version__}) has no encoder for any of "
                     f"{tried}; list a codec it has, e.g. mpeg4")


class Mp4Encoder:
    """An MP4 file frames are appended to (yuv420p); ``frames`` counts what was written.

    ``codec`` is the codec chosen from ``codecs`` (see :func:`pick_encoder`). Width and
    height must be even (yuv420p halves the chroma planes).
    """

    def __init__(self, path: str | Path, fps: int, width: int, height: int,
                 codecs: Sequence[str] = BROWSER_CODECS):
        if width % 2 or height % 2:
            raise ValueError(f"{path}: video frames must have even width and height, got "
                             f"{width}x{height}")
        self.codec, encoder = pick_encoder(codecs)
        self.path, self.size, self.frames = Path(path), (int(width), int(height)), 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._container = av.open(str(self.path), "w", format="mp4")
        stream = self._container.add_stream(encoder, rate=int(fps),
                                            options=dict(OPTIONS.get(encoder, {})))
        assert isinstance(stream, av.VideoStream)  # pick_encoder returns video encoders
        stream.width, stream.height = self.size
        stream.pix_fmt = "yuv420p"
        self._stream = stream

    def write(self, frame: np.ndarray) -> None:
        """Encode one RGB uint8 frame [height, width, 3]."""
        image = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        self._container.mux(self._stream.encode(image))
        self.frames += 1

    def close(self) -> Path:
        """Flush the encoder and finish the file."""
        self._container.mux(self._stream.encode())
        self._container.close()
        return self.path


def _even_pad(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """Pad ``frame`` with black at the bottom/right to ``height`` x ``width``."""
    h, w = frame.shape[:2]
    if (h, w) == (height, width):
        return frame
    return np.pad(frame, ((0, height - h), (0, width - w), (0, 0)))


def write_mp4(path: str | Path, frames: Iterable[np.ndarray] | np.ndarray, fps: int,
              codecs: Sequence[str] = BROWSER_CODECS) -> Path:
    """Encode RGB uint8 frames as an MP4 video browsers play (H.264, else MPEG-4 Part 2).

    Args:
        path: Output file; parent directories are created.
        frames: An array ``[T, H, W, 3]`` or an iterable of ``[H, W, 3]`` arrays, uint8
            RGB, all of one size. Odd heights/widths are padded with one black row or
            column (yuv420p needs even sizes).
        fps: Frames per second, > 0.
        codecs: Codecs in order of preference (see :func:`pick_encoder`).

    Returns:
        The path written.

    Raises:
        ValueError: No frames, a frame of another shape or dtype, ``fps <= 0`` or no
            encoder for ``codecs``.
        OSError: Not every frame reached the disk.
    """
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    path = Path(path)
    it = iter(frames)
    first = next(it, None)
    if first is None:
        raise ValueError("write_mp4 got no frames")
    first = np.asarray(first)
    if first.ndim != 3 or first.shape[2] != 3 or first.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 [H, W, 3] RGB, got {first.dtype} {first.shape}")
    h, w = first.shape[:2]
    height, width = h + h % 2, w + w % 2
    encoder = Mp4Encoder(path, fps, width, height, codecs)
    try:
        for i, frame in enumerate(itertools.chain([first], it)):
            frame = np.asarray(frame)
            if frame.shape != first.shape or frame.dtype != np.uint8:
                raise ValueError(f"frame {i} is {frame.dtype} {frame.shape}; expected uint8 "
                                 f"{first.shape} like frame 0")
            encoder.write(_even_pad(frame, height, width))
    finally:
        encoder.close()
    check_written(path, encoder.frames)
    return path


def probe(path: str | Path) -> tuple[str, float, int, int, int]:
    """(codec, fps, frame count, width, height) of an MP4 file, from its header.

    Raises:
        OSError: The file is missing or FFmpeg cannot open it as a video.
    """
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            return (stream.codec_context.codec.canonical_name, float(stream.average_rate or 0),
                    int(stream.frames), int(stream.width), int(stream.height))
    except (av.error.FFmpegError, IndexError) as e:
        raise OSError(errno.EIO, f"cannot open the video ({e})", str(path)) from e


def check_written(path: Path, frames: int, name: Path | None = None) -> None:
    """Raise an :class:`OSError` naming ``name`` unless the video holds ``frames`` frames.

    ``name`` defaults to ``path``. A full disk (``ENOSPC``) or a file-size limit
    (``EFBIG``) can show only as a short or unreadable file.
    """
    try:
        written = probe(path)[2]
    except OSError:
        written = 0
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
