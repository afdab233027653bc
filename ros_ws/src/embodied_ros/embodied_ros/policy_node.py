"""The policy node: runs an exported policy on a robot's ROS 2 topics, with safety.

A lifecycle node (``embodied_policy``):

* **configure** loads the robot spec (``robots.load_robot``) and the exported policy
  (``embodied.policy_io.load_policy``) and refuses, with the reason logged and published
  on ``~/safety_state``, an artifact that does not fit the robot
  (``embodied.policy_io.check_against_robot``), a task it has no observation builder for,
  or a ``control_dt`` parameter that differs from the policy's control period (0: run at
  the policy's period, the one it was trained at);
* **activate** succeeds only once fresh state has arrived and no e-stop is latched; it
  starts a soft start (a ramp from the measured pose to the default pose), then hands
  over to the policy;
* **deactivate** / shutdown / SIGINT send the safe command once.

Topics (relative, so a namespace applies; remap them for a given robot):

========================  =============================  ==============================
``joint_states``          sensor_msgs/JointState  in     joints mapped by name
``imu``                   sensor_msgs/Imu         in     legged: orientation, gyro
``base_velocity``         geometry_msgs/TwistStamped in  legged: base-frame velocity
``cmd_vel``               geometry_msgs/Twist     in     legged: (vx, vy, yaw rate)
``goal``                  geometry_msgs/PointStamped in  arm: reach target / push goal, base frame
``object_pose``           geometry_msgs/PoseStamped in   the pushed object (panda_push), base frame
``e_stop``                std_msgs/Bool           in     true latches the safe state
``~/reset_e_stop``        std_srvs/Trigger      service  releases a latched e-stop
``joint_trajectory``      trajectory_msgs/JointTrajectory out (``output: joint_trajectory``)
``joint_position_targets`` std_msgs/Float64MultiArray out (``output: position_array``)
``~/safety_state``        std_msgs/String (JSON)  out    mode and reason, on every change
``~/loop_stats``          std_msgs/String (JSON)  out    rate, jitter, latency p50/p99
========================  =============================  ==============================

Safety (parameters in ``config/<robot>.yaml``): a watchdog on the state's age (receipt
time and header stamp against the node's clock; older than ``watchdog_periods`` control
periods -> safe state; fresh again after ``watchdog_recover_periods`` of steady state;
then the policy, or an interrupted soft start, resumes after an outage shorter than
``resume_window_s``, else a soft start runs again);
a task whose policy observes an object (panda_push's cube) holds the arm (mode
``object_stale``, said once) while its ``object_pose`` is missing or older than
``object_max_age_s`` and restarts the policy, as at a hand-over, once it is fresh again;
the safe state itself (``hold``: the targets brake to a stop as fast as the acceleration
limits allow and stay there, arms; ``damp``:
targets follow the measured pose so only the D term acts, legged robots); clamps on
observations, joint targets (limits with a margin), per-step target change and the PD
torque estimate; an e-stop topic (latched until ``~/reset_e_stop`` while the topic says
false; activation is refused while latched); an attitude cut-off for legged robots; a
non-finite check in front of every published command; and, last, the robot's velocity
and acceleration limits on every published target (:class:`embodied_ros.safety.
CommandLimiter`). A JointState without velocities is accepted: velocities are then
estimated by differencing positions (logged once).

Each JointTrajectory has one point ``trajectory_horizon`` after its stamp; the stamp is
zero (``trajectory_stamp: zero``: a joint_trajectory_controller starts it on receipt)
or the node's clock at publishing (``now``), so the controller never finds it already
ended.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np
import rclpy
import torch
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import PointStamped, PoseStamped, Twist, TwistStamped
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.duration import Duration
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from embodied.policy_io import ExportError, check_against_robot, load_policy, policy_control_dt
from embodied_ros.description import POLICY_NODE, as_bool
from embodied_ros.messages import (
    DifferencedVelocity,
    JointIndex,
    StateError,
    array_message,
    imu_arrays,
    joint_state_arrays,
    trajectory_message,
    vector3,
)
from embodied_ros.observation import ObservationBuilder, RobotState, make_builder
from embodied_ros.params import PARAMETERS, ConfigError, Params
from embodied_ros.safety import (
    CommandLimiter,
    LoopStats,
    TargetLimits,
    Watchdog,
    clamp_targets,
    soft_start_targets,
    tilt_from_quat,
)
from embodied_ros.spin import spin_until_signal
from robots import RobotSpecError, load_robot
from robots.actions import action_map_from_metadata

# Modes in which the safe command is sent; the first three latch (e_stop until the reset
# service, the others until re-activation).
LATCHED = ("e_stop", "attitude", "non_finite_action")
SAFE_STATES = (*LATCHED, "watchdog", "non_finite_observation", "object_stale")
# State in: newest only, never block the sender. Commands out: reliable depth 1 (matches
# the reliable subscriptions of ros2_control controllers and best-effort readers alike).
STATE_QOS = qos_profile_sensor_data
COMMAND_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         history=HistoryPolicy.KEEP_LAST)
LATCHED_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)

def _cast(default: Any, value: Any) -> Any:
    """A parameter value as the type of its default ('false' and 0 are false)."""
    if isinstance(default, bool):
        return as_bool(value) if isinstance(value, str) else bool(value)
    try:
        return type(default)(value)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"parameter value {value!r} is not a {type(default).__name__}") \
            from err


class PolicyNode(LifecycleNode):
    """Lifecycle node running an exported policy with the safety layer (module docstring)."""

    def __init__(self, **kwargs: Any):
        super().__init__(POLICY_NODE, **kwargs)
        for name, default in PARAMETERS.items():  # typed in _params (2 for 2.0 is fine)
            self.declare_parameter(name, default, ParameterDescriptor(dynamic_typing=True))
        self.safety_pub = self.create_publisher(String, "~/safety_state", LATCHED_QOS)
        self.stats_pub = self.create_publisher(String, "~/loop_stats", 10)
        self.mode, self.reason = "unconfigured", ""
        self.active = False
        self.lifecycle_state = "unconfigured"  # primary state, kept by the callbacks below
        self._ros_objects: list[Any] = []
        self._startup = None
        if self.get_parameter("autostart").value:
            self._startup = self.create_timer(0.05, self._autostart)
        self._publish_safety()

    def now(self) -> float:
        """Seconds on the node's clock (system time, or simulation time with use_sim_time).

        The watchdog, the soft start and the resume window run on it.
        """
        return self.get_clock().now().nanoseconds * 1e-9

    # ------------------------------------------------------------ lifecycle
    def _params(self) -> Params:
        values = {n: self.get_parameter(n).value for n in PARAMETERS}
        params = Params(**{k: _cast(PARAMETERS[k], v) for k, v in values.items()})
        params.check()
        return params

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Load and check the robot spec and the policy; create topics and the loop timer."""
        try:
            self._configure()
        except (ConfigError, ExportError, RobotSpecError, FileNotFoundError, ValueError) as err:
            self.get_logger().error(f"configure refused: {err}")
            self._set_mode("unconfigured", f"configure refused: {err}")
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info(
            f"configured: {self.meta['task']} policy {self.p.policy_path} on robot "
            f"'{self.robot.name}', {1 / self.control_dt:.0f} Hz, output {self.p.output}")
        self._set_mode("inactive", "configured")
        self.lifecycle_state = "inactive"
        return TransitionCallbackReturn.SUCCESS

    def _configure(self) -> None:
        p = self.p = self._params()
        robot = self.robot = load_robot(p.robot)
        self.policy, self.meta = load_policy(p.policy_path)
        check_against_robot(self.meta, robot)
        dt = self.control_dt = policy_control_dt(self.meta, p.control_dt)
        builder: ObservationBuilder = make_builder(str(self.meta.get("task")), robot,
                                                   self.meta.get("task_settings"))
        if int(self.meta["obs_dim"]) != builder.obs_dim:
            raise ConfigError(f"policy takes {self.meta['obs_dim']} observations, task "
                              f"'{builder.task}' builds {builder.obs_dim}")
        builder.check_terms(self.meta.get("observation") or [])
        if builder.legged and p.safe_mode != "damp":
            self.get_logger().warning("legged robot with safe_mode 'hold': 'damp' is safer")
        self.builder = builder
        torch.set_num_threads(1)
        action = self.meta.get("action") or {}
        self.action_map = action_map_from_metadata(action, robot, dt)
        self.limits = TargetLimits.from_robot(robot, p.joint_limit_margin, p.max_target_step,
                                              p.torque_limit_scale)
        self.joints = JointIndex(robot.ros_joint_names)
        self.fingers = JointIndex(list(robot.gripper.ros_names)) if robot.gripper else None
        with_fingers = p.command_gripper and robot.gripper is not None
        self.command_names = robot.ros_joint_names + (list(robot.gripper.ros_names)
                                                      if with_fingers else [])
        inputs = ["joint_states"] + (["imu", "base_velocity"] if builder.legged else [])
        self.watchdogs = {name: Watchdog(p.watchdog_periods * dt,
                                         p.watchdog_recover_periods * dt)
                          for name in inputs}
        self.limiter = CommandLimiter.from_robot(robot, self.limits, dt)
        # The object's age alone decides (no hysteresis): the arm is held meanwhile.
        self.object_watchdog = Watchdog(p.object_max_age_s, 0.0) if builder.needs_object \
            else None
        self.object: tuple[np.ndarray, np.ndarray] | None = None  # (position, quaternion)
        self.velocity_estimate: DifferencedVelocity | None = None
        self.stats = LoopStats(dt)
        self.state: RobotState | None = None
        self.imu: tuple[np.ndarray, np.ndarray] | None = None
        self.base_vel: np.ndarray | None = None
        self.command = np.zeros(3)
        self.goal: np.ndarray | None = None
        self.rejected = 0
        self.e_stop_asserted = self.e_stop_latched = False
        self.last_step = -math.inf
        self._reset_control()

        sub = self.create_subscription
        objs = [sub(Bool, "e_stop", self._on_e_stop, 10)]
        if builder.legged:
            objs += [sub(Imu, "imu", self._on_imu, STATE_QOS),
                     sub(TwistStamped, "base_velocity", self._on_base_velocity, STATE_QOS),
                     sub(Twist, "cmd_vel", self._on_cmd_vel, 10)]
        else:
            objs.append(sub(PointStamped, "goal", self._on_goal, 10))
        if builder.needs_object:
            objs.append(sub(PoseStamped, "object_pose", self._on_object_pose, STATE_QOS))
        # Last: the executor serves ready subscriptions in creation order, so IMU, base
        # velocity and goal messages that arrived with a JointState are taken before it
        # (with trigger 'state' the JointState starts the control step).
        objs.append(sub(JointState, "joint_states", self._on_joint_state, STATE_QOS))
        if p.output == "joint_trajectory":
            self.command_pub = self.create_publisher(JointTrajectory, "joint_trajectory",
                                                     COMMAND_QOS)
        else:
            self.command_pub = self.create_publisher(Float64MultiArray,
                                                     "joint_position_targets", COMMAND_QOS)
        self.control_timer = self.create_timer(dt, self._on_timer)
        timers = [self.control_timer, self.create_timer(p.stats_period_s, self._publish_stats)]
        reset = self.create_service(Trigger, "~/reset_e_stop", self._on_reset_e_stop)
        self._ros_objects = [(self.destroy_service, reset),
                             *[(self.destroy_subscription, s) for s in objs],
                             (self.destroy_publisher, self.command_pub),
                             *[(self.destroy_timer, t) for t in timers]]

    def _reset_control(self) -> None:
        g = self.robot.gripper
        self.last_action = np.zeros(self.action_map.action_dim)
        if g is not None and self.action_map.gripper_dim:
            self.last_action[-1] = 1.0  # gripper open, as at a training reset
        self.target: np.ndarray | None = None  # arm/leg joint targets last sent
        self.finger_target = np.full(len(g.joints), g.upper) if g else np.zeros(0)
        self.hold_target: np.ndarray | None = None
        self.soft_start_from: np.ndarray | None = None
        self.soft_start_t0 = 0.0
        self.safe_since, self.interrupted = 0.0, ""

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Start the soft start, only if every state input is fresh and no e-stop latched."""
        now = self.now()
        if self.e_stop_latched:
            reason = "activation refused: e-stop latched (" + (
                "the e_stop topic still says true" if self.e_stop_asserted else
                "call ~/reset_e_stop") + ")"
            self.get_logger().warning(reason)
            self._set_mode("e_stop", reason)
            return TransitionCallbackReturn.FAILURE
        stale = {n: w.age(now) for n, w in self.watchdogs.items() if not w.fresh(now)}
        if stale or self.state is None:
            ages = ", ".join(f"{n} {a:.3f} s old" if math.isfinite(a) else f"no {n} yet"
                             for n, a in stale.items())
            self.get_logger().warning(f"activation refused: no fresh state ({ages})")
            self._set_mode("inactive", f"activation refused: no fresh state ({ages})")
            return TransitionCallbackReturn.FAILURE
        self._reset_control()
        self.limiter.reset(self.state.q)
        self._start_soft_start(now)
        self.active = True
        self.lifecycle_state = "active"
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Send the safe command once and stop commanding."""
        self.send_safe_command("deactivated")
        self.active = False
        self._set_mode("inactive", "deactivated")
        self.lifecycle_state = "inactive"
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Drop the policy, topics and timers."""
        self._destroy_ros_objects()
        self._set_mode("unconfigured", "cleaned up")
        self.lifecycle_state = "unconfigured"
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Safe command, then drop everything."""
        self.send_safe_command("shutdown")
        self.active = False
        self._destroy_ros_objects()
        self._set_mode("finalized", "shutdown")
        self.lifecycle_state = "finalized"
        return TransitionCallbackReturn.SUCCESS

    def _destroy_ros_objects(self) -> None:
        for destroy, obj in self._ros_objects:
            destroy(obj)
        self._ros_objects = []
        if hasattr(self, "command_pub"):
            del self.command_pub

    def _autostart(self) -> None:
        """autostart: configure once, then activate as soon as state is fresh."""
        label = self.lifecycle_state
        if label == "unconfigured":
            if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                self.destroy_timer(self._startup)  # the error is logged; do not retry
        elif label == "inactive" and self.state is not None and \
                all(w.fresh(self.now()) for w in self.watchdogs.values()):
            self.trigger_activate()
        elif label != "inactive":
            self.destroy_timer(self._startup)

    # ------------------------------------------------------------- inputs
    def _on_joint_state(self, msg: JointState) -> None:
        try:
            q, qd, finger = joint_state_arrays(msg, self.joints, self.fingers)
        except StateError as err:
            self._reject("joint_states", err)
            return
        now = self.now()
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        if qd is None:
            qd = self._estimate_velocity(q, stamp or now)
        if self.state is None:
            self.state = RobotState(q, qd, finger)
        else:
            self.state.q, self.state.qd, self.state.finger_q = q, qd, finger
        self.watchdogs["joint_states"].state_received(now, stamp)
        if self.p.trigger == "state" and now - self.last_step >= 0.5 * self.control_dt:
            self._step(now)  # act on the newest state at once (at most ~2x the control rate)

    def _estimate_velocity(self, q: np.ndarray, t: float) -> np.ndarray:
        """Joint velocities by differencing, for a JointState without any (said once)."""
        if self.velocity_estimate is None:
            self.velocity_estimate = DifferencedVelocity()
            self.get_logger().warning("joint_states carry no velocities: estimating them by "
                                      "differencing positions over the header stamps "
                                      "(receipt times when unstamped)")
        return self.velocity_estimate(q, t)

    def _on_imu(self, msg: Imu) -> None:
        try:
            self.imu = imu_arrays(msg)
        except StateError as err:
            self._reject("imu", err)
            return
        self.watchdogs["imu"].state_received(self.now())

    def _on_base_velocity(self, msg: TwistStamped) -> None:
        v = vector3(msg.twist.linear)
        if not np.all(np.isfinite(v)):
            self._reject("base_velocity", StateError(f"non-finite base velocity {v.tolist()}"))
            return
        self.base_vel = v
        self.watchdogs["base_velocity"].state_received(self.now())

    def _reject(self, topic: str, err: Exception) -> None:
        """A state message that is not used: it does not refresh the watchdog."""
        self.rejected += 1
        self.get_logger().warning(f"{topic} message rejected ({self.rejected} so far): {err}",
                                  throttle_duration_sec=1.0)

    def _on_cmd_vel(self, msg: Twist) -> None:
        cmd = np.array([msg.linear.x, msg.linear.y, msg.angular.z])
        if np.all(np.isfinite(cmd)):
            self.command = cmd

    def _on_goal(self, msg: PointStamped) -> None:
        goal = vector3(msg.point)
        if np.all(np.isfinite(goal)):
            self.goal = goal

    def _on_object_pose(self, msg: PoseStamped) -> None:
        pos = vector3(msg.pose.position)
        o = msg.pose.orientation
        quat = np.array([o.w, o.x, o.y, o.z], dtype=np.float64)
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat))) or \
                np.linalg.norm(quat) < 0.5:
            self._reject("object_pose", StateError(f"invalid object pose: position "
                                                   f"{pos.tolist()}, orientation {quat.tolist()}"))
            return
        self.object = pos, quat / np.linalg.norm(quat)
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.object_watchdog.state_received(self.now(), stamp)

    def _on_e_stop(self, msg: Bool) -> None:
        self.e_stop_asserted = bool(msg.data)
        if msg.data and not self.e_stop_latched:
            self.e_stop_latched = True
            self.get_logger().error("e-stop: safe state latched (release the e-stop, then "
                                    "call ~/reset_e_stop)")
            self._enter_safe("e_stop", "e-stop topic")
            if self.active:
                self.send_safe_command("e_stop")

    def _on_reset_e_stop(self, request: Trigger.Request, response: Trigger.Response
                         ) -> Trigger.Response:
        """Release a latched e-stop once the topic says false; an active node soft-starts."""
        if self.e_stop_asserted:
            response.success, response.message = False, "e-stop still asserted on e_stop"
        elif not self.e_stop_latched:
            response.success, response.message = True, "no e-stop latched"
        else:
            self.e_stop_latched = False
            response.success, response.message = True, "e-stop released"
            if self.active and self.state is not None:
                self._start_soft_start(self.now())
            else:
                self._set_mode("inactive", "e-stop released")
        self.get_logger().info(f"reset_e_stop: {response.message}")
        return response

    # -------------------------------------------------------------- the loop
    def _fresh(self, now: float) -> bool:
        return self.state is not None and all(w.fresh(now) for w in self.watchdogs.values())

    def _on_timer(self) -> None:
        """The control timer: a control step (trigger ``timer``), or only the watchdog.

        In trigger ``state`` the timer is the watchdog: a step that sends the safe
        command once state is stale.
        """
        # due - (time to the next call): how late this call runs (timers keep their grid)
        self.stats.timer_fired(self.control_timer.timer_period_ns * 1e-9 -
                               self.control_timer.time_until_next_call() * 1e-9)
        now = self.now()
        if self.p.trigger == "timer" or not self._fresh(now):
            self._step(now)

    def _step(self, now: float) -> None:
        """One control step: safe command, soft start or policy, then publish."""
        self.stats.tick(time.monotonic())  # loop timing in wall time, whatever the clock
        self.last_step = now
        if not self.active:
            return
        start = time.perf_counter()
        if self.mode in LATCHED:
            self.send_safe_command(self.mode)
            return
        if not self._fresh(now):
            if self.mode != "watchdog":
                w = self.watchdogs["joint_states"]
                self._enter_safe("watchdog", "state too old", {
                    "state_age_s": {n: w.age(now) for n, w in self.watchdogs.items()},
                    "max_age_s": w.max_age})
            self.send_safe_command("watchdog")
            return
        if self.mode in ("watchdog", "non_finite_observation"):
            self._resume(now)
        if self.builder.legged and self.p.attitude_limit > 0:
            tilt = tilt_from_quat(self.imu[0])
            if tilt > self.p.attitude_limit:
                self._enter_safe("attitude", f"base tilt {tilt:.2f} rad > "
                                 f"{self.p.attitude_limit:.2f} rad")
                self.send_safe_command("attitude")
                return
        if self.mode == "soft_start":
            target, done = soft_start_targets(self.soft_start_from, self.robot.default_pose,
                                              now - self.soft_start_t0, self.p.soft_start_s)
            if done:
                self._hand_over("soft start done")
        else:
            if self._object_stale(now):
                self.send_safe_command("object_stale")
                return
            if self.mode == "object_stale":
                self._hand_over("object_pose fresh again: the policy restarts")
            target = self._policy_targets()
            if target is None:
                return
        self._send(target, clamp=True, compute_s=time.perf_counter() - start, now=now)

    def _object_stale(self, now: float) -> bool:
        """Whether the policy's object pose is missing or too old (entering the hold once)."""
        w = self.object_watchdog
        if w is None or w.fresh(now):
            return False
        if self.mode != "object_stale":
            age = w.age(now)
            self._enter_safe("object_stale", (
                f"object_pose {age:.3f} s old (max {w.max_age} s)" if math.isfinite(age)
                else "no object_pose yet") + ": holding the arm")
        return True

    def _policy_targets(self) -> np.ndarray | None:
        """Joint targets from the policy; None (and the safe state) on non-finite values."""
        if not self.builder.legged and self.goal is None:
            return self.robot.default_pose.copy()  # no goal yet: keep the default pose
        state = self.state
        if self.builder.legged:
            state.quat_wxyz, state.ang_vel_b = self.imu
            state.lin_vel_b = self.base_vel
        if self.object is not None:
            state.object_pos, state.object_quat_wxyz = self.object
        task_input = self.command if self.builder.legged else self.goal
        obs = self.builder.build(state, self.last_action, task_input)
        if not np.all(np.isfinite(obs)):
            self._enter_safe("non_finite_observation", "observation has NaN/inf")
            self.send_safe_command("non_finite_observation")
            return None
        obs = np.clip(obs, -self.p.obs_clip, self.p.obs_clip)
        action = self.policy(obs)[0].numpy().astype(np.float64)
        if not np.all(np.isfinite(action)):
            self._enter_safe("non_finite_action", "policy output has NaN/inf")
            self.send_safe_command("non_finite_action")
            return None
        action = np.clip(action, -1.0, 1.0)
        self.last_action = action
        self.builder.advance()
        ctrl = self.action_map(torch.as_tensor(action)[None])[0].numpy()
        nj = len(self.robot.joints)
        self.finger_target = ctrl[nj:]
        return ctrl[:nj]

    def _hand_over(self, reason: str) -> None:
        """The policy starts as from a training reset (soft start done, or object seen again).

        The clock restarts, the action targets are the measured pose, the last
        action is the reset's and a chunking policy forgets its earlier predictions.
        """
        self.builder.reset()
        if hasattr(self.policy, "reset"):  # an action-chunking policy (ChunkedPolicy)
            self.policy.reset()
        self.action_map.reset(torch.zeros(1, dtype=torch.long),
                              torch.as_tensor(self.state.q)[None])
        self.last_action = np.zeros(self.action_map.action_dim)
        if self.robot.gripper is not None and self.action_map.gripper_dim:
            self.last_action[-1] = 1.0
        self._set_mode("policy", reason)

    def _resume(self, now: float) -> None:
        """Fresh state after an outage that began at ``safe_since``; ``now`` in s.

        A short outage resumes what it interrupted (the policy, or the soft start where
        it stood), a longer one starts a soft start again.
        """
        outage = now - self.safe_since
        if outage <= self.p.resume_window_s and self.interrupted in ("policy", "object_stale"):
            self._set_mode("policy", f"fresh state again after {outage:.2f} s: policy resumes")
        elif outage <= self.p.resume_window_s and self.interrupted == "soft_start":
            self.soft_start_t0 += outage  # the ramp's clock stood still during the outage
            self._set_mode("soft_start", f"fresh state again after {outage:.2f} s: soft "
                           "start resumes")
        else:
            self._start_soft_start(now)

    def _start_soft_start(self, now: float) -> None:
        self.soft_start_from = self.state.q.copy()
        self.soft_start_t0 = now
        self.target = None
        self._set_mode("soft_start", f"ramp to the default pose over {self.p.soft_start_s} s")

    def exit_safely(self) -> None:
        """On SIGINT/SIGTERM: the safe command, delivered before the process ends."""
        if self.active:
            self._enter_safe("exit", "process stopping")
            self.send_safe_command("exit")
            self.command_pub.wait_for_all_acked(Duration(seconds=0.5))

    def _enter_safe(self, mode: str, reason: str, extra: dict | None = None) -> None:
        if self.active and self.limiter.last is not None:
            self.hold_target = self.limiter.stopping_point()  # brake, do not turn back
        else:
            self.hold_target = None if self.state is None else self.state.q.copy()
        self.safe_since = self.now()
        self.interrupted = self.mode
        self._set_mode(mode, reason, extra)

    def send_safe_command(self, reason: str) -> None:
        """Publish the safe command, hold or damp; nothing before the first state.

        Hold: stop as soon as the limits allow and stay there; damp: follow the
        measured pose.
        """
        if self.state is None or not hasattr(self, "command_pub"):
            return
        if self.p.safe_mode == "damp" or self.hold_target is None:
            target = self.state.q.copy()
        else:
            target = self.hold_target
        self._send(target, clamp=False)

    def _send(self, target: np.ndarray, clamp: bool, compute_s: float = 0.0,
              now: float | None = None) -> None:
        """Publish joint targets ``target`` [nj] after the safety filters, and remember them.

        Clamp (policy and soft start), check finiteness, limit velocity and
        acceleration (every command, last).
        """
        if clamp:
            target = clamp_targets(target, self.target, self.state.q, self.state.qd,
                                   self.limits)
        else:
            target = np.clip(target, self.limits.lower, self.limits.upper)
        if not np.all(np.isfinite(target)) or not np.all(np.isfinite(self.finger_target)):
            self._enter_safe("non_finite_action", "non-finite joint target")
            return  # never let NaN reach a command (nor the limiter's memory)
        if self.limiter.last is None:  # a safe command before any activation
            self.limiter.reset(self.state.q)
        target = self.limiter(target)
        positions = np.concatenate([target, self.finger_target])[:len(self.command_names)]
        self.target = target
        if self.p.output == "joint_trajectory":
            msg = trajectory_message(self.command_names, positions, self.p.trajectory_horizon,
                                     self._trajectory_stamp())
        else:
            msg = array_message(self.robot.ros_joint_names, target)
        self.command_pub.publish(msg)
        if now is not None:
            self.stats.command(compute_s, self.watchdogs["joint_states"].age(now))

    def _trajectory_stamp(self) -> TimeMsg | None:
        """The header stamp of a JointTrajectory: None (zero: start on receipt) or now."""
        return self.get_clock().now().to_msg() if self.p.trajectory_stamp == "now" else None

    # ------------------------------------------------------------- reporting
    def _set_mode(self, mode: str, reason: str, extra: dict | None = None) -> None:
        changed = (mode, reason) != (self.mode, self.reason)
        self.mode, self.reason = mode, reason
        if changed:
            self._publish_safety(extra)

    def _publish_safety(self, extra: dict | None = None) -> None:
        body = {"mode": self.mode, "reason": self.reason, **(extra or {})}
        self.safety_pub.publish(String(data=json.dumps(body)))
        if self.mode in SAFE_STATES:
            self.get_logger().warning(f"mode {self.mode}: {self.reason}")
        else:
            self.get_logger().info(f"mode {self.mode}: {self.reason}")

    def _publish_stats(self) -> None:
        summary = {**self.stats.summary(), "mode": self.mode, "rejected": self.rejected}
        self.stats_pub.publish(String(data=json.dumps(summary)))
        self.get_logger().info(
            "loop {rate_hz:.1f} Hz, jitter p50/p99 {jitter_p50_ms:.2f}/{jitter_p99_ms:.2f} ms,"
            " compute p50/p99 {compute_p50_ms:.2f}/{compute_p99_ms:.2f} ms, state age"
            " p50/p99 {state_age_p50_ms:.1f}/{state_age_p99_ms:.1f} ms".format(**summary))


def main(args: list[str] | None = None) -> None:
    """Entry point (``ros2 run embodied_ros policy_node``)."""
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = PolicyNode()
    spin_until_signal(node, node.exit_safely)


if __name__ == "__main__":
    main()
