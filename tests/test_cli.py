"""The `embodied` command: Hydra composition, clear errors, the demo's outputs."""

from __future__ import annotations

import subprocess
import sys

import cv2
import pytest

from embodied.cli import main
from embodied.config import ConfigError, load_config
from sim import task_names


@pytest.mark.parametrize("task", task_names())
def test_every_task_config_composes(task):
    cfg = load_config("demo", [f"task={task}"])
    assert cfg.task.name == task


def test_unknown_task_is_a_clear_error(capsys):
    with pytest.raises(ConfigError, match="panda_flip"):
        load_config("demo", ["task=panda_flip"])
    assert main(["demo", "task=panda_flip"]) == 2
    err = capsys.readouterr().err
    assert "panda_flip" in err and "Traceback" not in err


def test_unknown_command(capsys):
    assert main(["fly"]) == 2
    assert "unknown command 'fly'" in capsys.readouterr().err


def test_demo_writes_video_plot_and_config(tmp_path):
    run_dir = tmp_path / "demo"
    out = subprocess.run(
        [sys.executable, "-m", "embodied.cli", "demo", "task=panda_reach", "num_envs=2",
         "task.episode_length_s=1.0", "video.width=64", "video.height=64",
         f"run_dir={run_dir}"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert str(run_dir / "rollout.mp4") in out.stdout
    for name in ("rollout.mp4", "progress.png", "config.yaml"):
        assert (run_dir / name).stat().st_size > 0
    cap = cv2.VideoCapture(str(run_dir / "rollout.mp4"))
    ok, frame = cap.read()
    assert ok and frame.shape == (2 * 64, 3 * 64, 3)  # 2 envs x 3 views
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 25
    cap.release()


def test_every_command_has_its_config_and_every_config_a_command():
    from embodied.commands import COMMANDS
    from embodied.config import config_dir

    assert {c.config for c in COMMANDS.values()} == {
        p.stem for p in (config_dir() / "commands").glob("*.yaml")}
    for cmd in COMMANDS.values():
        assert cmd.run.__module__ == f"embodied.commands.{cmd.config}"
        assert load_config(cmd.config, []) is not None
