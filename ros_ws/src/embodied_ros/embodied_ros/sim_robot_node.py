"""A simulated robot behind the real robot's topics: the stand-in for hardware.

Runs the robot's MuJoCo model (``robots.build.robot_mjspec``: the MJCF with one position
actuator per joint carrying the robot spec's PD gains and effort limits, plus a floor)
in real time at the control rate: every control period it applies the newest command,
steps ``decimation`` physics steps and publishes

* ``joint_states`` (sensor_msgs/JointState: every actuated joint by ROS name, position,
  velocity, actuator effort),
* for floating-base robots ``imu`` (sensor_msgs/Imu: orientation, body-frame angular
  velocity, accelerometer) and ``base_velocity`` (geometry_msgs/TwistStamped, base
  frame: what a state estimator provides on hardware),
* ground truth for tests and benchmarks: ``ground_truth/base_pose`` and
  ``ground_truth/ee_pose`` (geometry_msgs/PoseStamped, world frame),
* with an object in the scene, ``object_pose`` (geometry_msgs/PoseStamped, world = arm
  base frame): the object's pose, what a perception system publishes on hardware.

With ``policy_path`` (an exported policy; ``sim_deploy`` passes the policy node's) the
control period is the policy's, and if the policy's task has a free object (the cube
of panda_push) the model is that task's scene (``sim.env.compile_task_model``: the
table, the object, the goal marker) with its nominal physics; ``~/place_object``
(geometry_msgs/PoseStamped) puts the object at a pose at rest, as a task's reset does.

It follows ``joint_trajectory`` (trajectory_msgs/JointTrajectory, joints by name; the
first point's positions) or ``joint_position_targets`` (std_msgs/Float64MultiArray in
robot.yaml order), per the ``command`` parameter. With ``publish_clock`` it publishes
the simulation time on ``/clock`` (``sim_deploy`` runs the policy node on it).
``~/reset`` (std_msgs/Empty) puts the robot back in its default pose (an object stays).
``~/loop_stats`` (JSON) reports the step rate and the latency from the newest state
message to each command's arrival (on this node's clock; a command that arrives after
the next state counts from that one).
"""

from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

import mujoco
import numpy as np
import rclpy
import torch
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import PoseStamped, TwistStamped
from numpy.typing import ArrayLike
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from rclpy.signals import SignalHandlerOptions
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Empty, Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from embodied.policy_io import load_policy
from embodied_ros.description import SIM_ROBOT_NODE
from embodied_ros.messages import vector3
from embodied_ros.observation import floating_base_state
from embodied_ros.safety import percentiles
from embodied_ros.spin import spin_until_signal
from robots import RobotSpec, load_robot
from robots.build import robot_mjspec
from sim.env import compile_task_model
from sim.task import add_floor_and_light
from sim.tasks import get_task

COMMANDS = ("joint_trajectory", "position_array")


