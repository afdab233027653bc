"""End-effector delta actions at a task's own control rate, from the simulator to the
robot side: the exported metadata rebuilds the same action map (torch kinematics, no
MuJoCo), the policy checks accept it, and a deployment runs at the policy's period."""

from __future__ import annotations

import pytest
import torch

from embodied.policy_io import PolicyMismatchError, policy_control_dt, policy_mismatches
from robots.actions import EEDeltaAction, action_map_from_metadata
from sim import make_env


@pytest.fixture(scope="module")
def push_env():
    env = make_env("panda_push", num_envs=3, seed=0, action="ee_delta", decimation=10,
                   episode_length_s=4.0)
    yield env
    env.close()


def test_exported_ee_delta_metadata_rebuilds_the_simulators_action_map(push_env):
    env = push_env
    env.reset(seed=3)
    q0 = env.task.joint_pos.clone()
    sim_side = env.action_map
    robot_side = action_map_from_metadata(sim_side.metadata(), env.robot, env.control_dt,
                                          num_envs=3)
    assert isinstance(robot_side, EEDeltaAction) and robot_side.action_dim == env.action_dim
    assert robot_side.max_step == pytest.approx(sim_side.max_step)
    robot_side.reset(torch.arange(3), q0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        actions = torch.rand(3, env.action_dim, generator=gen, dtype=torch.float64) * 2 - 1
        torch.testing.assert_close(robot_side(actions), sim_side(actions), rtol=0, atol=1e-12)


def test_policy_checks_accept_ee_delta_at_20_hz_and_the_node_runs_at_it(push_env):
    env = push_env
    meta = {"robot": "panda", "joint_names": env.robot.joint_names,
            "ros_joint_names": env.robot.ros_joint_names, "action_dim": env.action_dim,
            "action": {**env.action_map.metadata(), "gripper": {}},
            "control_dt": env.control_dt}
    assert policy_mismatches(meta, env.robot) == []
    assert policy_control_dt(meta) == pytest.approx(0.05)
    assert policy_control_dt(meta, 0.05) == pytest.approx(0.05)
    with pytest.raises(PolicyMismatchError, match="control_dt"):
        policy_control_dt(meta, 0.02)
    wrong = {**meta, "action_dim": 8, "control_dt": 0.0123}
    problems = " ".join(policy_mismatches(wrong, env.robot))
    assert "action_dim: policy 8" in problems and "control_dt" in problems


ROBOT_SIDE = r"""
import importlib.abc, json, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mujoco", "sim"):
            raise ImportError(f"{name} is blocked: robot-side code must not import it")
        return None

sys.meta_path.insert(0, Blocked())
import torch
from robots import load_robot
from robots.actions import action_map_from_metadata

case = json.load(sys.stdin)
amap = action_map_from_metadata(case["action"], load_robot("panda"), case["control_dt"])
amap.reset(torch.zeros(1, dtype=torch.long), torch.tensor([case["q0"]], dtype=torch.float64))
out = [amap(torch.tensor([a], dtype=torch.float64))[0].tolist() for a in case["actions"]]
print(json.dumps(out))
"""


def test_ee_delta_runs_on_the_robot_side_without_mujoco(push_env):
    import json
    import os
    import subprocess
    import sys

    env = push_env
    env.reset(seed=4)
    q0 = env.task.joint_pos[:1].clone()
    ours = action_map_from_metadata(env.action_map.metadata(), env.robot, env.control_dt)
    ours.reset(torch.zeros(1, dtype=torch.long), q0)
    actions = [[0.5, -0.2, -1.0, 1.0], [0.0, 1.0, 0.3, -1.0], [-1.0, 0.0, 0.0, 0.0]]
    want = [ours(torch.tensor([a], dtype=torch.float64))[0].tolist() for a in actions]
    case = {"action": env.action_map.metadata(), "control_dt": env.control_dt,
            "q0": q0[0].tolist(), "actions": actions}
    proc = subprocess.run([sys.executable, "-c", ROBOT_SIDE], input=json.dumps(case),
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=0, atol=1e-12)
