"""Equivalent actions of every action space, computed from one space's recorded actions."""

from __future__ import annotations

import json

import numpy as np
import torch

from embodied.commands.collect import run_collect
from embodied.config import load_config
from embodied.datasets import LeRobotDataset
from embodied.datasets.actions import ActionSpaces
from robots import load_robot
from robots.actions import make_action_map


def _collect_expert_push(tmp_path, action: str):
    """Two scripted-expert panda_push episodes collected in ``action``: the dataset path."""
    out = tmp_path / "ds"
    run_collect(load_config("collect", [
        "task=panda_push", f"task.action={action}", "policy=expert", "episodes=2",
        "num_envs=2", "cameras=[]", "progress=false", f"out={out}"]))
    return out


def test_joint_targets_convert_into_actions_that_command_the_same_targets():
    robot = load_robot("panda")
    spaces = ActionSpaces("joint_position", robot, control_dt=0.02)
    gen = torch.Generator().manual_seed(0)
    start = torch.rand(1, 8, generator=gen) * 0.2 - 0.1
    steps = torch.randn(30, 8, generator=gen).cumsum(0) * 0.002  # slow, unclipped moves
    actions = (start + steps).numpy()
    q0 = spaces.targets(actions[:1], np.zeros(7))[0] - 0.01  # near the first target
    targets = spaces.targets(actions, q0)
    out = spaces.convert(actions, q0)
    # joint_delta: replayed from q0, the derived actions command the same targets
    jd = make_action_map("joint_delta", robot, 1, 0.5, control_dt=0.02)
    jd.reset(torch.zeros(1, dtype=torch.long), torch.as_tensor(q0)[None])
    replay = np.stack([jd(torch.as_tensor(a)[None])[0, :7].numpy() for a in out["joint_delta"]])
    np.testing.assert_allclose(replay, targets, atol=1e-5)
    # ee_delta(_yaw): the tcp steps add up to the tcp displacement of the whole sequence
    ee = spaces.maps["ee_delta_yaw"]
    (p0, _), (p1, _) = (ee.kinematics.pose(torch.as_tensor(q)[None]) for q in (q0, targets[-1]))
    for kind in ("ee_delta", "ee_delta_yaw"):
        moved = out[kind][:, :3].astype(np.float64).sum(0) * ee.max_step
        np.testing.assert_allclose(moved, (p1 - p0)[0].numpy(), atol=1e-5)
    assert out["ee_delta_yaw"].shape == (30, 5) and out["ee_delta"].shape == (30, 4)
    for kind in out:  # the gripper action is carried over
        np.testing.assert_array_equal(out[kind][:, -1], actions[:, -1].astype(np.float32))


def test_collect_records_every_action_space_and_names_the_dimensions(tmp_path):
    out = _collect_expert_push(tmp_path, "ee_delta_yaw")
    info = json.loads((out / "meta/info.json").read_text())
    assert info["embodied"]["action_space"] == "ee_delta_yaw"
    features = info["features"]
    assert features["action"]["names"] == ["dx", "dy", "dz", "dyaw", "gripper"]
    assert features["action.ee_delta"]["names"] == ["dx", "dy", "dz", "gripper"]
    assert features["action.joint_delta"]["names"][:2] == ["joint1", "joint2"]
    names = features["observation.state"]["names"]
    assert len(names) == features["observation.state"]["shape"][0]
    assert names[0] == "joint_pos.0" and "cube_pos.2" in names
    data = LeRobotDataset(out).episode_data(0, ["action", "action.ee_delta"])
    # the derived tcp steps are the commanded ones, short where the IK did not reach them
    assert np.abs(data["action"][:, :3] - data["action.ee_delta"][:, :3]).mean() < 0.05


def test_collect_in_a_closed_finger_space_keeps_its_columns_apart(tmp_path):
    # A pusher's actions have no gripper dimension: the last column (dyaw) must not be
    # read as the gripper, and the other spaces get the fingers closed.
    out = _collect_expert_push(tmp_path, "ee_delta_yaw_closed")
    info = json.loads((out / "meta/info.json").read_text())
    assert info["embodied"]["action_space"] == "ee_delta_yaw_closed"
    features = info["features"]
    assert features["action"]["names"] == ["dx", "dy", "dz", "dyaw"]
    assert features["action.ee_delta_yaw"]["names"] == ["dx", "dy", "dz", "dyaw", "gripper"]
    data = LeRobotDataset(out).episode_data(0, ["action", "action.ee_delta_yaw"])
    derived = data["action.ee_delta_yaw"]
    np.testing.assert_array_equal(derived[:, -1], -1.0)
    assert np.abs(data["action"] - derived[:, :4]).mean() < 0.05
    assert np.abs(data["action"][:, 3]).max() > 0.1  # the expert turned the hand
