"""`embodied eval`: a checkpoint and its exported TorchScript file score the same; clear errors."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from embodied.cli import main
from embodied.export import (
    DeployedPolicy,
    export_run,
    load_checkpoint_policy,
    write_torchscript,
)
from embodied.policy_io import load_policy
from embodied.rl.evaluate import evaluate
from sim import make_env

EVAL = ["episodes=6", "num_envs=4", "progress=false"]


@pytest.fixture(scope="module")
def run(tiny_ppo_run):
    """The tiny PPO run (tests/embodied/conftest.py) with its policy exported to TorchScript."""
    export_run(tiny_ppo_run, "torchscript")
    return tiny_ppo_run


def _eval(capsys, *args: str) -> dict:
    threads = torch.get_num_threads()
    try:
        assert main(["eval", *args]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    path = out.split("results")[-1].strip()
    assert "success rate" in out and "mean return" in out
    return {**json.loads(open(path).read()), "json": path}


def test_eval_checkpoint_and_exported_file_agree(run, capsys):
    ckpt = _eval(capsys, f"run={run}", *EVAL, "video_envs=1", "width=32", "height=32")
    assert ckpt["episodes"] == 6 and ckpt["policy"]["kind"] == "checkpoint"
    assert ckpt["video"] or ckpt["render_error"]  # rendering may be unavailable here
    assert ckpt["json"].startswith(str(run / "eval" / "eval_"))
    ts = _eval(capsys, f"policy={run / 'export' / 'policy.pt'}", *EVAL, "video=false")
    assert ts["policy"]["kind"] == "torchscript" and ts["run_dir"] == str(run)
    assert ts["seed"] == ckpt["seed"] == 10_000
    for key in ("success_rate", "episode_return", "episode_length", "episodes"):
        assert ts[key] == ckpt[key], key
    assert len(list((run / "eval").glob("eval_*.json"))) == 2


def test_evaluate_shares_episodes_evenly_across_envs():
    env = make_env("panda_reach", num_envs=3, seed=0, episode_length_s=0.2)
    try:
        result = evaluate(lambda obs: torch.zeros(obs.shape[0], env.action_dim), env,
                          episodes=7)
    finally:
        env.close()
    assert result["episodes"] == 7 and result["episode_length"] == env.max_episode_steps


def test_eval_errors_are_clear(run, tmp_path, capsys):
    assert main(["eval", f"run={tmp_path / 'missing'}"]) == 2
    assert "run folder" in capsys.readouterr().err

    corrupt = tmp_path / "corrupt"
    shutil.copytree(run, corrupt, ignore=shutil.ignore_patterns("export", "eval"))
    for ckpt in (corrupt / "checkpoints").glob("model_*.pt"):  # whichever eval picks
        ckpt.write_bytes(ckpt.read_bytes()[:500])
    assert main(["eval", f"run={corrupt}", *EVAL]) == 2
    assert "corrupt or truncated" in capsys.readouterr().err

    # A policy exported for another task, and one whose robot differs from the task's.
    _, meta = load_policy(run / "export" / "policy.pt")
    module = DeployedPolicy(load_checkpoint_policy(run)[0])
    other_task = {**meta, "task": "panda_push"}
    write_torchscript(module, tmp_path / "push.pt", other_task)
    assert main(["eval", f"run={run}", f"policy={tmp_path / 'push.pt'}", *EVAL]) == 2
    assert "exported for task 'panda_push'" in capsys.readouterr().err

    other_robot = {**meta, "robot": "go2", "joint_names": [f"j{i}" for i in range(8)]}
    write_torchscript(module, tmp_path / "go2.pt", other_robot)
    assert main(["eval", f"policy={tmp_path / 'go2.pt'}", *EVAL, "video=false"]) == 2
    err = capsys.readouterr().err
    assert "does not fit" in err and "joint names/order" in err and "Traceback" not in err
