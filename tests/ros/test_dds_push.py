"""The panda_push path of the bridge over real DDS: the object pose as a policy input (the
simulated robot publishes it; missing or stale, the node holds the arm and says so once),
ee_delta actions at the policy's 20 Hz through the IK, every command within the robot's
position and velocity limits; and an action-chunking policy starts afresh at the hand-over
from the soft start. The policies are small test policies exported by the real export
code (see conftest): none of this needs a trained pusher."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest
import torch
from geometry_msgs.msg import PointStamped, PoseStamped
from rclpy.qos import qos_profile_sensor_data
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from embodied_ros.description import deploy_nodes, sim_deploy_nodes
from embodied_ros.safety import limit_shares
from robots import load_robot
from robots.kinematics import SiteKinematics

pytestmark = pytest.mark.timeout(180)  # a hung DDS process must not hang the suite
PANDA = load_robot("panda")
PUSH_DT = 0.05  # the push test policy's control period (20 Hz)


def _point(x: float, y: float, z: float = 0.0) -> PointStamped:
    msg = PointStamped()
    msg.header.frame_id = "panda_link0"
    msg.point.x, msg.point.y, msg.point.z = x, y, z
    return msg


def _pose(x: float, y: float, z: float) -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = "panda_link0"
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = x, y, z
    msg.pose.orientation.w = 1.0
    return msg


def _mode(safety) -> str:
    """The policy node's newest mode ('' before its first safety message)."""
    return safety.messages[-1]["mode"] if safety.messages else ""


def _arm(rec) -> np.ndarray:
    """Arm joint targets [n, 7] of recorded JointTrajectory commands."""
    return np.array([m.points[0].positions[:7] for m in rec.messages])


class PandaPlayer:
    """The test plays the robot (a still Panda at the default pose) and, while ``object_on``,
    a perception system publishing the cube's pose, both at 20 Hz."""

    def __init__(self, node):
        self.object_on = False
        self.sent: list[float] = []  # monotonic times of published object poses
        names = PANDA.ros_joint_names + list(PANDA.gripper.ros_names)
        q = list(PANDA.default_pose) + [PANDA.gripper.upper] * 2
        self.state = JointState(name=names, position=[float(v) for v in q],
                                velocity=[0.0] * len(q))
        self.js = node.create_publisher(JointState, "/joint_states", qos_profile_sensor_data)
        self.obj = node.create_publisher(PoseStamped, "/object_pose", qos_profile_sensor_data)
        node.create_timer(PUSH_DT, self._publish)

    def _publish(self) -> None:
        if self.object_on:
            self.obj.publish(_pose(0.5, 0.0, 0.025))
            self.sent.append(time.monotonic())
        self.js.publish(self.state)


def test_push_node_holds_the_arm_while_the_object_pose_is_missing_or_stale(
        ros_graph, push_test_policy):
    g = ros_graph
    safety = g.safety()
    commands = g.record(JointTrajectory, "/joint_trajectory")
    player = PandaPlayer(g.node)
    goal = g.node.create_publisher(PointStamped, "/goal", 10)
    (node,) = deploy_nodes("panda", str(push_test_policy), autostart=True)
    g.launch([replace(node, overrides={**node.overrides, "soft_start_s": 0.2})])
    # Missing from the start: after the soft start the node holds and says why.
    g.wait_for(lambda: goal.publish(_point(0.6, 0.1)) or
               any(m["mode"] == "object_stale" for m in safety.messages), 30.0,
               "the hold for want of an object pose")
    assert "no object_pose yet: holding the arm" in safety.messages[-1]["reason"]
    t = time.monotonic()
    g.wait_for(lambda: len(commands.since(t)) > 10, 10.0, "commands while holding")
    held = _arm(commands)[-8:]
    np.testing.assert_array_equal(held, np.broadcast_to(held[0], held.shape))
    # The pose arrives: the policy takes over and moves the targets.
    player.object_on = True
    g.wait_for(lambda: _mode(safety) == "policy", 10.0, "the policy")
    assert "object_pose fresh again" in safety.messages[-1]["reason"]
    t = time.monotonic()
    g.wait_for(lambda: len(commands.since(t)) > 10, 10.0, "policy commands")
    moving = np.array([m.points[0].positions[:7] for m in commands.since(t)])
    assert np.abs(np.diff(moving, axis=0)).max() > 1e-3
    # It stops: one object_stale message with the pose's age, then the targets brake to a
    # stop (at most v_max / a_max = 0.29 s: 6 commands) and stay.
    player.object_on = False
    time.sleep(0.1)
    last = player.sent[-1]
    trip = g.wait_for(lambda: [m for m in safety.since(last) if m["mode"] == "object_stale"],
                      10.0, "the hold for a stale object pose")[0]
    assert "object_pose 0.3" in trip["reason"] and "s old (max 0.3 s)" in trip["reason"]
    g.wait_for(lambda: len(commands.since(last)) > 20, 10.0, "commands while holding")
    held = np.array([m.points[0].positions[:7] for m in commands.since(last)][-10:])
    np.testing.assert_array_equal(held, np.broadcast_to(held[0], held.shape))
    assert [m["mode"] for m in safety.since(last)] == ["object_stale"]


