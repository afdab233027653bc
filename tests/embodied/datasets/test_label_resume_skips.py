"""A resumed `embodied label` scores only the episodes it had not finished: the episodes
and data files labelled before the interruption are neither scored nor written again."""

from __future__ import annotations

import json
import shutil

import pytest

from embodied.cli import main
from embodied.datasets import LeRobotDataset

EPISODES, PER_FILE, LENGTH = 4, 2, 10  # 0.2 s at 50 Hz


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A state-only panda_reach dataset: two data files of two episodes each."""
    out = tmp_path_factory.mktemp("collect") / "reach"
    assert main(["collect", "task=panda_reach", "task.episode_length_s=0.2",
                 f"episodes={EPISODES}", "num_envs=2", "cameras=[]",
                 f"episodes_per_file={PER_FILE}", "physics_threads=1", "progress=false",
                 f"out={out}"]) == 0
    return out


def test_resume_scores_only_the_unfinished_episodes(dataset, tmp_path, capsys, monkeypatch):
    # the damage stands for one found mid-run, after the upfront validation
    monkeypatch.setattr(LeRobotDataset, "validate", lambda self: None)
    source, out = tmp_path / "source", tmp_path / "labelled"
    shutil.copytree(dataset, source)
    second = source / "data/chunk-000/file-001.parquet"
    intact = second.read_bytes()
    second.write_bytes(intact[:100])  # labelling stops at the second data file
    label = ["label", f"dataset={source}", f"out={out}", "progress=false", "reward=oracle"]
    assert main(label) == 2
    assert "file-001.parquet" in capsys.readouterr().err
    work = out / ".labelling"
    assert len(list(work.glob("episode_*.npz"))) == PER_FILE
    first_file = out / "data/chunk-000/file-000.parquet"
    written = (first_file.stat().st_ino, first_file.stat().st_mtime_ns)

    second.write_bytes(intact)  # repaired: the same command resumes
    assert main(label) == 0
    assert f"{PER_FILE} of {EPISODES} episodes already labelled" in capsys.readouterr().out
    summary = json.loads((out / "meta/labelling.json").read_text())["summary"]
    assert summary["frames_scored_this_run"] == (EPISODES - PER_FILE) * LENGTH
    assert (first_file.stat().st_ino, first_file.stat().st_mtime_ns) == written  # not rewritten
    assert LeRobotDataset(out).num_episodes == EPISODES
    assert not work.exists()
