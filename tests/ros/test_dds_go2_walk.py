"""A Go2 walking policy deployed through ROS 2 keeps the simulated robot upright and moving
under a forward velocity command for 10 s (runs once assets/policies/go2_walk/ exists)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from geometry_msgs.msg import PoseStamped, Twist

from embodied_ros.description import sim_deploy_nodes
from embodied_ros.safety import tilt_from_quat
from sim.tasks.go2_walk import FALL_HEIGHT, FALL_TILT

pytestmark = pytest.mark.timeout(180)  # a hung DDS process must not hang the suite
COMMAND_VX = 0.5  # m/s
WALK_S = 10.0


def test_go2_policy_through_ros_walks_upright(ros_graph, go2_walk_policy):
    g = ros_graph
    safety = g.safety()
    poses = g.record(PoseStamped, "/ground_truth/base_pose")
    cmd_vel = g.node.create_publisher(Twist, "/cmd_vel", 10)
    g.launch(sim_deploy_nodes("go2", str(go2_walk_policy)))
    g.wait_mode(safety, "policy")
    cmd = Twist()
    cmd.linear.x = COMMAND_VX
    start = time.monotonic()
    g.wait_for(lambda: poses.messages, 10.0, "ground-truth base poses")
    first = poses.messages[-1].pose
    while time.monotonic() - start < WALK_S:
        cmd_vel.publish(cmd)
        time.sleep(0.1)
    walked = poses.since(start)
    heights = np.array([m.pose.position.z for m in walked])
    tilts = np.array([tilt_from_quat(np.array([m.pose.orientation.w, m.pose.orientation.x,
                                               m.pose.orientation.y, m.pose.orientation.z]))
                      for m in walked])
    assert heights.min() > FALL_HEIGHT and tilts.max() < FALL_TILT  # upright throughout
    q = first.orientation
    yaw = np.arctan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
    moved = np.array([walked[-1].pose.position.x - first.position.x,
                      walked[-1].pose.position.y - first.position.y])
    forward = moved @ np.array([np.cos(yaw), np.sin(yaw)])
    assert forward > 0.25 * COMMAND_VX * WALK_S, f"walked {forward:.2f} m forward"