def test_push_policy_runs_on_the_simulated_robot_within_the_limits(ros_graph,
                                                                    push_test_policy):
    g = ros_graph
    safety = g.safety()
    commands = g.record(JointTrajectory, "/joint_trajectory")
    cube = g.record(PoseStamped, "/object_pose", qos_profile_sensor_data)
    # every tick kept in the reader's queue even when this process is slow to take them
    clock = g.record(Clock, "/clock", 1000)
    place = g.node.create_publisher(PoseStamped, "/sim_robot/place_object", 10)
    goal = g.node.create_publisher(PointStamped, "/goal", 10)
    policy, robot = sim_deploy_nodes("panda", str(push_test_policy))
    # Commands stamped with the node's clock, the simulation's: their control steps.
    g.launch([replace(policy, overrides={**policy.overrides, "trajectory_stamp": "now"}),
              robot])
    g.wait_for(lambda: cube.messages, 60.0, "the cube's pose from the simulated robot")

    def placed():
        place.publish(_pose(0.45, -0.1, 0.025))
        p = cube.messages[-1].pose.position
        return abs(p.x - 0.45) < 1e-3 and abs(p.y + 0.1) < 1e-3

    g.wait_for(placed, 10.0, "the cube where it was placed")
    g.wait_for(lambda: goal.publish(_point(0.6, 0.1)) or
               _mode(safety) == "policy", 60.0, "the policy")
    t = time.monotonic()
    g.wait_for(lambda: len(commands.since(t)) > 60, 60.0, "policy commands")
    assert "object_stale" not in [m["mode"] for m in safety.messages]
    # The simulated robot steps at the policy's 20 Hz (its simulation clock).
    ticks = np.diff([m.clock.sec + m.clock.nanosec * 1e-9 for m in clock.messages])
    np.testing.assert_allclose(ticks, PUSH_DT, atol=1e-9)
    # The commands name the arm and the finger joints; the saturated policy drives the ee
    # target hard: every arm target stays inside the position limits, and as a stream on
    # the control grid (a command the probe missed is a gap) within the velocity and
    # acceleration limits; the fingers follow the gripper action.
    assert list(commands.messages[-1].joint_names) == \
        PANDA.ros_joint_names + list(PANDA.gripper.ros_names)
    policy_commands = commands.since(t)
    stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9
                       for m in policy_commands])
    q = np.array([m.points[0].positions[:7] for m in policy_commands])
    used = limit_shares(stamps, q, PANDA, PUSH_DT)
    assert used["beyond_position_limit_rad"] == 0.0, used
    assert used["velocity_share"] <= 1 + 1e-9 and used["acceleration_share"] <= 1 + 1e-6, used
    assert used["velocity_share"] > 0.1  # the arm was commanded to move
    fingers = {round(m.points[0].positions[7], 9) for m in commands.since(t)}
    assert fingers <= {PANDA.gripper.lower, PANDA.gripper.upper} and len(fingers) == 2


def test_chunking_policy_starts_afresh_at_the_hand_over(ros_graph, chunked_reach_policy):
    g = ros_graph
    safety = g.safety()
    commands = g.record(JointTrajectory, "/joint_trajectory")
    goal = g.node.create_publisher(PointStamped, "/goal", 10)
    policy, robot = sim_deploy_nodes("panda", str(chunked_reach_policy))
    g.launch([replace(policy, overrides={**policy.overrides, "soft_start_s": 0.3}), robot])
    tcp = SiteKinematics.from_robot(PANDA, "ee").position(
        torch.as_tensor(PANDA.default_pose)[None]).numpy()[0]
    g_open, g_close = PANDA.gripper.upper, PANDA.gripper.lower
    # A goal ahead of the tcp: the chunks say "open"; they fill the ensemble's history.
    g.wait_for(lambda: goal.publish(_point(tcp[0] + 0.15, 0.0, tcp[2])) or
               _mode(safety) == "policy", 60.0, "the policy")
    t = time.monotonic()
    # More than three of the fixture's 4-step chunks.
    g.wait_for(lambda: len(commands.since(t)) > 12, 10.0, "policy commands")
    # A goal behind the tcp, then a new activation: soft start, hand-over. The chunks now
    # say "close"; the predictions from before the hand-over ("open") must not be mixed in.
    assert g.transition("/embodied_policy", "deactivate")
    for _ in range(5):
        goal.publish(_point(tcp[0] - 0.15, 0.0, tcp[2]))
        time.sleep(0.05)
    t = time.monotonic()
    assert g.transition("/embodied_policy", "activate")
    g.wait_for(lambda: [m for m in safety.since(t) if m["mode"] == "policy"], 30.0,
               "the hand-over")
    g.wait_for(lambda: len(commands.since(t)) > 30, 10.0, "commands after the hand-over")
    fingers = [round(m.points[0].positions[7], 9) for m in commands.since(t)]
    # Soft start (open, the reset's gripper), then only "close": nothing in between.
    assert set(fingers) == {g_open, g_close}, fingers
    first = fingers.index(g_close)
    assert fingers[first:] == [g_close] * (len(fingers) - first), fingers
