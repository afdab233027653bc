"""The ROS 2 bridge in closed loop: control-loop rate and jitter, state -> command
latency, and panda_reach success through ROS against the same policy in simulation.

Through ROS: ``sim_deploy`` (the policy node and the simulated Panda as two processes,
real DDS, kept on this machine: a private network namespace when possible, else
localhost discovery). Each episode sends a goal drawn from the task's target range,
deactivates the policy node, puts the simulated arm back in its default pose, activates
the node again (its velocity- and acceleration-limited command stream starts from the
measured pose, as it must after the robot moved other than by its commands; the soft
start is set to 0 s, the arm being at the default pose already) and counts success when
the tcp (ground truth) is within the task's success radius after the task's episode
length in simulated control steps (150), as the task does at an episode's end. In
simulation: the same exported policy on the batched env (``embodied eval`` settings:
observation noise and domain randomisation as in training), one episode per env.
``success_ratio`` = ROS / simulation (target >= 0.95).
Loop figures come from the nodes' own ``~/loop_stats``: the policy node's control-step
period and jitter (|period - 20 ms|, wall time) and compute time, and the simulated
robot's latency from its newest state message to each command's arrival; in
``sim_deploy`` the policy node steps on each state message, on the simulation's clock.

Jitter under load (``jitter``): the deployment as on a robot (``deploy``: the policy node on
its own 50 Hz timer on system time, the simulated Panda as the robot, both on wall
time), for JITTER_S seconds of policy control with a new goal every 2 s, in three
settings: no added load; ``BUSY`` added CPU-bound busy-loop processes (nice 0, one per
core of a 2-core machine) beside whatever else runs (the 1-minute load average is
recorded); the same load with the policy node's threads on SCHED_FIFO priority 50. Each
reports the command period at publishing and at receipt (the DDS source and reception
timestamps of each command, received in this process, which is not prioritised) and
the delivery time between them, p50/p99/max; and, from the
node's own ``~/loop_stats``, its step period, how late its control timer fired (executor
and OS scheduling), and its compute time (observation, policy, limits; torch on one
thread; the node runs one executor thread, so no other Python thread competes for the
GIL).

With the walking Go2 policy in assets/policies/go2_walk/, also: the forward distance the
simulated Go2 walks through ROS in 10 s under a 0.5 m/s ``cmd_vel`` against the same
policy on the batched env under the same command (``embodied.locomotion_eval``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import torch
from common import parse_args, write_result
from geometry_msgs.msg import PointStamped, PoseStamped, Twist
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import Empty, String
from trajectory_msgs.msg import JointTrajectory

from embodied.locomotion_eval import evaluate_velocity_tracking
from embodied.policy_io import load_policy
from embodied.rl.evaluate import evaluate
from embodied_ros.description import deploy_nodes, sim_deploy_nodes, sim_robot_node
from embodied_ros.graph import private_graph
from embodied_ros.safety import percentiles, tilt_from_quat
from sim import make_env
from sim.tasks.go2_walk import FALL_HEIGHT, FALL_TILT
from sim.tasks.panda_reach import SUCCESS_RADIUS, TARGET_HIGH, TARGET_LOW, PandaReach

POLICY = Path(__file__).resolve().parent.parent / "assets/policies/panda_reach/policy.pt"
GO2_POLICY = POLICY.parents[1] / "go2_walk" / "policy.pt"
WALK_VX, WALK_S = 0.5, 10.0  # forward command (m/s) and duration (s) of the Go2 walk
EPISODE_STEPS = round(PandaReach.episode_length_s / 0.02)  # 150 control steps of 20 ms
JITTER_S, BUSY = 30.0, 2  # seconds measured per setting; busy-loop processes added


def in_simulation(episodes: int) -> dict:
    """Success of the exported policy on the batched env, one episode per env."""
    policy, _ = load_policy(POLICY)
    env = make_env("panda_reach", num_envs=episodes, seed=10_000)
    try:
        result = evaluate(policy, env)
    finally:
        env.close()
    return {"episodes": result["episodes"], "success_rate": result["success_rate"]}


def through_ros(episodes: int, log_dir: Path) -> dict:
    """Success and loop statistics of the same policy through the ROS deployment."""
    rng = np.random.default_rng(0)
    targets = rng.uniform(TARGET_LOW, TARGET_HIGH, size=(episodes, 3))
    with private_graph(log_dir) as g:
        safety = g.safety()
        ee = g.record(PoseStamped, "/ground_truth/ee_pose")
        policy_stats = g.record(String, "/embodied_policy/loop_stats")
        sim_stats = g.record(String, "/sim_robot/loop_stats")
        goal_pub = g.node.create_publisher(PointStamped, "/goal", 10)
        reset_pub = g.node.create_publisher(Empty, "/sim_robot/reset", 10)
        start = time.monotonic()
        policy, robot = sim_deploy_nodes("panda", str(POLICY))
        g.launch([replace(policy, overrides={**policy.overrides, "soft_start_s": 0.0}), robot])
        g.wait_mode(safety, "policy", timeout=120.0)
        g.wait_for(lambda: goal_pub.get_subscription_count() and
                   reset_pub.get_subscription_count(), 30.0, "goal and reset subscribers")
        startup_s = time.monotonic() - start
        distances = []
        for target in targets:
            goal = PointStamped()
            goal.header.frame_id = "panda_link0"
            goal.point.x, goal.point.y, goal.point.z = (float(v) for v in target)
            assert g.transition("/embodied_policy", "deactivate")
            g.wait_for(lambda: safety.messages[-1]["mode"] == "inactive", 30.0,
                       "the deactivation")
            time.sleep(0.1)  # the deactivation's safe command lands before the reset
            goal_pub.publish(goal)
            reset_pub.publish(Empty())
            reset = time.monotonic()
            g.wait_for(lambda reset=reset: len(ee.since(reset)) >= 3, 30.0, "the reset pose")
            g.wait_for(lambda: safety.messages[-1]["mode"] != "inactive" or
                       g.transition("/embodied_policy", "activate"), 30.0, "the activation")
            sent = time.monotonic()
            # One ground-truth pose per simulated control step: an episode is the task's
            # number of control steps (+1 for the activation in flight), however loaded
            # the CPU.
            g.wait_for(lambda sent=sent: len(ee.since(sent)) > EPISODE_STEPS, 60.0,
                       "the episode's control steps")
            p = ee.messages[-1].pose.position
            distances.append(float(np.linalg.norm(np.array([p.x, p.y, p.z]) - target)))
        g.wait_for(lambda: policy_stats.messages and sim_stats.messages, 30.0, "loop stats")
        loop = json.loads(policy_stats.messages[-1].data)
        robot = json.loads(sim_stats.messages[-1].data)
        modes = [m["mode"] for m in safety.messages]
        isolation = g.isolation
    distances = np.array(distances)
    return {"episodes": episodes, "success_rate": float((distances < SUCCESS_RADIUS).mean()),
            "final_distance_m_p50": float(np.median(distances)),
            "final_distance_m_max": float(distances.max()),
            "watchdog_trips": modes.count("watchdog"), "startup_s": round(startup_s, 1),
            "isolation": isolation, "policy_loop": loop, "sim_robot_loop": robot}


def _realtime(pid: int, priority: int = 50) -> None:
    """Every thread of process ``pid`` on SCHED_FIFO ``priority`` (needs root)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setscheduler(int(tid), os.SCHED_FIFO, os.sched_param(priority))


