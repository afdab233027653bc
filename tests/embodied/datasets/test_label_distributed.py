"""`embodied label` under real torchrun (2 ranks, gloo on 127.0.0.1): the merged dataset equals
a single-process labelling byte for byte, and a job whose rank was killed resumes to it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from embodied import distributed
from embodied.commands.label import run_label
from embodied.config import load_config

REPO = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).parents[1] / "dist_cli_worker.py"
EPISODES = 12  # of the shared `dataset` (conftest.py)
SAME = ("data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet",
        "data/chunk-000/file-002.parquet", "meta/episodes/chunk-000/file-000.parquet",
        "meta/stats.json", "meta/info.json", "meta/tasks.parquet",
        "meta/label_progress.png")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def labelled(dataset, tmp_path_factory) -> tuple[Path, Path]:
    """The shared dataset (conftest.py) and its single-process oracle labelling."""
    single = tmp_path_factory.mktemp("dist_label") / "single"
    run_label(load_config("label", overrides(dataset, single)))
    return dataset, single


def overrides(source: Path, out: Path) -> list[str]:
    return [f"dataset={source}", f"out={out}", "progress=false", "reward=oracle",
            "reward.mode=prm+sparse"]


def torchrun_label(source: Path, out: Path, kill_rank: int | None = None):
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    if kill_rank is not None:
        env["KILL_RANK"] = str(kill_rank)
    return distributed.launch_local(2, [str(WORKER), "label", *overrides(source, out)], 240,
                                    cwd=REPO, env=env)


def assert_same(out: Path, single: Path) -> None:
    for rel in SAME:
        assert digest(out / rel) == digest(single / rel), rel
    assert not (out / ".labelling").exists()


def test_two_ranks_label_the_same_bytes_as_one(labelled, tmp_path):
    source, single = labelled
    result = torchrun_label(source, tmp_path / "two")
    assert result.returncode == 0, result.stderr[-4000:]
    assert_same(tmp_path / "two", single)
    assert f"labelled {EPISODES} episodes" in result.stdout


def test_a_killed_rank_resumes_to_the_same_dataset(labelled, tmp_path):
    source, single = labelled
    out = tmp_path / "killed"
    killed = torchrun_label(source, out, kill_rank=1)
    assert killed.returncode != 0
    done = len(list((out / ".labelling").glob("episode_*.npz")))
    assert 0 < done < EPISODES
    assert not (out / "meta/info.json").exists()
    resumed = torchrun_label(source, out)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert f"resuming {out}: {done} of {EPISODES} episodes already labelled" in resumed.stdout
    assert_same(out, single)