class SimRobotNode(Node):
    """A MuJoCo robot at the control rate behind JointState / Imu / command topics."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(SIM_ROBOT_NODE, **kwargs)
        robot_name = self.declare_parameter("robot", "").value
        command = self.declare_parameter("command", "joint_trajectory").value
        self.base_height = float(self.declare_parameter("base_height", 0.0).value)
        rtf = float(self.declare_parameter("real_time_factor", 1.0).value)
        policy_path = str(self.declare_parameter("policy_path", "").value)
        if command not in COMMANDS:
            raise ValueError(f"command '{command}' is not one of {COMMANDS}")
        if not robot_name:
            raise ValueError("parameter 'robot' is empty: set it (e.g. -p robot:=panda)")
        robot = self.robot = load_robot(robot_name)
        self.control_dt, task = robot.control_dt, ""
        if policy_path:
            meta = load_policy(policy_path)[1]
            self.control_dt, task = float(meta["control_dt"]), str(meta["task"])
        self.decimation = max(1, round(self.control_dt / robot.timestep))
        self.model, self.data, self.object_adr = self._build(robot, task)
        m = self.model
        names = robot.joint_names + (list(robot.gripper.joints) if robot.gripper else [])
        self.ros_names = robot.ros_joint_names + (list(robot.gripper.ros_names)
                                                  if robot.gripper else [])
        jid = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
        self.qadr = m.jnt_qposadr[jid]
        self.dadr = m.jnt_dofadr[jid]
        self.actuator = {ros: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, n)
                         for ros, n in zip(self.ros_names, names, strict=True)}
        self.nj = len(robot.joints)
        self.free_adr = None
        if robot.floating_base:
            base = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, robot.base_body)
            free = m.body_jntadr[base]
            self.free_adr = (m.jnt_qposadr[free], m.jnt_dofadr[free])
        self.base_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, robot.base_body)
        ee = robot.sites.get("ee")
        self.ee_site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, ee) if ee else -1
        self.reset()

        self.state_pub = self.create_publisher(JointState, "joint_states",
                                               qos_profile_sensor_data)
        self.base_pose_pub = self.create_publisher(PoseStamped, "ground_truth/base_pose", 10)
        self.ee_pose_pub = self.create_publisher(PoseStamped, "ground_truth/ee_pose", 10) \
            if self.ee_site >= 0 else None
        self.object_pub = None
        if self.object_adr is not None:
            self.object_pub = self.create_publisher(PoseStamped, "object_pose",
                                                    qos_profile_sensor_data)
            self.create_subscription(PoseStamped, "~/place_object", self._place_object, 10)
        if robot.floating_base:
            self.imu_pub = self.create_publisher(Imu, "imu", qos_profile_sensor_data)
            self.vel_pub = self.create_publisher(TwistStamped, "base_velocity",
                                                 qos_profile_sensor_data)
        if command == "joint_trajectory":
            self.create_subscription(JointTrajectory, "joint_trajectory", self._on_trajectory,
                                     qos_profile_sensor_data)
        else:
            self.create_subscription(Float64MultiArray, "joint_position_targets",
                                     self._on_array, qos_profile_sensor_data)
        self.create_subscription(Empty, "~/reset", lambda _msg: self.reset(), 10)
        # Simulation time on /clock: nodes with use_sim_time run their watchdogs and ramps
        # on it, so a CPU-starved simulation is slow, not stale.
        self.clock_pub = self.create_publisher(Clock, "/clock", 10) \
            if self.declare_parameter("publish_clock", False).value else None
        self.stats_pub = self.create_publisher(String, "~/loop_stats", 10)
        self.latency: deque[float] = deque(maxlen=2000)
        self.periods: deque[float] = deque(maxlen=2000)
        self.commands = self.steps = 0
        self._state_sent: float | None = None  # node clock (s) of the newest JointState
        self._last_tick: float | None = None
        self.create_timer(self.control_dt / rtf, self._tick)
        self.create_timer(2.0, self._publish_stats)
        self.get_logger().info(f"simulated {robot.name}: {len(self.ros_names)} joints, "
                               f"{1 / self.control_dt:.0f} Hz, command topic {command}" +
                               (f", {task} scene with its object" if self.object_adr else ""))

    # ------------------------------------------------------------- model
    def _build(self, robot: RobotSpec, task: str
               ) -> tuple[mujoco.MjModel, mujoco.MjData, tuple[int, int, int] | None]:
        """The model, its data and the object's (body, qpos address, dof address) or None.

        The scene of ``task`` if it has a free object, else the robot on a floor.
        """
        if task:
            model = compile_task_model(get_task(task).make_task())
            free = [j for j in range(model.njnt)
                    if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE and
                    model.body(model.jnt_bodyid[j]).name != robot.base_body]
            if free:
                j = free[0]
                adr = (int(model.jnt_bodyid[j]), int(model.jnt_qposadr[j]),
                       int(model.jnt_dofadr[j]))
                return model, mujoco.MjData(model), adr
        spec = robot_mjspec(robot)
        add_floor_and_light(spec)
        imu_site = robot.sites.get("imu")
        if robot.floating_base and imu_site:
            sensor = spec.add_sensor()
            sensor.name = "imu_acc"
            sensor.type = mujoco.mjtSensor.mjSENS_ACCELEROMETER
            sensor.objtype = mujoco.mjtObj.mjOBJ_SITE
            sensor.objname = imu_site
        model = spec.compile()
        return model, mujoco.MjData(model), None

    def reset(self) -> None:
        """Default pose, zero velocity, targets = default pose (gripper open)."""
        m, d, robot = self.model, self.data, self.robot
        kept = None
        if self.object_adr is not None:
            _, qa, va = self.object_adr
            kept = d.qpos[qa:qa + 7].copy(), d.qvel[va:va + 6].copy()
        mujoco.mj_resetData(m, d)
        if kept is not None:
            d.qpos[qa:qa + 7], d.qvel[va:va + 6] = kept
        if self.free_adr is not None:
            a = self.free_adr[0]
            d.qpos[a:a + 7] = [0.0, 0.0, self.base_height, 1.0, 0.0, 0.0, 0.0]
        d.qpos[self.qadr[:self.nj]] = robot.default_pose
        d.ctrl[:self.nj] = robot.default_pose
        if robot.gripper:
            d.qpos[self.qadr[self.nj:]] = robot.gripper.upper
            d.ctrl[self.nj:] = robot.gripper.upper
        mujoco.mj_forward(m, d)

    def _place_object(self, msg: PoseStamped) -> None:
        """The object at the pose of ``msg`` (world frame), at rest."""
        pos, o = vector3(msg.pose.position), msg.pose.orientation
        quat = np.array([o.w, o.x, o.y, o.z], dtype=np.float64)
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat))) or \
                np.linalg.norm(quat) < 0.5:
            self.get_logger().warning(f"~/place_object: invalid pose {pos.tolist()}, "
                                      f"{quat.tolist()}")
            return
        _, qa, va = self.object_adr
        self.data.qpos[qa:qa + 7] = np.concatenate([pos, quat / np.linalg.norm(quat)])
        self.data.qvel[va:va + 6] = 0.0
        mujoco.mj_forward(self.model, self.data)

    # ----------------------------------------------------------- commands
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if not msg.points:
            return
        positions = msg.points[0].positions
        if len(positions) != len(msg.joint_names):
            self.get_logger().warning("trajectory point size differs from joint_names",
                                      throttle_duration_sec=1.0)
            return
        for name, value in zip(msg.joint_names, positions, strict=True):
            act = self.actuator.get(name)
            if act is not None and np.isfinite(value):
                self.data.ctrl[act] = value
        self._command_received()

    def _on_array(self, msg: Float64MultiArray) -> None:
        values = np.asarray(msg.data, dtype=np.float64)
        if values.shape != (self.nj,) or not np.all(np.isfinite(values)):
            self.get_logger().warning(f"position targets must be {self.nj} finite values, got "
                                      f"{values.tolist()}", throttle_duration_sec=1.0)
            return
        self.data.ctrl[:self.nj] = values
        self._command_received()

    def _command_received(self) -> None:
        self.commands += 1
        if self._state_sent is not None:
            self.latency.append(self.get_clock().now().nanoseconds * 1e-9 - self._state_sent)

    # -------------------------------------------------------------- loop
    def _tick(self) -> None:
        now = time.monotonic()
        if self._last_tick is not None:
            self.periods.append(now - self._last_tick)
        self._last_tick = now
        for _ in range(self.decimation):
            mujoco.mj_step(self.model, self.data)
        self.steps += 1
        if self.clock_pub is not None:
            ns = round(self.steps * self.control_dt * 1e9)
            self.clock_pub.publish(Clock(clock=TimeMsg(sec=ns // 10**9, nanosec=ns % 10**9)))
        self._publish_state()

    def _publish_state(self) -> None:
        d = self.data
        stamp = self.get_clock().now().to_msg()
        if self.free_adr is not None:
            self._publish_base(stamp)  # before the joint states, which may trigger a step
        if self.object_pub is not None:
            body = self.object_adr[0]
            obj = PoseStamped()
            obj.header.stamp, obj.header.frame_id = stamp, "world"
            _set_pose(obj, d.xpos[body], d.xquat[body])
            self.object_pub.publish(obj)
        js = JointState()
        js.header.stamp = stamp
        js.name = self.ros_names
        js.position = d.qpos[self.qadr].tolist()
        js.velocity = d.qvel[self.dadr].tolist()
        js.effort = [float(d.actuator_force[self.actuator[n]]) for n in self.ros_names]
        self.state_pub.publish(js)
        self._state_sent = Time.from_msg(stamp).nanoseconds * 1e-9
        base = PoseStamped()
        base.header.stamp, base.header.frame_id = stamp, "world"
        _set_pose(base, d.xpos[self.base_id], d.xquat[self.base_id])
        self.base_pose_pub.publish(base)
        if self.ee_pose_pub is not None:
            ee = PoseStamped()
            ee.header.stamp, ee.header.frame_id = stamp, "world"
            quat = np.empty(4)
            mujoco.mju_mat2Quat(quat, d.site_xmat[self.ee_site])
            _set_pose(ee, d.site_xpos[self.ee_site], quat)
            self.ee_pose_pub.publish(ee)

    def _publish_base(self, stamp: TimeMsg) -> None:
        d, (qa, va) = self.data, self.free_adr
        quat, ang_b, lin_b = floating_base_state(d.qpos[qa:qa + 7], d.qvel[va:va + 6])
        imu = Imu()
        imu.header.stamp, imu.header.frame_id = stamp, self.robot.base_body
        o = imu.orientation
        o.w, o.x, o.y, o.z = (float(v) for v in quat)
        w = imu.angular_velocity
        w.x, w.y, w.z = (float(v) for v in ang_b)
        if self.model.nsensor:
            a = imu.linear_acceleration
            a.x, a.y, a.z = (float(v) for v in d.sensordata[:3])
        self.imu_pub.publish(imu)
        vel = TwistStamped()
        vel.header.stamp, vel.header.frame_id = stamp, self.robot.base_body
        vel.twist.linear.x, vel.twist.linear.y, vel.twist.linear.z = (float(v) for v in lin_b)
        vel.twist.angular.x, vel.twist.angular.y, vel.twist.angular.z = \
            (float(v) for v in ang_b)
        self.vel_pub.publish(vel)

    def _publish_stats(self) -> None:
        lat = percentiles(self.latency)
        per = percentiles(self.periods)
        jit = percentiles(abs(p - self.control_dt) for p in self.periods)
        body = {"steps": self.steps, "commands": self.commands,
                "rate_hz": 1.0 / float(np.mean(self.periods)) if self.periods else None,
                "period_p50_ms": per[0] * 1e3, "period_p99_ms": per[1] * 1e3,
                "jitter_p50_ms": jit[0] * 1e3, "jitter_p99_ms": jit[1] * 1e3,
                "command_latency_p50_ms": lat[0] * 1e3, "command_latency_p99_ms": lat[1] * 1e3}
        self.stats_pub.publish(String(data=json.dumps(body)))


def _set_pose(msg: PoseStamped, pos: ArrayLike, quat_wxyz: ArrayLike) -> None:
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z = (float(v) for v in pos)
    o.w, o.x, o.y, o.z = (float(v) for v in quat_wxyz)


def main(args: list[str] | None = None) -> None:
    """Entry point (``ros2 run embodied_ros sim_robot_node``)."""
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    torch.set_num_threads(1)
    node = SimRobotNode()
    spin_until_signal(node, lambda: None)


if __name__ == "__main__":
    main()
