"""Every command, every bad input: one `error: ...` line (exit 2), never a traceback.

Bad config values (type, range, devices), a broken robot.yaml, unwritable or full
output folders, more envs than memory, another task's policy, an unfinished dataset.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

import robots.spec
import sim.memory
from embodied.cli import main
from embodied.config import ConfigError, load_config
from embodied.datasets import DatasetError, DatasetWriter, LeRobotDataset

REPO = Path(__file__).resolve().parents[2]
TINY_TRAIN = ["task=panda_reach", "num_envs=4", "algo.num_steps=8", "algo.actor_hidden=[32]",
              "algo.critic_hidden=[16]", "max_iterations=1", "save_interval=0",
              "progress=false", "eval.num_envs=0"]


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("command, override, fragment", [
    ("train", "num_envs=0", "num_envs=0: must be >= 1"),
    ("collect", "num_envs=-3", "num_envs=-3: must be >= 1"),
    ("train", "num_envs=abc", "num_envs=abc: expected an integer"),
    ("train", "max_iterations=ten", "max_iterations=ten: expected an integer"),
    ("demo", "seed=1.5", "seed=1.5: expected an integer"),
    ("collect", "episodes=2.5", "episodes=2.5: expected an integer"),
    ("train", "algo.gamma=high", "algo.gamma=high: expected a number"),
    ("train", "progress=maybe", "progress=maybe: expected true or false"),
])
def test_config_values_are_checked_by_type_and_range(command, override, fragment, capsys):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        load_config(command, [override])
    assert main([command, override]) == 2
    assert fragment in one_line(capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("overrides, key", [
    (["sim.device=cuda"], "sim.device=cuda"),
    (["reward=prm", "reward.model.device=cuda:0"], "reward.model.device=cuda:0")])
def test_a_missing_gpu_is_one_line(overrides, key, capsys):
    assert main(["train", *overrides]) == 2
    err = one_line(capsys)
    assert key in err and "no CUDA GPU" in err


def test_a_robot_yaml_error_from_demo_and_train_is_one_line(tmp_path, monkeypatch, capsys):
    robots_dir = tmp_path / "robots"
    shutil.copytree(robots.spec.ROBOTS_DIR / "panda", robots_dir / "panda")
    spec = robots_dir / "panda" / "robot.yaml"
    data = yaml.safe_load(spec.read_text())
    data["joints"][0]["velocity"] = "fast"
    spec.write_text(yaml.safe_dump(data))
    monkeypatch.setattr(robots.spec, "ROBOTS_DIR", robots_dir)
    for command in (["demo", "task=panda_reach", f"run_dir={tmp_path / 'demo'}"],
                    ["train", *TINY_TRAIN, f"run_dir={tmp_path / 'train'}"]):
        assert main(command) == 2
        err = one_line(capsys)
        assert str(spec) in err and "joints[0] (joint1).velocity" in err


def test_more_envs_than_memory_is_refused_before_allocating(monkeypatch, capsys):
    monkeypatch.setattr(sim.memory, "available_memory", lambda: 2**30)
    assert main(["train", "task=panda_push", "num_envs=200000", "progress=false"]) == 2
    err = one_line(capsys)
    assert "200000 envs need about 39" in err and "1.0 GiB available" in err
    per_env = sim.memory.bytes_per_env(load_robot_model())
    assert 150 * 1024 < per_env < 400 * 1024  # measured: about 200 KiB per env


def load_robot_model():
    from sim import make_env

    return make_env("panda_push", num_envs=1, nthread=1).physics.model


@pytest.mark.parametrize("where", ["proc", "read_only"])
def test_an_unwritable_output_folder_is_one_line_naming_it(where, tmp_path, capsys):
    if where == "proc":
        out = Path("/proc/embodied_test/run")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        out = folder / "run"
    for command in (["demo", "task=panda_reach", f"run_dir={out}"],
                    ["train", *TINY_TRAIN, f"run_dir={out}"],
                    ["collect", "task=panda_reach", "episodes=1", "progress=false",
                     f"out={out}"]):
        assert main(command) == 2
        assert str(out.parent) in one_line(capsys)


def _limited(args: list[str], limit: int) -> subprocess.CompletedProcess:
    """The CLI in a subprocess whose files may not grow beyond ``limit`` bytes (what a
    full disk does to a write)."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "embodied.cli", *args], capture_output=True,
                          text=True, timeout=300, preexec_fn=cap, env=env, cwd=REPO)


@pytest.mark.parametrize("command, limit, name", [
    (["collect", "task=panda_reach", "episodes=2", "num_envs=2", "cameras=[front]",
      "task.episode_length_s=1.0", "progress=false"], 20_000, ".mp4"),
    (["train", *TINY_TRAIN, "algo.actor_hidden=[256,256]"], 100_000, "model_000001.pt")])
def test_a_full_disk_is_one_line_naming_the_file(command, limit, name, tmp_path):
    key = "out" if command[0] == "collect" else "run_dir"
    out = _limited([*command, f"{key}={tmp_path / 'out'}"], limit)
    assert out.returncode == 2, out.stderr[-2000:]
    lines = out.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert str(tmp_path / "out") in lines[-1] and name in lines[-1]
    assert "File too large" in lines[-1] or "No space left" in lines[-1]


FEATURES = {"action": {"dtype": "float32", "shape": [2], "names": None}}


def test_an_unfinished_collection_says_so_and_how_to_go_on(tmp_path, capsys):
    root = tmp_path / "ds"
    writer = DatasetWriter(root, 10, FEATURES, episodes_per_file=1)
    for _ in range(2):  # the first file is finished, the second never is
        writer.add_episode({"action": np.zeros((5, 2), np.float32)}, "t")
    for attempt in (lambda: LeRobotDataset(root), lambda: DatasetWriter(root, 10, FEATURES)):
        with pytest.raises(DatasetError, match=r"unfinished collection.*continue it .*same"):
            attempt()
    resumed = DatasetWriter(root, 10, FEATURES, episodes_per_file=1, resume=True)
    assert len(resumed.episodes) == 1 and resumed._frames == 5
    with pytest.raises(DatasetError, match="other settings"):
        DatasetWriter(root, 20, FEATURES, episodes_per_file=1, resume=True)
    assert main(["label", "reward=oracle", f"dataset={root}"]) == 2
    assert "unfinished collection" in one_line(capsys)
    assert main(["collect", "task=panda_reach", "episodes=1", f"out={root}"]) == 2
    assert "unfinished collection with other settings" in one_line(capsys)
    (root / ".collecting.json").unlink()  # files without the writer's state: start again
    with pytest.raises(DatasetError, match=r"unfinished collection.*delete"):
        LeRobotDataset(root)


def test_collect_refuses_another_tasks_run_folder_up_front(tmp_path, capsys):
    run = tmp_path / "reach"
    assert main(["train", *TINY_TRAIN, f"run_dir={run}"]) == 0
    capsys.readouterr()
    for policy in (run, next((run / "checkpoints").glob("model_*.pt"))):
        out = tmp_path / f"push_{policy.name}"
        assert main(["collect", "task=panda_push", f"policy={policy}", "episodes=1",
                     "cameras=[]", f"out={out}", "progress=false"]) == 2
        err = one_line(capsys)
        assert "trained on task 'panda_reach'" in err and "panda_push" in err
        assert not out.exists()
