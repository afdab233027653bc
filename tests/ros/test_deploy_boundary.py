"""The policy node's code runs without MuJoCo, the simulator or the training stack.

A fresh interpreter in which those packages raise ImportError imports every module of
embodied_ros that the policy node needs (all but the simulated robot node and the
launch_ros glue) and runs the node's control step (observation -> exported policy ->
action map) on the shipped policies; the result must equal the same step done with the
training stack (the simulator's observation functions, MuJoCo kinematics, the exporter's
loader). No DDS traffic: nothing here starts a node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
import torch

from embodied.policy_io import check_against_robot, load_policy
from robots import load_robot
from robots.actions import make_action_map
from robots.build import robot_mjspec
from sim.tasks.go2_walk import advance_phase
from sim.tasks.go2_walk import build_observation as build_walk_observation
from sim.tasks.panda_base import gripper_opening
from sim.tasks.panda_reach import build_reach_observation

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "assets" / "policies"
BLOCKED = ("mujoco", "sim", "hydra", "omegaconf", "stable_baselines3", "transformers",
           "gymnasium", "embodied.rl", "embodied.reward", "embodied.datasets",
           "embodied.export")
NOT_ON_THE_ROBOT = {"sim_robot_node", "launch_actions"}  # a simulator; launch_ros glue

# Runs in the fresh interpreter: block the packages, import the node's modules, then run
# the node's control step (PolicyNode._policy_targets) on the inputs read from stdin.
DEPLOY_STEP = rf"""
import importlib, importlib.abc, json, pkgutil, sys

BLOCKED = {BLOCKED!r}

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"{{name}} is blocked: robot-side code must not import it")
        return None

assert not [m for m in BLOCKED if m in sys.modules], "imported before the blocker"
sys.meta_path.insert(0, Blocked())

import numpy as np
import torch
import embodied_ros

for info in pkgutil.iter_modules(embodied_ros.__path__):
    if info.name not in {NOT_ON_THE_ROBOT!r}:
        importlib.import_module(f"embodied_ros.{{info.name}}")

from embodied.policy_io import check_against_robot, load_policy
from embodied_ros.observation import RobotState, make_builder
from robots import load_robot
from robots.actions import make_action_map

case = json.load(sys.stdin)
robot = load_robot(case["robot"])
policy, meta = load_policy(case["policy"])
check_against_robot(meta, robot)
builder = make_builder(meta["task"], robot, meta.get("task_settings"))
builder.reset()
action_map = make_action_map(meta["action"]["type"], robot, 1,
                             float(meta["action"].get("speed", 0.5)))
last_action = np.asarray(case["last_action"])
out = []
for step in case["steps"]:
    state = RobotState(**{{k: np.asarray(v) for k, v in step["state"].items()}})
    obs = builder.build(state, last_action, np.asarray(step["command"]))
    action = np.clip(policy(obs)[0].numpy().astype(np.float64), -1.0, 1.0)
    builder.advance()
    target = action_map(torch.as_tensor(action)[None])[0].numpy()
    last_action = action
    out.append({{"obs": obs[0].tolist(), "action": action.tolist(),
                 "target": target.tolist()}})
