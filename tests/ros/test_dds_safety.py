"""Safety of the policy node over real DDS, on the Go2 path (IMU, base velocity, velocity
command, damping): refusal of a mismatched artifact, activation only on fresh state, soft
start, the watchdog, NaN in the state, the e-stop. The policy is an untrained go2_walk
policy exported by the real export code (see conftest): none of this needs a walker."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest
from geometry_msgs.msg import Twist, TwistStamped
from lifecycle_msgs.msg import State
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, Float64MultiArray

from embodied_ros.description import deploy_nodes, policy_node, sim_deploy_nodes
from robots import load_robot

pytestmark = pytest.mark.timeout(180)  # a hung DDS process must not hang the suite
GO2 = load_robot("go2")


class Go2Player:
    """The test plays the robot: JointState, Imu and base velocity at the control rate."""

    def __init__(self, node, q: np.ndarray):
        self.q, self.enabled, self.nan = q, True, False
        self.quat = (1.0, 0.0, 0.0, 0.0)  # base orientation (w, x, y, z)
        self.sent: list[float] = []  # monotonic times of published JointStates
        self.js = node.create_publisher(JointState, "/joint_states", qos_profile_sensor_data)
        self.imu = node.create_publisher(Imu, "/imu", qos_profile_sensor_data)
        self.vel = node.create_publisher(TwistStamped, "/base_velocity",
                                         qos_profile_sensor_data)
        node.create_timer(GO2.control_dt, self._publish)

    def stop(self) -> None:
        """Stop publishing; returns once no publication is in progress."""
        self.enabled = False
        while True:
            n = len(self.sent)
            time.sleep(0.2)
            if len(self.sent) == n:
                return

    def _publish(self) -> None:
        if not self.enabled:
            return
        bad = math.nan if self.nan else 0.0
        msg = JointState(name=GO2.ros_joint_names, position=[float(v) + bad for v in self.q],
                         velocity=[0.0] * len(self.q))
        imu = Imu()
        o = imu.orientation
        o.w, o.x, o.y, o.z = (v + bad for v in self.quat)
        vel = TwistStamped()
        self.js.publish(msg)
        self.imu.publish(imu)
        self.vel.publish(vel)
        self.sent.append(time.monotonic())


def _targets(rec) -> np.ndarray:
    return np.array([m.data for m in rec.messages])


def test_mismatched_artifact_is_refused_at_configure(ros_graph, untrained_go2_policy,
                                                    panda_policy):
    g = ros_graph
    wrong_robot = policy_node("panda", str(untrained_go2_policy), namespace="a")
    wrong_policy = policy_node("go2", str(panda_policy), namespace="b")
    fits = policy_node("go2", str(untrained_go2_policy), namespace="c")
    safety = {ns: g.safety(f"/{ns}/embodied_policy") for ns in "abc"}
    g.launch([wrong_robot, wrong_policy, fits])
    assert not g.transition("/a/embodied_policy", "configure")
    assert not g.transition("/b/embodied_policy", "configure")
    for ns in "ab":
        refusal = g.wait_for(lambda ns=ns: [m for m in safety[ns].messages
                                            if "refused" in m["reason"]], 10.0, "refusal")
        assert "does not fit" in refusal[-1]["reason"]
    assert "robot: policy was trained for 'go2', this robot is 'panda'" in \
        safety["a"].messages[-1]["reason"]
    assert g.lifecycle_state("/a/embodied_policy", 30.0) == State.PRIMARY_STATE_UNCONFIGURED
    # The matching artifact configures, but no state has arrived: activation is refused.
    assert g.transition("/c/embodied_policy", "configure")
    assert g.lifecycle_state("/c/embodied_policy", 30.0) == State.PRIMARY_STATE_INACTIVE
    assert not g.transition("/c/embodied_policy", "activate")
    assert "no fresh state" in safety["c"].messages[-1]["reason"]


@pytest.mark.parametrize("trigger", ["timer", "state"])
def test_soft_start_watchdog_and_attitude_cut_off(ros_graph, untrained_go2_policy,
                                                             trigger):
    g = ros_graph
    safety = g.safety()
    commands = g.record(Float64MultiArray, "/joint_position_targets")
    start = np.clip(GO2.default_pose + 0.3, GO2.lower + 0.05, GO2.upper - 0.05)
    player = Go2Player(g.node, start)
    (node,) = deploy_nodes("go2", str(untrained_go2_policy), autostart=True)
    g.launch([replace(node, overrides={**node.overrides, "trigger": trigger})])
    g.wait_mode(safety, "soft_start")
    g.wait_mode(safety, "policy")
    # Soft start: from the measured pose (0.3 rad from default), smoothly to the default
    # pose, before any policy command.
    ramp = _targets(commands)
    dist = np.abs(ramp - GO2.default_pose).max(axis=1)
    assert dist[0] > 0.2 and dist.min() < 0.01, f"ramp distances {dist.round(3).tolist()}"
    ramp = ramp[:int(np.argmax(dist < 0.01)) + 1]  # up to the default pose
    steps = np.abs(np.diff(ramp, axis=0)).max(axis=1)
    assert np.all(steps <= 0.5 + 1e-9), steps  # max_target_step (go2.yaml)

    g.wait_for(lambda: len(commands.messages) > len(ramp) + 10, 10.0, "policy commands")
    player.stop()
    last_state = player.sent[-1]
    trip = g.wait_for(lambda: [m for m in safety.since(last_state) if m["mode"] == "watchdog"],
                      10.0, "the watchdog")[0]
    # The node's own account: it tripped on the age of its oldest input (a lost IMU message
    # under load can trip it first); how soon, in control steps, the commands below say.
    age, max_age = max(trip["state_age_s"].values()), trip["max_age_s"]
    assert max_age < age < max_age + 0.5, trip
    # What the node sent after the last state left the player: policy commands for at
    # most three control periods (one more while that state was in flight), then only
    # damping (targets = the measured pose), reached within the joints' velocity limits
    # (the steps that takes from the farthest of those targets).
    g.wait_for(lambda: len(commands.since(last_state)) >= 12, 10.0, "safe commands")
    after = np.array([m.data for m in commands.since(last_state)])
    damping = np.all(np.abs(after - start) < 1e-9, axis=1)
    other = np.flatnonzero(~damping)  # policy or soft-start targets, and the way back
    modes = [m["mode"] for m in safety.messages]
    to_pose = np.abs(after[other] - start).max(axis=0) if other.size else np.zeros(12)
    limit_steps = int(np.ceil(np.max(to_pose / (GO2.velocity * GO2.control_dt))))
    assert other.size == 0 or other[-1] < 4 + limit_steps, (damping.tolist(), modes, trip)

    # Fresh state again, but the base is tilted 1 rad (> attitude_limit 0.8): the attitude
    # cut-off latches damping instead of a soft start.
    player.quat = (math.cos(0.5), math.sin(0.5), 0.0, 0.0)
    player.enabled = True
    cut = g.wait_mode(safety, "attitude")
    assert "tilt 1.00 rad" in cut["reason"]
    n = len(commands.messages)
    g.wait_for(lambda: len(commands.messages) > n + 5, 10.0, "commands after the cut-off")
    after_cut = _targets(commands)[n:]
    assert np.all(after_cut == start), after_cut


def test_nan_state_never_reaches_a_command(ros_graph, untrained_go2_policy):
    g = ros_graph
    safety = g.safety()
    commands = g.record(Float64MultiArray, "/joint_position_targets")
    player = Go2Player(g.node, GO2.default_pose.copy())
    cmd_vel = g.node.create_publisher(Twist, "/cmd_vel", 10)
    g.launch(deploy_nodes("go2", str(untrained_go2_policy), autostart=True))
    g.wait_mode(safety, "policy")
    bad = Twist()
    bad.linear.x = math.nan
    cmd_vel.publish(bad)
    player.nan = True
    g.wait_mode(safety, "watchdog")  # NaN state is rejected, so the state goes stale
    n = len(commands.messages)
    g.wait_for(lambda: len(commands.messages) > n + 10, 10.0, "commands during NaN state")
    player.nan = False
    g.wait_for(lambda: safety.messages[-1]["mode"] == "policy", 20.0,
               "the policy again once the state is valid (after a soft start)")
    targets = _targets(commands)
    assert len(targets) > 20 and np.all(np.isfinite(targets))
    assert np.all(targets >= GO2.lower) and np.all(targets <= GO2.upper)
    assert "rejected" in g.logs()
    # Stopping the node (SIGINT) sends the safe command last: damping at the measured pose.
    g.wait_for(lambda: not np.allclose(commands.messages[-1].data, GO2.default_pose), 10.0,
               "the policy's own targets (not the default pose)")
    assert g.processes[0].stop() == [0]
    np.testing.assert_allclose(commands.messages[-1].data, GO2.default_pose, atol=1e-12)


def test_e_stop_brings_the_robot_to_rest_in_damping(ros_graph, untrained_go2_policy):
    g = ros_graph
    safety = g.safety()
    states = g.record(JointState, "/joint_states", qos_profile_sensor_data)
    commands = g.record(Float64MultiArray, "/joint_position_targets")
    e_stop = g.node.create_publisher(Bool, "/e_stop", 10)
    g.launch(sim_deploy_nodes("go2", str(untrained_go2_policy)))
    g.wait_mode(safety, "policy")

    def stopped():
        e_stop.publish(Bool(data=True))
        return any(m["mode"] == "e_stop" for m in safety.messages)

    g.wait_for(stopped, 10.0, "the e-stop to latch")

    def at_rest():
        if not states.messages:
            return False
        return np.abs(np.array(states.messages[-1].velocity)).max() < 0.05

    g.wait_for(at_rest, 30.0, "the damped robot to come to rest")
    time.sleep(0.2)
    # Pure damping: the targets are the measured pose (kept joint_limit_margin inside the
    # limits: a calf resting on its stop gets its target 0.02 rad inside).
    q = np.clip(states.messages[-1].position[:12], GO2.lower + 0.02, GO2.upper - 0.02)
    np.testing.assert_allclose(np.array(commands.messages[-1].data), q, atol=2e-3)
    assert safety.messages[-1]["mode"] == "e_stop"  # latched while the state is fresh
    # Deactivate + activate does not release it, nor does the reset while it is asserted.
    assert g.transition("/embodied_policy", "deactivate")
    assert not g.transition("/embodied_policy", "activate")
    assert "e-stop latched" in safety.messages[-1]["reason"]
    assert not g.call_trigger("/embodied_policy/reset_e_stop").success
    # Released on the topic, then reset: activation works and starts a soft start.
    e_stop.publish(Bool(data=False))
    g.wait_for(lambda: g.call_trigger("/embodied_policy/reset_e_stop").success, 10.0,
               "the e-stop reset")
    assert g.transition("/embodied_policy", "activate")
    g.wait_mode(safety, "soft_start")
