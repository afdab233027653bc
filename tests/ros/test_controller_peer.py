"""The policy node behind a driver stack it did not write: a peer that applies
joint_trajectory_controller's acceptance rules and the robot's limits to every command.

The peer plays a Panda's ros2_control stack: a joint_state_broadcaster publishing
positions only (no velocities, as sensor_msgs allows) at 100 Hz with header stamps, and
a joint_trajectory_controller that checks each JointTrajectory as
``JointTrajectoryController::validate_trajectory_msg`` does (ros2_controllers,
joint_trajectory_controller.cpp, with its defaults ``allow_partial_joints_goal: false``,
``allow_nonzero_velocity_at_trajectory_end: false``, a position command interface) and
then, on the accepted ones, interpolates linearly from the current desired position to
the point (positions-only points) starting at the stamp, or on receipt for a zero stamp.
The arm follows the desired position exactly. Every command the node publishes must be
accepted and stay within robot.yaml's position, velocity and acceleration limits (as a
position stream at the control period) over a run with watchdog trips (during the soft
start and during the policy, short and long), an e-stop, its reset and the resume.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np
import pytest
from geometry_msgs.msg import PointStamped
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from trajectory_msgs.msg import JointTrajectory

from embodied_ros.description import deploy_nodes
from robots import load_robot

pytestmark = pytest.mark.timeout(240)  # a hung DDS process must not hang the suite
PANDA = load_robot("panda")
STATE_RATE_HZ = 100.0
# JTC subscribes to ~/joint_trajectory with the system default QoS (reliable, depth 10)
JTC_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


def _seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def jtc_rejection(msg: JointTrajectory, joints: list[str], now: float) -> str | None:
    """Why joint_trajectory_controller's ``validate_trajectory_msg`` drops ``msg`` (None:
    accepted), for a position-interface controller of ``joints`` at time ``now``."""
    if len(msg.joint_names) != len(joints):
        return "Joints on incoming trajectory don't match the controller joints."
    if not msg.joint_names:
        return "Empty joint names on incoming trajectory."
    if not msg.points:
        return "Empty trajectory received."
    for name in msg.joint_names:
        if name not in joints:
            return f"Incoming joint {name} doesn't match the controller's joints."
    if any(abs(v) > np.finfo(np.float32).eps for v in msg.points[-1].velocities):
        return "Velocity of last trajectory point is not zero"
    start = _seconds(msg.header.stamp)
    if start != 0.0 and start + _seconds(msg.points[-1].time_from_start) < now:
        return "Received trajectory with non-zero start time that ends in the past"
    previous = 0.0
    for i, point in enumerate(msg.points):
        t = _seconds(point.time_from_start)
        if i > 0 and t <= previous:
            return "Time between points is not strictly increasing"
        previous = t
        n = len(msg.joint_names)
        if len(point.positions) != n:
            return f"Mismatch between joint_names size and positions at point #{i}."
        for field in (point.velocities, point.accelerations):
            if len(field) not in (0, n):
                return f"Mismatch between joint_names size and a field at point #{i}."
        if len(point.effort):
            return "Trajectories with effort fields are only supported for effort interfaces"
    return None


class ControllerPeer:
    """A positions-only joint_state_broadcaster plus a joint_trajectory_controller."""

    def __init__(self, node, q0: np.ndarray):
        self.joints = PANDA.ros_joint_names
        self.fingers = list(PANDA.gripper.ros_names)
        self.lock = threading.Lock()
        self.segment = (0.0, q0.copy(), 0.0, q0.copy())  # (t0, p0, t1, p1) of the desired
        self.paused_until = 0.0
        self.accepted: list[np.ndarray] = []
        self.rejections: list[str] = []
        self.violations: list[str] = []
        self.state_pub = node.create_publisher(JointState, "/joint_states",
                                               qos_profile_sensor_data)
        node.create_subscription(JointTrajectory, "/joint_trajectory", self._on_trajectory,
                                 JTC_QOS)
        self.clock = node.get_clock()
        node.create_timer(1.0 / STATE_RATE_HZ, self._publish_state)

    def desired(self, t: float) -> np.ndarray:
        t0, p0, t1, p1 = self.segment
        if t >= t1:
            return p1.copy()
        s = max(0.0, (t - t0) / (t1 - t0))
        return p0 + s * (p1 - p0)

    def pause(self, seconds: float) -> None:
        """No joint states for ``seconds`` (a driver hiccup)."""
        self.paused_until = time.time() + seconds

    def _publish_state(self) -> None:
        now = time.time()
        if now < self.paused_until:
            return
        with self.lock:
            q = self.desired(now)
        msg = JointState(name=self.joints + self.fingers,
                         position=[float(v) for v in q] + [PANDA.gripper.upper] * 2)
        msg.header.stamp = self.clock.now().to_msg()
        self.state_pub.publish(msg)

    def _on_trajectory(self, msg: JointTrajectory, info) -> None:
        received = info["received_timestamp"] * 1e-9  # when the middleware had it
        reason = jtc_rejection(msg, self.joints, received)
        if reason is not None:
            self.rejections.append(reason)
            return
        order = [list(msg.joint_names).index(n) for n in self.joints]
        target = np.array(msg.points[-1].positions)[order]
        self._check_limits(target)
        start = _seconds(msg.header.stamp) or received
        with self.lock:
            self.segment = (start, self.desired(start), start +
                            _seconds(msg.points[-1].time_from_start), target)
        self.accepted.append(target)

    def _check_limits(self, target: np.ndarray) -> None:
        dt, k = PANDA.control_dt, len(self.accepted)
        if not np.all(np.isfinite(target)):
            self.violations.append(f"command {k}: non-finite {target.tolist()}")
            return
        if np.any(target < PANDA.lower) or np.any(target > PANDA.upper):
            self.violations.append(f"command {k}: outside the position limits")
        if k >= 1:
            v = (target - self.accepted[-1]) / dt
            if np.any(np.abs(v) > PANDA.velocity * (1 + 1e-9)):
                self.violations.append(f"command {k}: velocity {np.abs(v).max():.3f} rad/s")
        if k >= 2:
            a = (target - 2 * self.accepted[-1] + self.accepted[-2]) / dt**2
            if np.any(np.abs(a) > PANDA.acceleration * (1 + 1e-6) + 1e-6):
                self.violations.append(f"command {k}: acceleration {np.abs(a).max():.2f} "
                                       f"rad/s^2")


def _reasons(safety, t: float) -> list[str]:
    return [f"{m['mode']}: {m['reason']}" for m in safety.since(t)]


# A zero stamp starts on receipt, whatever the delivery time; a 'now' stamp needs a
# horizon beyond the worst delivery delay (the point must not lie in the past on arrival).
@pytest.mark.parametrize("stamp,horizon", [("zero", 0.02), ("now", 0.1)])
def test_a_trajectory_controller_accepts_every_command_within_limits(ros_graph, panda_policy,
                                                                     stamp, horizon):
    g = ros_graph
    safety = g.safety()
    offset = np.array([0.3, -0.2, 0.3, 0.3, -0.3, 0.3, 0.3])
    q0 = np.clip(PANDA.default_pose + offset, PANDA.lower + 0.1, PANDA.upper - 0.1)
    peer = ControllerPeer(g.node, q0)
    goal_pub = g.node.create_publisher(PointStamped, "/goal", 10)
    e_stop = g.node.create_publisher(Bool, "/e_stop", 10)
    (node,) = deploy_nodes("panda", str(panda_policy), autostart=True)
    g.launch([replace(node, overrides={**node.overrides, "trajectory_stamp": stamp,
                                       "trajectory_horizon": horizon, "soft_start_s": 3.0})])
    g.wait_mode(safety, "soft_start")
    g.wait_for(lambda: len(peer.accepted) > 25, 30.0, "soft-start commands")
    assert "estimating them by differencing" in g.logs()

    # A blip during the soft start: the ramp resumes where it stood.
    t = time.monotonic()
    peer.pause(0.15)
    g.wait_for(lambda: any("soft start resumes" in r for r in _reasons(safety, t)), 10.0,
               f"the soft start to resume: {_reasons(safety, t)}")

    goal = PointStamped()
    goal.point.x, goal.point.y, goal.point.z = 0.5, -0.2, 0.25
    g.wait_for(lambda: goal_pub.publish(goal) or safety.messages[-1]["mode"] == "policy",
               30.0, "the policy")
    time.sleep(1.0)
    # A short outage resumes the policy; a long one goes through a soft start again.
    t = time.monotonic()
    peer.pause(0.15)
    g.wait_for(lambda: any("policy resumes" in r for r in _reasons(safety, t)), 10.0,
               f"the policy to resume: {_reasons(safety, t)}")
    time.sleep(0.5)
    t = time.monotonic()
    peer.pause(1.0)
    g.wait_for(lambda: [m["mode"] for m in safety.since(t)][-2:] == ["soft_start", "policy"],
               30.0, f"soft start and policy after a long outage: {_reasons(safety, t)}")

    # E-stop: held (braking within the limits); released on the topic and reset: resumes.
    t = time.monotonic()
    g.wait_for(lambda: e_stop.publish(Bool(data=True)) or
               safety.messages[-1]["mode"] == "e_stop", 10.0, "the e-stop")
    time.sleep(0.5)
    e_stop.publish(Bool(data=False))
    g.wait_for(lambda: g.call_trigger("/embodied_policy/reset_e_stop").success, 10.0,
               "the e-stop reset")
    g.wait_for(lambda: [m["mode"] for m in safety.since(t)][-2:] == ["soft_start", "policy"],
               30.0, f"soft start and policy after the e-stop: {_reasons(safety, t)}")
    time.sleep(0.5)

    modes = [m["mode"] for m in safety.messages]
    assert modes.count("watchdog") >= 3 and "e_stop" in modes, modes
    assert len(peer.accepted) > 200, len(peer.accepted)
    assert peer.rejections == [], peer.rejections[:5]
    assert peer.violations == [], peer.violations[:5]