print(json.dumps(out))
"""


def _random_case(robot_name: str, policy: str, steps: int = 3, seed: int = 0
                 ) -> dict[str, Any]:
    """Robot states near the default pose, goals / commands and a last action (JSON)."""
    robot = load_robot(robot_name)
    rng = np.random.default_rng(seed)
    nj = len(robot.joints)
    cases = []
    for _ in range(steps):
        q = np.clip(robot.default_pose + rng.uniform(-0.3, 0.3, nj), robot.lower, robot.upper)
        state: dict[str, Any] = {"q": q.tolist(), "qd": rng.uniform(-1, 1, nj).tolist()}
        if robot.gripper is not None:
            state["finger_q"] = rng.uniform(robot.gripper.lower, robot.gripper.upper,
                                            len(robot.gripper.joints)).tolist()
            command = rng.uniform([0.35, -0.25, 0.15], [0.65, 0.25, 0.45])
        else:
            quat = np.array([1.0, 0.0, 0.0, 0.0]) + rng.uniform(-0.1, 0.1, 4)
            state.update(quat_wxyz=(quat / np.linalg.norm(quat)).tolist(),
                         ang_vel_b=rng.uniform(-0.5, 0.5, 3).tolist(),
                         lin_vel_b=rng.uniform(-0.5, 0.5, 3).tolist())
            command = rng.uniform([-1.0, -0.3, -0.5], [1.0, 0.3, 0.5])
        cases.append({"state": state, "command": command.tolist()})
    last_action = np.zeros(robot.action_dim)
    if robot.gripper is not None:
        last_action[-1] = 1.0
    return {"robot": robot_name, "policy": policy, "last_action": last_action.tolist(),
            "steps": cases}


def _deploy_without_training_stack(case: dict[str, Any]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, "-c", DEPLOY_STEP], input=json.dumps(case),
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _row(x: Any) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float64)).reshape(1, -1)


def _deploy_with_training_stack(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The same step from the simulator's functions, MuJoCo kinematics, the exporter."""
    robot = load_robot(case["robot"])
    policy, meta = load_policy(case["policy"])
    check_against_robot(meta, robot)
    action_map = make_action_map(meta["action"]["type"], robot, 1,
                                 float(meta["action"].get("speed", 0.5)))
    model = robot_mjspec(robot).compile()
    data = mujoco.MjData(model)
    qadr = [model.jnt_qposadr[model.joint(n).id] for n in robot.joint_names]
    phase = torch.zeros(1, dtype=torch.float64)
    last_action = np.asarray(case["last_action"])
    out = []
    for step in case["steps"]:
        s, command = step["state"], _row(step["command"])
        if robot.gripper is not None:
            data.qpos[qadr] = s["q"]
            mujoco.mj_kinematics(model, data)
            ee = _row(data.site(robot.sites["ee"]).xpos)
            g = robot.gripper
            obs = build_reach_observation(_row(s["q"]), _row(s["qd"]),
                                          _row(robot.default_pose),
                                          gripper_opening(_row(s["finger_q"]), g.lower, g.upper),
                                          ee, _row(last_action), command)
        else:
            obs = build_walk_observation(_row(s["lin_vel_b"]), _row(s["ang_vel_b"]),
                                         _row(s["quat_wxyz"]), command, phase, _row(s["q"]),
                                         _row(s["qd"]), _row(robot.default_pose),
                                         _row(last_action))
            phase = advance_phase(phase, robot.control_dt)
        obs = obs.to(torch.float32).numpy()
        action = np.clip(policy(obs)[0].numpy().astype(np.float64), -1.0, 1.0)
        target = action_map(torch.as_tensor(action)[None])[0].numpy()
        last_action = action
        out.append({"obs": obs[0].tolist(), "action": action.tolist(),
                    "target": target.tolist()})
    return out


@pytest.mark.parametrize("robot_name, task, artifact", [
    ("panda", "panda_reach", "policy.pt"), ("panda", "panda_reach", "policy.onnx"),
    ("go2", "go2_walk", "policy.pt")])
def test_policy_node_step_runs_without_mujoco_and_training_stack(robot_name, task, artifact):
    policy = POLICIES / task / artifact
    if not policy.is_file():
        pytest.fail(f"{policy} is missing (see {policy.parent / 'README.md'})")
    case = _random_case(robot_name, str(policy))
    light = _deploy_without_training_stack(case)
    full = _deploy_with_training_stack(case)
    assert len(light) == len(full) == len(case["steps"])
    for got, want in zip(light, full, strict=True):
        for key in ("obs", "action", "target"):
            np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-6, err_msg=key)