def loop_under_load(log_dir: Path, busy: int, realtime: bool, seconds: float) -> dict:
    """Command timing of the robot deployment (policy node timer on wall time) with
    ``busy`` busy-loop processes beside it, the policy node on SCHED_FIFO if ``realtime``."""
    loads = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(busy)]
    try:
        with private_graph(log_dir, seed=2 + busy + realtime) as g:
            safety = g.safety()
            stats = g.record(String, "/embodied_policy/loop_stats")
            arrivals: list[tuple[float, float]] = []  # (published, received) per command
            g.node.create_subscription(
                JointTrajectory, "/joint_trajectory",
                lambda _msg, info: arrivals.append((info["source_timestamp"] * 1e-9,
                                                    info["received_timestamp"] * 1e-9)),
                QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
            goal_pub = g.node.create_publisher(PointStamped, "/goal", 10)
            (policy,) = deploy_nodes("panda", str(POLICY), autostart=True)
            procs = g.launch([policy, sim_robot_node("panda")])
            g.wait_mode(safety, "policy", timeout=120.0)
            if realtime:
                _realtime(procs.procs[0].pid)
            rng = np.random.default_rng(1)
            load_before = os.getloadavg()[0]
            start = time.monotonic()
            n0 = len(arrivals)
            while time.monotonic() - start < seconds:
                goal = PointStamped()
                goal.point.x, goal.point.y, goal.point.z = (
                    float(v) for v in rng.uniform(TARGET_LOW, TARGET_HIGH))
                goal_pub.publish(goal)
                time.sleep(2.0)
            window, end = arrivals[n0:], time.monotonic()
            g.wait_for(lambda: stats.since(end), 30.0, "loop stats after the window")
            loop = json.loads(stats.messages[-1].data)
            trips = [m["mode"] for m in safety.messages].count("watchdog")
    finally:
        for proc in loads:
            proc.kill()
            proc.wait()
    sent, received = np.array(window).T

    def ms(values: np.ndarray) -> dict:
        p50, p99 = percentiles(values * 1e3)
        return {"p50": round(p50, 2), "p99": round(p99, 2),
                "max": round(float(values.max() * 1e3), 2)}

    return {"busy_processes": busy, "policy_node_sched_fifo": realtime,
            "load_avg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "commands": len(window),
            "command_period_published_ms": ms(np.diff(sent)),
            "command_period_received_ms": ms(np.diff(received)),
            "delivery_ms": ms(received - sent),
            "node_period_ms": {"p50": round(loop["period_p50_ms"], 2),
                               "p99": round(loop["period_p99_ms"], 2)},
            "timer_late_ms": {"p50": round(loop["timer_late_p50_ms"], 2),
                              "p99": round(loop["timer_late_p99_ms"], 2)},
            "compute_ms": {"p50": round(loop["compute_p50_ms"], 2),
                           "p99": round(loop["compute_p99_ms"], 2)},
            "watchdog_trips": trips}


def jitter(seconds: float) -> dict:
    """:func:`loop_under_load` with no added load, with BUSY busy loops, and with both
    BUSY busy loops and the policy node on SCHED_FIFO."""
    out = {}
    for name, busy, realtime in (("no_added_load", 0, False), ("busy", BUSY, False),
                                 ("busy_sched_fifo", BUSY, True)):
        with tempfile.TemporaryDirectory() as tmp:
            out[name] = loop_under_load(Path(tmp), busy, realtime, seconds)
    return out


def walk_in_simulation(envs: int) -> dict:
    """The Go2 policy under a fixed forward command on the batched env (training settings)."""
    policy, _ = load_policy(GO2_POLICY)
    env = make_env("go2_walk", num_envs=envs, seed=10_000)
    try:
        result = evaluate_velocity_tracking(policy, env, (WALK_VX, 0.0, 0.0), WALK_S)
    finally:
        env.close()
    return {key: result[key] for key in ("episodes", "forward_distance_m", "fall_rate",
                                         "lin_vel_error_mps")}


def walk_through_ros(log_dir: Path) -> dict:
    """The same policy on the simulated Go2 through ROS: forward distance in WALK_S seconds
    (simulated time: one ground-truth pose per control step) under ``cmd_vel``."""
    with private_graph(log_dir, seed=1) as g:
        safety = g.safety()
        poses = g.record(PoseStamped, "/ground_truth/base_pose")
        cmd_pub = g.node.create_publisher(Twist, "/cmd_vel", 10)
        g.launch(sim_deploy_nodes("go2", str(GO2_POLICY)))
        g.wait_mode(safety, "policy", timeout=120.0)
        cmd = Twist()
        cmd.linear.x = WALK_VX
        g.wait_for(lambda: cmd_pub.get_subscription_count(), 30.0, "a cmd_vel subscriber")
        cmd_pub.publish(cmd)
        sent = time.monotonic()
        steps = round(WALK_S / 0.02)
        g.wait_for(lambda: len(poses.since(sent)) > steps, 120.0, "the walk's control steps")
        walked = poses.since(sent)[:steps + 1]
        trips = [m["mode"] for m in safety.messages].count("watchdog")
    first, last = walked[0].pose, walked[-1].pose
    q = first.orientation
    yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
    move = np.array([last.position.x - first.position.x, last.position.y - first.position.y])
    heights = [m.pose.position.z for m in walked]
    tilts = [tilt_from_quat(np.array([m.pose.orientation.w, m.pose.orientation.x,
                                      m.pose.orientation.y, m.pose.orientation.z]))
             for m in walked]
    fell = min(heights) < FALL_HEIGHT or max(tilts) > FALL_TILT
    return {"forward_distance_m": float(move @ np.array([math.cos(yaw), math.sin(yaw)])),
            "fell": bool(fell), "watchdog_trips": trips}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    torch.set_num_threads(1)
    episodes = 4 if args.quick else 30
    sim = in_simulation(64 if not args.quick else 16)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        ros = through_ros(episodes, Path(tmp))
    ros["load_avg_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    walk = None
    if GO2_POLICY.is_file():  # the walking policy's asset (see assets/policies/go2_walk)
        with tempfile.TemporaryDirectory() as tmp:
            walk = {"command_vx_mps": WALK_VX, "seconds": WALK_S,
                    "ros": walk_through_ros(Path(tmp)),
                    "sim": walk_in_simulation(8 if args.quick else 32)}
        walk["forward_distance_ratio"] = round(
            walk["ros"]["forward_distance_m"] / walk["sim"]["forward_distance_m"], 3)
    loop, robot = ros["policy_loop"], ros["sim_robot_loop"]
    control_dt_ms = 20.0
    figures = {
        "policy": str(POLICY.relative_to(POLICY.parents[3])),
        "control_rate_hz": round(loop["rate_hz"], 2),
        "rate_ratio_to_nominal": round(loop["rate_hz"] * control_dt_ms / 1000.0, 4),
        "jitter_ms": {"p50": round(loop["jitter_p50_ms"], 3),
                      "p99": round(loop["jitter_p99_ms"], 3)},
        "compute_ms": {"p50": round(loop["compute_p50_ms"], 3),
                       "p99": round(loop["compute_p99_ms"], 3)},
        "state_age_at_command_ms": {"p50": round(loop["state_age_p50_ms"], 2),
                                    "p99": round(loop["state_age_p99_ms"], 2)},
        "state_to_command_latency_ms": {"p50": round(robot["command_latency_p50_ms"], 2),
                                        "p99": round(robot["command_latency_p99_ms"], 2)},
        "latency_p50_ratio_to_control_period": round(
            robot["command_latency_p50_ms"] / control_dt_ms, 3),
        "success_ros": ros["success_rate"],
        "success_sim": sim["success_rate"],
        "success_ratio": round(ros["success_rate"] / sim["success_rate"], 3)
        if sim["success_rate"] else None,
        "ros": ros,
        "sim": sim,
        "go2_walk": walk,
        "jitter": jitter(JITTER_S if not args.quick else 6.0),
    }
    write_result("ros_loop", args.quick, figures)


if __name__ == "__main__":
    main()
