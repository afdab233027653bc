"""The LeRobot layout written and read back: values, timestamps, videos, stats; v2.1; errors."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from embodied.datasets import DatasetError, DatasetWriter, LeRobotDataset
from embodied.datasets.meta import read_tasks
from sim.video import write_mp4

FPS = 10
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [3], "names": None},
    "action": {"dtype": "float32", "shape": [2], "names": None},
    "next.reward": {"dtype": "float32", "shape": [1], "names": None},
    "next.done": {"dtype": "bool", "shape": [1], "names": None},
}


def frames_of(length: int, shift: int) -> np.ndarray:
    """Flat-coloured frames (lossy codecs keep flat colours): frame t has grey level 20 t."""
    grey = (20 * np.arange(length) + shift) % 250
    return np.broadcast_to(grey[:, None, None, None], (length, 16, 24, 3)).astype(np.uint8)


def episode(length: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"observation.state": rng.normal(size=(length, 3)).astype(np.float32),
            "action": rng.uniform(-1, 1, size=(length, 2)).astype(np.float32),
            "next.reward": rng.normal(size=length).astype(np.float32),
            "next.done": np.arange(length) == length - 1}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds") / "two_cams"
    writer = DatasetWriter(root, FPS, FEATURES, ["front", "wrist"], (16, 24), robot_type="test",
                           episodes_per_file=2, extra_info={"embodied": {"task": "x"}})
    episodes = [episode(n, i) for i, n in enumerate((7, 5, 9))]
    for i, ep in enumerate(episodes):
        writer.add_episode(ep, "push" if i < 2 else "pull",
                           {"front": frames_of(len(ep["action"]), 0),
                            "wrist": frames_of(len(ep["action"]), 100)}, {"success": i == 1})
    writer.close()
    return root, episodes


def test_round_trip_values_timestamps_videos_and_files(written):
    root, episodes = written
    ds = LeRobotDataset(root)
    assert ds.version == "v3.0" and ds.fps == FPS and ds.cameras == ["front", "wrist"]
    assert ds.num_episodes == 3 and ds.num_frames == 21
    assert read_tasks(root) == ["push", "pull"]
    assert [ds.task_of(i) for i in range(3)] == ["push", "push", "pull"]
    # two episodes per file: episodes 0, 1 share file 0; episode 1's video starts at 0.7 s
    assert [e.data_file.name for e in ds.episodes] == ["file-000.parquet"] * 2 + \
        ["file-001.parquet"]
    path, start = ds.episodes[1].videos["observation.images.wrist"]
    assert path.name == "file-000.mp4" and start == pytest.approx(0.7)
    assert ds.episodes[1].meta["success"] is True
    for i, ep in enumerate(episodes):
        data = ds.episode_data(i)
        for key in FEATURES:
            np.testing.assert_array_equal(data[key], ep[key])
        n = len(ep["action"])
        np.testing.assert_allclose(data["timestamp"], np.arange(n) / FPS, rtol=1e-6)
        np.testing.assert_array_equal(data["frame_index"], np.arange(n))
        np.testing.assert_array_equal(data["episode_index"], np.full(n, i))
        views = ds.episode_views(i)
        assert views.shape == (n, 2, 16, 24, 3) and views.dtype == np.uint8
        expected = np.stack([frames_of(n, 0), frames_of(n, 100)], 1).astype(int)
        assert np.abs(views.astype(int) - expected).max() <= 8  # lossy; neighbours differ by 20
    first = ds.episode_data(0)["index"][0], ds.episode_data(2)["index"][-1]
    assert first == (0, 20)


def test_stats_are_those_of_all_frames(written):
    root, episodes = written
    stats = LeRobotDataset(root).stats()
    state = np.concatenate([e["observation.state"] for e in episodes]).astype(np.float64)
    np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats["observation.state"]["std"], state.std(0), rtol=1e-6)
    np.testing.assert_allclose(stats["observation.state"]["min"], state.min(0))
    assert int(stats["observation.state"]["count"][0]) == 21
    assert stats["observation.images.front"]["mean"].shape == (3, 1, 1)
    info = json.loads((root / "meta/info.json").read_text())
    assert info["features"]["observation.images.front"]["dtype"] == "video"
    assert info["total_frames"] == 21 and info["splits"] == {"train": "0:3"}
    assert info["embodied"] == {"task": "x"}


def test_a_v21_layout_reads(tmp_path):
    root = tmp_path / "v21"
    info = {"codebase_version": "v2.1", "fps": FPS, "chunks_size": 1000,
            "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
            "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/"
                          "episode_{episode_index:06d}.mp4",
            "features": {**FEATURES, "observation.images.top": {
                "dtype": "video", "shape": [16, 24, 3], "names": ["height", "width", "channels"],
                "info": {"video.fps": FPS}}}}
    (root / "meta").mkdir(parents=True)
    (root / "meta/info.json").write_text(json.dumps(info))
    (root / "meta/tasks.jsonl").write_text(json.dumps({"task_index": 0, "task": "stack"}) + "\n")
    lines = []
    for i, n in enumerate((4, 6)):
        ep = episode(n, 10 + i)
        table = pa.table({
            "observation.state": [row.tolist() for row in ep["observation.state"]],
            "action": [row.tolist() for row in ep["action"]],
            "next.reward": ep["next.reward"], "next.done": ep["next.done"],
            "timestamp": (np.arange(n) / FPS).astype(np.float32),
            "frame_index": np.arange(n), "episode_index": np.full(n, i),
            "index": np.arange(n) + 4 * i, "task_index": np.zeros(n, np.int64)})
        path = root / f"data/chunk-000/episode_{i:06d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        write_mp4(root / f"videos/chunk-000/observation.images.top/episode_{i:06d}.mp4",
                  frames_of(n, 50 * i), FPS)
        lines.append(json.dumps({"episode_index": i, "tasks": ["stack"], "length": n}))
        if i == 1:
            last = ep
    (root / "meta/episodes.jsonl").write_text("\n".join(lines) + "\n")
    ds = LeRobotDataset(root)
    assert ds.version == "v2.1" and ds.num_episodes == 2 and ds.num_frames == 10
    assert ds.cameras == ["top"] and ds.task_of(1) == "stack"
    data = ds.episode_data(1)
    np.testing.assert_array_equal(data["observation.state"], last["observation.state"])
    views = ds.episode_views(1)
    assert views.shape == (6, 1, 16, 24, 3)
    assert np.abs(views[:, 0].astype(int) - frames_of(6, 50).astype(int)).max() <= 8


def copy_dataset(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_truncated_parquet_is_named(written, tmp_path):
    root = copy_dataset(written[0], tmp_path / "ds")
    path = root / "data/chunk-000/file-001.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    ds = LeRobotDataset(root)
    ds.episode_data(0)  # other files still read
    with pytest.raises(DatasetError, match=r"file-001\.parquet.*truncated or corrupt"):
        ds.episode_data(2)


def test_missing_and_short_videos_are_named(written, tmp_path):
    root = copy_dataset(written[0], tmp_path / "ds")
    (root / "videos/observation.images.front/chunk-000/file-001.mp4").unlink()
    ds = LeRobotDataset(root)
    with pytest.raises(DatasetError, match=r"front/chunk-000/file-001\.mp4.*missing"):
        ds.episode_views(2)
    short = root / "videos/observation.images.wrist/chunk-000/file-000.mp4"
    write_mp4(short, frames_of(9, 100), FPS)  # episodes 0 and 1 need 12 frames
    with pytest.raises(DatasetError, match=r"wrist/chunk-000/file-000\.mp4.*too short.*9 frames"):
        ds.episode_frames(1, "wrist")


def test_fps_mismatches_are_named(written, tmp_path):
    root = copy_dataset(written[0], tmp_path / "ds")
    video = root / "videos/observation.images.front/chunk-000/file-000.mp4"
    write_mp4(video, frames_of(12, 0), FPS * 2)
    with pytest.raises(DatasetError, match=r"file-000\.mp4.*20 fps.*info\.json says 10 fps"):
        LeRobotDataset(root).episode_frames(0, "front")
    info = json.loads((root / "meta/info.json").read_text())
    info["fps"] = 30
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match=r"file-001\.parquet.*fps does not match"):
        LeRobotDataset(root).episode_data(2)


def test_writer_refuses_mismatched_episodes_and_existing_datasets(written, tmp_path):
    with pytest.raises(DatasetError, match="already holds a dataset"):
        DatasetWriter(written[0], FPS, FEATURES)
    writer = DatasetWriter(tmp_path / "new", FPS, FEATURES, ["front"], (16, 24))
    ep = episode(4, 0)
    with pytest.raises(DatasetError, match=r"missing \['next.done'\]"):
        writer.add_episode({k: v for k, v in ep.items() if k != "next.done"}, "t",
                           {"front": frames_of(4, 0)})
    with pytest.raises(DatasetError, match="has 3 frames"):
        writer.add_episode(ep, "t", {"front": frames_of(3, 0)})


def test_a_flipped_byte_in_a_data_page_is_an_error_naming_the_file(written, tmp_path):
    """Page checksums: corruption that still parses is refused, never read as numbers."""
    root = copy_dataset(written[0], tmp_path / "ds")
    path = root / "data/chunk-000/file-000.parquet"
    data = bytearray(path.read_bytes())
    value = written[1][0]["observation.state"][0, 0].tobytes()  # stored raw in a data page
    at = bytes(data).find(value)
    assert at > 0
    data[at + 1] ^= 0x40
    path.write_bytes(bytes(data))
    assert pq.read_table(path)  # an unverified read returns the changed number without error
    with pytest.raises(DatasetError, match=r"file-000\.parquet.*(checksum|corrupt)"):
        LeRobotDataset(root).episode_data(0)
