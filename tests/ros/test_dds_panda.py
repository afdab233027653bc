"""The Panda reach policy deployed through ROS 2 (policy node + simulated robot, real DDS)
brings the simulated arm's tcp to goals sent on the goal topic (the ONNX artifact here; the
benchmark runs the TorchScript one), and the e-stop holds the arm where it is."""

from __future__ import annotations

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
    # Commands name the arm joints (by ROS name; the fingers are the gripper's own
    # controller's, command_gripper: false) and stay inside the limits.
    robot = load_robot("panda")
    last = commands.messages[-1]
    assert list(last.joint_names) == robot.ros_joint_names
    q = np.array([m.points[0].positions[:7] for m in commands.messages])
    assert np.all(q >= robot.lower) and np.all(q <= robot.upper)
    assert safety.messages[-1]["mode"] == "policy"
    g.wait_for(lambda: sim_stats.messages, 10.0, "the simulated robot's loop statistics")
    # E-stop on an arm: hold the pose measured at the trip (every later command the same).
    e_stop = g.node.create_publisher(Bool, "/e_stop", 10)
    g.wait_for(lambda: e_stop.publish(Bool(data=True)) or
               safety.messages[-1]["mode"] == "e_stop", 10.0, "the e-stop to latch")
    n = len(commands.messages)
    g.wait_for(lambda: len(commands.messages) > n + 10, 10.0, "commands after the e-stop")
    held = np.array([m.points[0].positions for m in commands.messages[n + 2:]])
    np.testing.assert_array_equal(held, np.broadcast_to(held[0], held.shape))
    np.testing.assert_allclose(_position(ee.messages[-1]), targets[-1], atol=SUCCESS_RADIUS)
