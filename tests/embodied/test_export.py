"""`embodied export`: TorchScript/ONNX equal the torch policy; the metadata guards the robot."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from embodied.cli import main
from embodied.export import (
    DeployedPolicy,
    load_checkpoint_policy,
    parity_observations,
    write_onnx,
    write_torchscript,
)
from embodied.policy_io import (
    ExportError,
    PolicyMismatchError,
    check_against_robot,
    load_policy,
    sha256_file,
)
from embodied.rl import ActorCritic
from robots import load_robot


@pytest.fixture(scope="module")
def exported_run(tiny_ppo_run):
    """The tiny PPO run (tests/embodied/conftest.py) exported in both formats (the CLI)."""
    threads = torch.get_num_threads()
    try:
        assert main(["export", f"run={tiny_ppo_run}"]) == 0
    finally:
        torch.set_num_threads(threads)
    return tiny_ppo_run


def _trained_like_policy() -> ActorCritic:
    """A policy whose normaliser has seen shifted, scaled data (not the identity)."""
    torch.manual_seed(3)
    policy = ActorCritic(12, 5, (32, 16), (16,))
    policy.train()
    for _ in range(3):
        policy.normalize(torch.randn(256, 12) * torch.linspace(0.1, 8.0, 12) + 4.0)
    return policy.eval()


def test_torchscript_and_onnx_equal_the_torch_policy(tmp_path):
    policy = _trained_like_policy()
    assert policy.obs_normalizer.count > 0 and policy.obs_normalizer.mean.abs().min() > 1.0
    module = DeployedPolicy(policy)
    meta = {"task": "t", "robot": "r", "obs_dim": 12, "action_dim": 5}
    ts, _ = load_policy(write_torchscript(module, tmp_path / "p.pt", meta))
    onnx, onnx_meta = load_policy(write_onnx(module, tmp_path / "p.onnx", meta))
    assert onnx_meta["task"] == "t" and ts.kind == "torchscript" and onnx.kind == "onnx"
    obs = parity_observations(module, 512, seed=1)
    with torch.inference_mode():
        want = policy(obs).clamp(-1.0, 1.0)
        assert 0.05 < (want.abs() < 1.0).float().mean() < 1.0  # some clipped, many not
        for batch in (obs[:1], obs[:3], obs):  # dynamic batch axis
            want_b = want[: len(batch)]
            assert (ts(batch) - want_b).abs().max() <= 1e-6
            assert (onnx(batch) - want_b).abs().max() <= 1e-5
            assert onnx(batch.numpy()).shape == want_b.shape  # numpy in, torch out
    with pytest.raises(PolicyMismatchError, match=r"\[N, 12\]"):
        ts(torch.zeros(2, 11))


def test_export_cli_writes_artifacts_and_metadata(exported_run, capsys):
    out = exported_run / "export"
    meta = json.loads((out / "policy.json").read_text())
    robot = load_robot("panda")
    assert meta["task"] == "panda_reach" and meta["robot"] == "panda"
    assert meta["joint_names"] == robot.joint_names
    assert meta["ros_joint_names"] == robot.ros_joint_names
    assert meta["action_dim"] == robot.action_dim == 8
    assert sum(t["size"] for t in meta["observation"]) == meta["obs_dim"]
    assert meta["action"]["gripper"]["action_index"] == 7
    assert meta["control_dt"] == pytest.approx(robot.control_dt)
    assert len(meta["training"]["config_sha256"]) == 64 and meta["exported_at"]
    assert (out / "robot.yaml").read_text() == meta["robot_yaml"] == \
        robot.yaml_path.read_text()
    policy, state, _ = load_checkpoint_policy(exported_run)
    obs = parity_observations(DeployedPolicy(policy), 256)
    for name, tol in (("policy.pt", 1e-6), ("policy.onnx", 1e-5)):
        art = meta["artifacts"][name]
        assert art["sha256"] == sha256_file(out / name) and art["parity_max_abs_error"] <= tol
        loaded, loaded_meta = load_policy(out / name)
        assert loaded_meta["obs_dim"] == state["obs_dim"]
        check_against_robot(loaded_meta, robot)  # fits the robot it was trained for
        with torch.inference_mode():
            assert (loaded(obs) - policy(obs).clamp(-1, 1)).abs().max() <= tol


def test_metadata_refuses_another_robot(exported_run):
    _, meta = load_policy(exported_run / "export" / "policy.pt")
    with pytest.raises(PolicyMismatchError) as err:
        check_against_robot(meta, load_robot("go2"))
    msg = str(err.value)
    assert "'panda'" in msg and "'go2'" in msg and "joint names/order" in msg
    assert "action_dim: policy 8, robot 12" in msg
    panda = load_robot("panda")
    swapped = dataclasses.replace(panda, joints=(panda.joints[1], panda.joints[0],
                                                 *panda.joints[2:]))
    with pytest.raises(PolicyMismatchError, match="joint names/order") as err:
        check_against_robot(meta, swapped)
    assert "action_dim" not in str(err.value)


def test_load_policy_refuses_a_file_swapped_behind_its_metadata(exported_run, tmp_path):
    src = exported_run / "export"
    for name in ("policy.pt", "policy.json"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    meta = json.loads((tmp_path / "policy.json").read_text())
    meta["artifacts"]["policy.pt"]["sha256"] = "0" * 64
    (tmp_path / "policy.json").write_text(json.dumps(meta))
    with pytest.raises(ExportError, match="sha256 differs"):
        load_policy(tmp_path / "policy.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(ExportError, match="cannot load TorchScript"):
        load_policy(tmp_path / "junk.pt")


def test_export_errors_are_clear(tmp_path, capsys):
    assert main(["export", f"run={tmp_path / 'missing'}"]) == 2
    assert main(["export", "run=" + str(tmp_path), "format=tflite"]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err
