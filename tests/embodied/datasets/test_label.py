"""`embodied collect` + `embodied label`: labels equal direct scoring, kill-and-resume equals an
uninterrupted run (a real subprocess killed mid-way), clear errors, the source untouched."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from embodied.commands.collect import run_collect
from embodied.commands.label import run_label
from embodied.config import load_config
from embodied.datasets import DatasetError, LeRobotDataset
from embodied.reward import make_reward_model, shaping_term

REPO = Path(__file__).resolve().parents[3]
EPISODES = 12  # of the shared `dataset` (conftest.py)


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location(
        "clip_tests", REPO / "tests/embodied/reward/test_reward_clip.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.build_tiny_clip(tmp_path_factory.mktemp("tiny_clip")))


def label_cfg(dataset: Path, out: Path, *extra: str):
    return load_config("label", [f"dataset={dataset}", f"out={out}", "progress=false", *extra])


def clip_args(path: str) -> list[str]:
    return ["reward=clip", f"reward.model.model={path}", "reward.model.local_files_only=true",
            "batch_size=8"]


def test_collected_dataset(dataset):
    ds = LeRobotDataset(dataset)
    assert ds.num_episodes == EPISODES and ds.cameras == ["front", "side", "wrist"]
    assert ds.fps == 50 and all(e.length == 30 for e in ds.episodes)  # 0.6 s at 50 Hz
    assert len(ds.data_files()) == 3  # 5 episodes per file
    data = ds.episode_data(0)
    assert data["observation.state"].shape == (30, 29) and data["action"].shape == (30, 8)
    assert data["next.done"][-1] and data["next.truncated"][-1] and not data["next.done"][:-1].any()
    assert data["sim.progress"].min() >= 0 and data["sim.progress"].max() <= 1
    assert data["sim.progress"][-1] > data["sim.progress"][0]  # the clean expert moves on
    assert ds.episode_views(0).shape == (30, 3, 32, 32, 3)
    assert {e.meta["policy"] for e in ds.episodes} == {"expert(noise=0)", "expert(noise=0.6)"}


def test_oracle_labels_are_the_recorded_progress_shaped(dataset, tmp_path):
    before = tree_digest(dataset)
    out = tmp_path / "oracle"
    summary = run_label(label_cfg(dataset, out, "reward=oracle", "reward.mode=prm+sparse"))
    assert tree_digest(dataset) == before  # the source is only read
    assert summary["episodes"] == EPISODES and (out / "meta/label_progress.png").is_file()
    src, lab = LeRobotDataset(dataset), LeRobotDataset(out)
    assert not (out / ".labelling").exists()
    for i in (0, 7):
        s, d = src.episode_data(i), lab.episode_data(i)
        np.testing.assert_array_equal(d["progress"], s["sim.progress"])
        np.testing.assert_array_equal(d["source.next.reward"], s["next.reward"])
        nxt = np.minimum(np.arange(30) + 1, 29)
        shaping = shaping_term(torch.from_numpy(s["sim.progress"]),
                               torch.from_numpy(s["sim.progress"][nxt]),
                               torch.zeros(30, dtype=torch.bool), 0.99).numpy()
        success = s["sim.success"][nxt]
        np.testing.assert_allclose(d["next.reward"], success + shaping, rtol=1e-6)
        np.testing.assert_array_equal(d["next.success"], success)
        np.testing.assert_array_equal(d["observation.state"], s["observation.state"])
        np.testing.assert_array_equal(lab.episode_views(i), src.episode_views(i))
    stats = lab.stats()
    progress = np.concatenate([lab.episode_data(i)["progress"] for i in range(EPISODES)])
    np.testing.assert_allclose(stats["progress"]["mean"], [progress.mean()], rtol=1e-5)
    assert "source.next.reward" in stats and "observation.state" in stats


def test_clip_labels_equal_scoring_the_frames_directly(dataset, tiny_clip, tmp_path):
    out = tmp_path / "clip"
    run_label(label_cfg(dataset, out, *clip_args(tiny_clip)))
    model = make_reward_model(load_config("label", clip_args(tiny_clip)).reward)
    src, lab = LeRobotDataset(dataset), LeRobotDataset(out)
    for i in (2, 11):
        with torch.inference_mode():
            direct = model.score(src.episode_views(i), src.task_of(i),
                                 cameras=src.cameras).progress.numpy()
        np.testing.assert_allclose(lab.episode_data(i)["progress"], direct, atol=1e-5)


def test_kill_and_resume_equals_an_uninterrupted_run(dataset, tiny_clip, tmp_path, capsys):
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    run_label(label_cfg(dataset, whole, *clip_args(tiny_clip)))
    args = [sys.executable, "-m", "embodied.cli", "label", f"dataset={dataset}", f"out={resumed}",
            "progress=false", *clip_args(tiny_clip)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    work = resumed / ".labelling"
    try:
        deadline = time.monotonic() + 120
        while not list(work.glob("episode_*.npz")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    done = len(list(work.glob("episode_*.npz")))
    assert 0 < done < EPISODES, f"the kill came too late: {done} of {EPISODES} labelled"
    assert not (resumed / "meta/info.json").exists()
    result = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"resuming {resumed}: {done} of {EPISODES} episodes already labelled" in result.stdout
    for rel in ("data/chunk-000/file-000.parquet", "data/chunk-000/file-002.parquet"):
        assert pq.read_table(resumed / rel).equals(pq.read_table(whole / rel))
    for rel in ("meta/stats.json", "meta/info.json"):
        assert (resumed / rel).read_text() == (whole / rel).read_text()
    assert pq.read_table(resumed / "meta/episodes/chunk-000/file-000.parquet").equals(
        pq.read_table(whole / "meta/episodes/chunk-000/file-000.parquet"))
    run_label(label_cfg(dataset, resumed, *clip_args(tiny_clip)))  # finished: nothing to do
    assert "nothing to do" in capsys.readouterr().out


def test_a_camera_the_model_expects_but_the_dataset_lacks(dataset, tiny_clip, tmp_path):
    cfg = label_cfg(dataset, tmp_path / "x", *clip_args(tiny_clip),
                    "reward.model.camera_names=[front,top]")
    with pytest.raises(DatasetError, match=r"info\.json.*expects camera\(s\) \['top'\].*has "
                                           r"\['front', 'side', 'wrist'\]"):
        run_label(cfg)


def test_a_damaged_file_stops_labelling_without_losing_labels(dataset, tmp_path, monkeypatch):
    """Damage found mid-run (here: validation skipped, as if the file broke after it) keeps
    the labels so far; the rerun resumes."""
    import shutil

    monkeypatch.setattr(LeRobotDataset, "validate", lambda self: None)

    source = tmp_path / "src"
    shutil.copytree(dataset, source)
    bad = source / "data/chunk-000/file-001.parquet"
    bad.write_bytes(bad.read_bytes()[:100])
    out = tmp_path / "out"
    args = ["reward=oracle"]
    with pytest.raises(DatasetError, match=r"file-001\.parquet.*truncated or corrupt"):
        run_label(label_cfg(source, out, *args))
    assert len(list((out / ".labelling").glob("episode_*.npz"))) == 5  # the first file's
    assert (out / "data/chunk-000/file-000.parquet").is_file()
    shutil.copyfile(dataset / "data/chunk-000/file-001.parquet", bad)  # repaired: resume
    run_label(label_cfg(source, out, *args))
    assert LeRobotDataset(out).num_episodes == EPISODES


def test_the_cli_names_problems_and_exits_2(dataset, tmp_path, capsys):
    from embodied.cli import main

    assert main(["label", f"dataset={dataset}", f"out={dataset}"]) == 2
    assert "is the source dataset" in capsys.readouterr().err
    assert main(["label", "reward=sparse", f"dataset={dataset}", f"out={tmp_path / 'y'}"]) == 2
    assert "no reward model" in capsys.readouterr().err
    assert main(["label", f"dataset={tmp_path / 'nope'}"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["deleted_video", "truncated_video", "zero_fps"])
def test_the_dataset_is_validated_before_scoring(dataset, tmp_path, capsys, damage):
    """A missing or truncated video (even one the reward model never decodes) and fps <= 0
    are one error line before any frame is scored."""
    import shutil

    from embodied.cli import main

    source = tmp_path / "src"
    shutil.copytree(dataset, source)
    video = sorted(source.glob("videos/*/chunk-000/file-001.mp4"))[0]
    if damage == "deleted_video":
        video.unlink()
    elif damage == "truncated_video":
        video.write_bytes(video.read_bytes()[: video.stat().st_size * 2 // 3])
    else:
        info = json.loads((source / "meta/info.json").read_text())
        info["fps"] = 0
        (source / "meta/info.json").write_text(json.dumps(info))
    out = tmp_path / "out"
    assert main(["label", "reward=oracle", f"dataset={source}", f"out={out}",
                 "progress=false"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert (str(video) if damage != "zero_fps" else "info.json") in err
    assert not list(out.glob(".labelling/episode_*.npz"))  # nothing was scored


def test_an_interrupted_collection_resumes_to_the_same_dataset(tmp_path, monkeypatch, capsys):
    """Stopped after 5 of 7 episodes (two files of 2 finished), the same command continues
    and gives what an uninterrupted run gives: data, metadata and video frames."""
    from embodied.datasets.writer import DatasetWriter

    args = ["task=panda_reach", "task.episode_length_s=0.3", "episodes=7", "num_envs=3",
            "noise=[0,0.6]", "width=32", "height=32", "episodes_per_file=2", "progress=false"]
    whole, part = tmp_path / "whole", tmp_path / "part"
    run_collect(load_config("collect", [*args, f"out={whole}"]))
    add = DatasetWriter.add_episode

    def stop_at_five(self, *a, **k):
        if len(self.episodes) == 5:
            raise KeyboardInterrupt
        return add(self, *a, **k)

    monkeypatch.setattr(DatasetWriter, "add_episode", stop_at_five)
    with pytest.raises(KeyboardInterrupt):
        run_collect(load_config("collect", [*args, f"out={part}"]))
    monkeypatch.setattr(DatasetWriter, "add_episode", add)
    with pytest.raises(DatasetError, match="unfinished collection"):
        LeRobotDataset(part)
    capsys.readouterr()
    run_collect(load_config("collect", [*args, f"out={part}"]))
    assert f"resuming {part}: 4 of 7 episodes recorded" in capsys.readouterr().out
    a, b = LeRobotDataset(whole), LeRobotDataset(part)
    assert a.num_episodes == b.num_episodes == 7 and a.num_frames == b.num_frames
    assert [e.meta for e in a.episodes] == [e.meta for e in b.episodes]
    for ep in range(7):
        for key, values in a.episode_data(ep).items():
            np.testing.assert_array_equal(values, b.episode_data(ep)[key], err_msg=key)
        np.testing.assert_array_equal(a.episode_views(ep), b.episode_views(ep))
    assert a.info == b.info and not (part / ".collecting.json").exists()
