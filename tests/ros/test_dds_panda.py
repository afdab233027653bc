"""The Panda reach policy deployed through ROS 2 (policy node + simulated robot, real DDS)
brings the simulated arm's tcp to goals sent on the goal topic (the ONNX artifact here; the
benchmark runs the TorchScript one), and the e-stop holds the arm where it is."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from geometry_msgs.msg import PointStamped, PoseStamped
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory

from embodied_ros.description import sim_deploy_nodes
from robots import load_robot
from sim.tasks.panda_reach import SUCCESS_RADIUS, TARGET_HIGH, TARGET_LOW

pytestmark = pytest.mark.timeout(180)  # a hung DDS process must not hang the suite


def _position(msg: PoseStamped) -> np.ndarray:
    p = msg.pose.position
    return np.array([p.x, p.y, p.z])


def _stamp(msg: PoseStamped) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def test_reach_policy_through_ros_reaches_goals(ros_graph, panda_policy):
    g = ros_graph
    safety = g.safety()
    ee = g.record(PoseStamped, "/ground_truth/ee_pose")
    commands = g.record(JointTrajectory, "/joint_trajectory")
    sim_stats = g.record(String, "/sim_robot/loop_stats")
    g.launch(sim_deploy_nodes("panda", str(panda_policy.with_suffix(".onnx"))))
    g.wait_mode(safety, "soft_start")
    g.wait_mode(safety, "policy")
    goal_pub = g.node.create_publisher(PointStamped, "/goal", 10)
    rng = np.random.default_rng(0)
    targets = rng.uniform(TARGET_LOW, TARGET_HIGH, size=(3, 3))
    for target in targets:
        goal = PointStamped()
        goal.header.frame_id = "panda_link0"
        goal.point.x, goal.point.y, goal.point.z = (float(v) for v in target)

        def reached(goal=goal, target=target):
            goal_pub.publish(goal)  # until the arm is there (also covers discovery)
            return ee.messages and np.linalg.norm(_position(ee.messages[-1]) - target) \
                < SUCCESS_RADIUS

        g.wait_for(reached, 30.0, f"the tcp within {SUCCESS_RADIUS} m of {target.tolist()}")
    # Commands name the arm joints by ROS name, then the fingers (the simulated robot
    # follows them: command_gripper), and stay inside the limits.
    robot = load_robot("panda")
    last = commands.messages[-1]
    assert list(last.joint_names) == robot.ros_joint_names + list(robot.gripper.ros_names)
    q = np.array([m.points[0].positions[:7] for m in commands.messages])
    assert np.all(q >= robot.lower) and np.all(q <= robot.upper)
    assert safety.messages[-1]["mode"] == "policy"
    g.wait_for(lambda: sim_stats.messages, 10.0, "the simulated robot's loop statistics")
    # E-stop on an arm: the targets brake to a stop within the acceleration limits (at most
    # v_max / a_max = 0.29 s, 15 commands), then every later command is the same, while a new
    # goal far from the arm keeps arriving.
    e_stop = g.node.create_publisher(Bool, "/e_stop", 10)
    g.wait_for(lambda: e_stop.publish(Bool(data=True)) or
               safety.messages[-1]["mode"] == "e_stop", 10.0, "the e-stop to latch")
    n = len(commands.messages)
    # Where the e-stop found the arm, and how fast the tcp moved just before (the policy may
    # still be approaching the goal, or circling it when its observations arrive late).
    t_latch = next(t for t, msg in safety.items if msg["mode"] == "e_stop")
    before = [msg for t, msg in ee.items if t_latch - 0.5 <= t <= t_latch]
    latched_at = _position(before[-1])
    speed = max(np.linalg.norm(_position(b) - _position(a)) / max(_stamp(b) - _stamp(a), 1e-3)
                for a, b in itertools.pairwise(before))
    corners = np.array([[x, y, z] for x in (TARGET_LOW[0], TARGET_HIGH[0])
                        for y in (TARGET_LOW[1], TARGET_HIGH[1])
                        for z in (TARGET_LOW[2], TARGET_HIGH[2])])
    far = corners[np.argmax(np.linalg.norm(corners - latched_at, axis=1))]
    away = PointStamped()
    away.header.frame_id = "panda_link0"
    away.point.x, away.point.y, away.point.z = (float(v) for v in far)
    g.wait_for(lambda: goal_pub.publish(away) or len(commands.messages) > n + 30, 10.0,
               "commands after the e-stop")
    braking_time = float(np.max(robot.velocity / robot.acceleration))
    braking_steps = int(np.ceil(braking_time / robot.control_dt))
    held = np.array([m.points[0].positions for m in commands.messages[n + 2 + braking_steps:]])
    np.testing.assert_array_equal(held, np.broadcast_to(held[0], held.shape))
    # The arm stays where the e-stop found it (up to the braking from the speed it had, at
    # most v_max / a_max, and a centimetre of tracking) and stands still: not where the
    # policy would take it.
    m = len(ee.messages)
    g.wait_for(lambda: goal_pub.publish(away) or len(ee.messages) > m + 10, 10.0,
               "tcp poses after the braking")
    held_tcp = np.array([_position(msg) for msg in ee.messages[m:]])
    assert np.linalg.norm(held_tcp[-1] - latched_at) <= speed * braking_time + 0.01
    np.testing.assert_allclose(held_tcp, np.broadcast_to(held_tcp[-1], held_tcp.shape), atol=1e-3)
    assert np.linalg.norm(held_tcp[-1] - far) > 2 * SUCCESS_RADIUS


def _children(pid: int) -> list[int]:
    """Child process ids of ``pid`` (Linux /proc)."""
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            kids += [int(c) for c in (task / "children").read_text().split()]
    return kids


def test_readme_launcher_command_deploys_and_stops_its_nodes(ros_graph, panda_policy):
    """``python -m embodied_ros.launcher sim_deploy robot:=panda policy:=...`` (README)."""
    g = ros_graph
    safety = g.safety()
    ee = g.record(PoseStamped, "/ground_truth/ee_pose")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "embodied_ros.launcher", "sim_deploy", "robot:=panda",
         f"policy:={panda_policy}"], env=g.env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    nodes: list[int] = []
    try:
        nodes = g.wait_for(lambda: len(_children(launcher.pid)) == 2 and
                           _children(launcher.pid), 30.0, "the launcher's two nodes")
        g.wait_mode(safety, "policy")
        goal_pub = g.node.create_publisher(PointStamped, "/goal", 10)
        goal = PointStamped()
        goal.point.x, goal.point.y, goal.point.z = 0.5, 0.2, 0.3
        target = np.array([0.5, 0.2, 0.3])
        g.wait_for(lambda: goal_pub.publish(goal) or (ee.messages and np.linalg.norm(
            _position(ee.messages[-1]) - target) < SUCCESS_RADIUS), 30.0, "the goal reached")
        launcher.send_signal(signal.SIGTERM)  # as a service manager stops it
        assert launcher.wait(30) == 0
        g.wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in nodes), 10.0,
                   "the nodes to exit with the launcher")
    finally:
        for pid in [launcher.pid, *nodes]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        launcher.wait(10)
