"""Dataset and eval videos: the codec chosen, recorded and written, decoded back, fallbacks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embodied.cli import main
from embodied.datasets import DatasetError, DatasetWriter, LeRobotDataset
from sim.video import probe, write_mp4

FPS = 10
FEATURES = {"action": {"dtype": "float32", "shape": [2], "names": None}}
CAMERAS = ["front", "wrist"]


def frames_of(length: int, shift: int) -> np.ndarray:
    """A smooth gradient with a bright 8x8 square that moves 4 pixels a frame."""
    y, x = np.mgrid[0:32, 0:48]
    image = np.stack([2 * x + shift, 3 * y + 40, np.full_like(x, 90 + shift)], -1)
    frames = np.repeat(image[None], length, 0)
    for t in range(length):
        left = (4 * t + shift) % 40
        frames[t, 12:20, left:left + 8] = 230
    return frames.astype(np.uint8)


def episode(length: int) -> dict[str, np.ndarray]:
    return {"action": np.full((length, 2), length, np.float32)}


def write(root: Path, codecs: list[str], lengths=(7, 5, 9), stop_after: int | None = None,
          resume: bool = False) -> DatasetWriter:
    """Episodes of ``lengths`` (two per file), closed; or up to ``stop_after``, left open."""
    writer = DatasetWriter(root, FPS, FEATURES, CAMERAS, (32, 48), episodes_per_file=2,
                           video_codecs=codecs, resume=resume)
    for i in range(len(writer.episodes), len(lengths) if stop_after is None else stop_after):
        writer.add_episode(episode(lengths[i]), "t",
                           {c: frames_of(lengths[i], 10 * i + 50 * j)
                            for j, c in enumerate(CAMERAS)})
    if stop_after is None:
        writer.close()
    return writer


def recorded_codecs(root: Path) -> set[str]:
    info = json.loads((root / "meta/info.json").read_text())
    return {info["features"][f"observation.images.{c}"]["info"]["video.codec"] for c in CAMERAS}


def assert_views_decode(root: Path, lengths=(7, 5, 9)) -> None:
    ds = LeRobotDataset(root)
    ds.validate()
    for i, n in enumerate(lengths):
        views = ds.episode_views(i).astype(int)
        expected = np.stack([frames_of(n, 10 * i + 50 * j) for j in range(len(CAMERAS))], 1)
        error = np.abs(views - expected.astype(int))
        assert error.mean() < 5, (i, error.mean())  # the frame before or after: 8 to 10


@pytest.mark.parametrize("codec", ["av1", "h264", "mpeg4"])
def test_the_codec_recorded_is_the_codec_written_and_frames_decode_back(tmp_path, codec):
    root = tmp_path / codec
    write(root, [codec])
    assert recorded_codecs(root) == {codec}
    files = sorted(root.glob("videos/*/chunk-000/*.mp4"))
    assert len(files) == 4 and not list(root.rglob("*.tmp.mp4"))
    assert {probe(f)[0] for f in files} == {codec}
    assert sorted(probe(f)[2] for f in files) == [9, 9, 12, 12]
    assert_views_decode(root)


def test_a_missing_encoder_falls_back_to_the_next_codec_in_the_list(tmp_path):
    root = tmp_path / "fallback"
    write(root, ["av1:no_such_encoder", "h264", "mpeg4"])
    assert recorded_codecs(root) == {"h264"}
    assert {probe(f)[0] for f in root.glob("videos/*/*/*.mp4")} == {"h264"}
    with pytest.raises(DatasetError, match=r"no encoder for any of.*av1 \(nope\).*mpeg4"):
        DatasetWriter(tmp_path / "none", FPS, FEATURES, CAMERAS, video_codecs=["av1:nope"])
    with pytest.raises(DatasetError, match=r"unknown video codec 'vp9'.*av1"):
        DatasetWriter(tmp_path / "vp9", FPS, FEATURES, CAMERAS, video_codecs=["vp9", "h264"])


def test_a_resumed_collection_appends_after_the_finished_files(tmp_path):
    root, lengths = tmp_path / "resumed", (7, 5, 9, 6)
    write(root, ["av1"], lengths, stop_after=3)  # file 0 finished, file 1 half written
    assert not (root / "meta/info.json").exists()
    assert not list(root.glob("videos/*/chunk-000/file-001.mp4"))  # unfinished: no final name
    resumed = write(root, ["av1"], lengths, resume=True, stop_after=0)  # opened, not added to
    assert len(resumed.episodes) == 2
    write(root, ["av1"], lengths, resume=True)
    assert recorded_codecs(root) == {"av1"}
    assert_views_decode(root, lengths)


def test_eval_videos_are_h264_unless_the_list_says_otherwise(tmp_path):
    frames = frames_of(4, 0)
    assert probe(write_mp4(tmp_path / "a.mp4", frames, FPS))[:3] == ("h264", FPS, 4)
    assert probe(write_mp4(tmp_path / "b.mp4", frames, FPS, ["h264:nope", "mpeg4"]))[0] == \
        "mpeg4"


def test_collect_names_an_unknown_codec_in_one_error_line(tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["collect", "task=panda_reach", "episodes=1", "num_envs=1", "progress=false",
                 "video_codecs=vp9", f"out={out}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("error: ") and "unknown video codec 'vp9'" in lines[-1]
    assert not out.exists() or not (out / "meta/info.json").exists()
