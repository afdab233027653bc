"""go2_walk: the Unitree Go2 tracks a planar velocity command on flat ground.

The MDP follows the legged_gym / Isaac Lab flat-terrain velocity task for the Go2.

Observation (50, in this order; :data:`OBS_LAYOUT`; no scaling, as in Isaac Lab;
noise: :class:`Go2WalkConfig`)::

    base_lin_vel       3   base linear velocity, base frame, m/s
    base_ang_vel       3   base angular velocity, base frame, rad/s
    projected_gravity  3   unit gravity direction in the base frame
    velocity_command   3   (vx, vy, yaw rate) command
    gait_phase         2   (sin, cos) of the trot clock phase
    joint_pos         12   joint position - default pose, robot order
    joint_vel         12   joint velocity, rad/s
    last_action       12   the previous action

Each term is a small pure function of tensors (:mod:`sim.tasks.go2_walk.terms`:
:func:`base_lin_vel_b`, :func:`joint_pos_rel`, ...) and :func:`build_observation`
concatenates them, so the ROS deployment node builds the same vector from its
JointState / Imu messages by calling these functions.

Rewards (:class:`Go2WalkConfig`): weights are per second, as written in
legged_gym / Isaac Lab, and are multiplied by the control dt (0.02 s) when the
terms are built, as both frameworks do; a per-step reward is then on their
scale and an episode return does not depend on the control rate. The
termination penalty is scaled the same way (-200 -> -4 per fall).

Gait clock: periodic-reward shaping (Siekmann et al. 2021; walk-these-ways,
Margolis & Agrawal 2022) in place of legged_gym's feet-air-time term: a trot
clock (2 Hz, diagonal pairs half a period apart, :data:`GAIT_PERIOD_S`) whose
phase is in the observation; ``gait_contact`` rewards each foot whose contact
matches the clock (all feet down under a zero command) and ``feet_clearance``
pulls swinging feet to its ``height`` parameter. A deployment advances the same
clock (:func:`advance_phase`) every control period.

Contacts come from touch sensors added in :meth:`Go2Walk.build_scene` (feet:
the robot's foot sites enlarged to 3 cm; trunk and thighs: new sites around
their collision geoms). Joint torques are estimated from the PD law and
``ctrl`` with the nominal gains (SimState exposes no actuator force).

Commands: vx in [-1, 1] m/s, vy in [-0.3, 0.3] m/s, yaw rate in [-0.5, 0.5] rad/s
(:data:`COMMAND_LOW` / :data:`COMMAND_HIGH`), 10 % of them zero (standing).

Episode: 20 s: with commands resampled every 5-10 s an episode sees 2-4
commands, and a fall costs a large share of the return.

Success / progress (privileged, for reward models): exponential moving
averages over ~1 s (:data:`TRACKING_EMA_S`) of the planar velocity error
``|v_xy - cmd_xy|`` and yaw-rate error; success when the planar EMA is below
0.25 m/s and the yaw-rate EMA below 0.5 rad/s and the robot has not fallen.
Progress is the EMA of the tracking quality ``exp(-e_xy^2/0.25^2 - e_yaw^2/0.5^2)``
(0 when fallen), in [0, 1]. Both EMAs start pessimistic at reset (error 1,
quality 0), so success needs about a second of good tracking.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import mujoco
import torch

import sim.tasks.go2_walk.terms as terms
from robots import RobotSpec
from robots.go2.observation import advance_phase, base_lin_vel_b
from robots.math import projected_gravity, yaw_quat
from sim.protocol import SimState
from sim.task import (
    RewardTerm,
    Task,
    TermBounds,
    TermFunctions,
    add_floor_and_light,
    as_index,
    rows,
)
from sim.tasks.go2_walk.config import Go2WalkConfig
from sim.tasks.go2_walk.terms import CONTACT_FORCE, desired_contact, tilt_angle
from sim.terms import action_rate, last_action

# --------------------------------------------------------------- constants
# Measured once with MuJoCo kinematics on robots/go2 (default pose, base at z = 0.30):
# foot-sphere centres at z = -0.0002 (front) and 0.0090 (rear), foot radius 0.022, so
# the front feet touch the floor with the base at z = 0.322. Standing under the PD
# gains the base settles at ~0.28 m (the calves sag ~0.24 rad under kp = 25).
FEET_TOUCH_HEIGHT = 0.322
RESET_HEIGHT = FEET_TOUCH_HEIGHT + 0.02  # clearance for the reset joint noise
RESET_JOINT_NOISE = 0.1  # rad, uniform +-
RESET_BASE_VEL = 0.2  # m/s and rad/s, uniform +- on each of the 6 base velocities

# vx m/s, vy m/s, yaw rate rad/s
COMMAND_LOW = (-1.0, -0.3, -0.5)
COMMAND_HIGH = (1.0, 0.3, 0.5)
STANDING_FRACTION = 0.1  # share of sampled commands that are zero
RESAMPLE_S = (5.0, 10.0)  # per-env interval between command resamples

FOOT_SITE_RADIUS = 0.03  # the foot sites are enlarged to cover the foot sphere (0.022)

FALL_HEIGHT = 0.15  # m; base below this counts as fallen
FALL_TILT = 1.0  # rad; base tilt (angle between base z and world z) beyond this: fallen

TRACKING_EMA_S = 1.0  # s; time constant of the success / progress averages
SUCCESS_LIN_ERR = 0.25  # m/s
SUCCESS_YAW_ERR = 0.5  # rad/s


# ------------------------------------------------------------------- task
class Go2Walk(Task):
    """Velocity-command tracking for the Go2 (see the module docstring for the MDP).

    ``push_velocity``: every 10-15 s each env's base gets a random planar
    velocity kick of up to this many m/s (Isaac Lab's push_robot); 0 disables.
    """

    name = "go2_walk"
    robot_name = "go2"
    instruction = "walk forward at the commanded velocity"
    episode_length_s = 20.0
    cameras = ("head", "chase")
    config_class = Go2WalkConfig
    observation_functions: ClassVar[TermFunctions] = {
        "base_lin_vel": terms.obs_base_lin_vel,
        "base_ang_vel": terms.obs_base_ang_vel,
        "projected_gravity": terms.obs_projected_gravity,
        "velocity_command": terms.obs_velocity_command,
        "gait_phase": terms.obs_gait_phase,
        "joint_pos": terms.obs_joint_pos,
        "joint_vel": terms.obs_joint_vel,
        "last_action": last_action,
    }
    reward_functions: ClassVar[TermFunctions] = {
        "track_lin_vel_xy": terms.track_lin_vel_xy,
        "track_ang_vel_z": terms.track_ang_vel_z,
        "lin_vel_z": terms.lin_vel_z,
        "ang_vel_xy": terms.ang_vel_xy,
        "joint_torques": terms.joint_torques,
        "joint_acc": terms.joint_acc,
        "action_rate": action_rate,
        "gait_contact": terms.gait_contact,
        "feet_clearance": terms.feet_clearance,
        "undesired_contacts": terms.undesired_contacts,
        "flat_orientation": terms.flat_orientation,
        "termination": terms.termination,
    }

    def __init__(self, robot: RobotSpec, cfg: Go2WalkConfig | None = None,
                 push_velocity: float = 0.5,
                 push_interval_s: tuple[float, float] = (10.0, 15.0)):
        super().__init__(robot, cfg)
        self.push_velocity = push_velocity
        self.push_interval_s = push_interval_s
        self.feet = tuple(robot.sites["feet"])
        self.root_joint = ""
        self.thigh_bodies: tuple[str, ...] = ()

    # ----------------------------------------------------------------- scene
    def build_scene(self, spec: mujoco.MjSpec) -> None:
        """Checkered floor, light, and touch sensors on the feet, thighs and trunk."""
        add_floor_and_light(spec, rgba=(1.0, 1.0, 1.0, 1.0))
        tex = spec.add_texture()
        tex.name = "floor_checker"
        tex.type = mujoco.mjtTexture.mjTEXTURE_2D
        tex.builtin = mujoco.mjtBuiltin.mjBUILTIN_CHECKER
        tex.rgb1 = [0.42, 0.45, 0.5]
        tex.rgb2 = [0.28, 0.3, 0.34]
        tex.width = tex.height = 64
        mat = spec.add_material()
        mat.name = "floor_checker"
        mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "floor_checker"
        mat.texuniform = True
        mat.texrepeat = [1.0, 1.0]  # 1 m texture: 0.5 m squares
        spec.geom("floor").material = "floor_checker"

        base = spec.body(self.robot.base_body)
        self.root_joint = next(j.name for j in base.joints
                               if j.type == mujoco.mjtJoint.mjJNT_FREE)
        # Touch sensors sum the normal forces of contacts inside their site's volume
        # on the site's body. Foot sites are enlarged to contain the contact points.
        for foot in self.feet:
            spec.site(foot).size = [FOOT_SITE_RADIUS, 0.0, 0.0]
            _add_touch(spec, foot)
        trunk = spec.geom("trunk")
        _add_touch(spec, _add_site(base, "trunk_zone", mujoco.mjtGeom.mjGEOM_BOX,
                                   [s + 0.01 for s in trunk.size], trunk.pos))
        thighs = []
        for body in spec.bodies:
            if body.name.endswith("_thigh"):
                # thigh collision capsule: z from -0.03 to -0.19, radius 0.022
                _add_touch(spec, _add_site(body, f"{body.name}_zone",
                                           mujoco.mjtGeom.mjGEOM_CAPSULE, [0.03, 0.09, 0.0],
                                           [0.0, 0.0, -0.11]))
                thighs.append(body.name)
        self.thigh_bodies = tuple(thighs)

    def observation_bounds(self) -> TermBounds:
        """Unit vectors and the clock ([-1, 1]), joint positions (soft limits), the last action.

        The last action lies in [-1, 1]. Velocities are unbounded, and so is the command
        (``set_command`` takes any value).
        """
        return {"projected_gravity": (-1.0, 1.0), "gait_phase": (-1.0, 1.0),
                "joint_pos": self.relative_joint_bounds(), "last_action": (-1.0, 1.0)}

    def setup(self, sim: SimState) -> None:
        """Indices of the base and sensors; per-env command, timer and contact buffers."""
        super().setup(sim)
        n = sim.num_envs
        f64: dict[str, Any] = {"dtype": torch.float64, "device": sim.device}
        self.root_qpos = sim.joint_qpos_slice(self.root_joint)
        self.root_dof = sim.joint_dof_slice(self.root_joint)
        self.foot_touch = as_index([sim.sensor_slice(f"{f}_touch").start for f in self.feet],
                                 sim.device)
        self.thigh_touch = as_index([sim.sensor_slice(f"{b}_zone_touch").start
                                   for b in self.thigh_bodies], sim.device)
        # Basic slicing when the joints are consecutive in qpos / qvel (they are for the
        # Go2): a view, much cheaper than advanced indexing with a tensor of ids.
        self.trunk_touch = sim.sensor_slice("trunk_zone_touch").start
        self.kp = torch.tensor(self.robot.kp, **f64)
        self.kd = torch.tensor(self.robot.kd, **f64)
        self.effort = torch.tensor(self.robot.effort, **f64)
        self.nj = len(self.robot.joints)
        self.dt = sim.control_dt
        self.ema_alpha = min(1.0, self.dt / TRACKING_EMA_S)

        self.commands = torch.zeros(n, 3, **f64)
        self.command_timer = torch.zeros(n, **f64)
        self.push_timer = torch.zeros(n, **f64)
        self.phase = torch.zeros(n, **f64)
        self.foot_sites = as_index([sim.site_id(f) for f in self.feet], sim.device)
        self.last_joint_vel = torch.zeros(n, self.nj, **f64)
        self.joint_acc = torch.zeros(n, self.nj, **f64)
        self.ema_lin_err = torch.ones(n, **f64)
        self.ema_yaw_err = torch.ones(n, **f64)
        self.ema_quality = torch.zeros(n, **f64)
        self.fallen = torch.zeros(n, dtype=torch.bool, device=sim.device)
        self._gen = torch.Generator().manual_seed(0)  # replaced by the env's at reset

    # ------------------------------------------------------------ state views
    @property
    def base_pos(self) -> torch.Tensor:
        """[B, 3] world position of the base."""
        return self.sim.qpos[:, self.root_qpos.start:self.root_qpos.start + 3]

    @property
    def base_quat(self) -> torch.Tensor:
        """[B, 4] base orientation (w, x, y, z)."""
        return self.sim.qpos[:, self.root_qpos.start + 3:self.root_qpos.stop]

    @property
    def lin_vel_b(self) -> torch.Tensor:
        """[B, 3] base linear velocity in the base frame."""
        v_w = self.sim.qvel[:, self.root_dof.start:self.root_dof.start + 3]
        return base_lin_vel_b(self.base_quat, v_w)

    @property
    def ang_vel_b(self) -> torch.Tensor:
        """[B, 3] base angular velocity in the base frame (MuJoCo freejoint convention)."""
        return self.sim.qvel[:, self.root_dof.start + 3:self.root_dof.stop]

    @property
    def gravity_b(self) -> torch.Tensor:
        """[B, 3] projected gravity."""
        return projected_gravity(self.base_quat)

    @property
    def foot_forces(self) -> torch.Tensor:
        """[B, 4] normal contact force on each foot (touch sensors), N."""
        return self.sim.sensordata[:, self.foot_touch]

    @property
    def joint_torques(self) -> torch.Tensor:
        """[B, nj] actuator torque estimated from the PD law with the nominal gains.

        ``kp (ctrl - q) - kd qd`` clipped to the effort limits; per-env randomised
        gains (+-15 %) are not visible to tasks, so this is an estimate.
        """
        tau = self.kp * (self.sim.ctrl[:, :self.nj] - self.joint_pos) - self.kd * self.joint_vel
        return torch.maximum(torch.minimum(tau, self.effort), -self.effort)

    @property
    def foot_contact(self) -> torch.Tensor:
        """[B, 4] bool: feet touching the ground (touch force above 1 N)."""
        return self.foot_forces > CONTACT_FORCE

    @property
    def foot_height(self) -> torch.Tensor:
        """[B, 4] height of the foot centres above the floor, m."""
        return self.sim.site_xpos[:, self.foot_sites, 2]

    @property
    def desired_contact(self) -> torch.Tensor:
        """[B, 4] bool: feet the gait clock wants down now (:func:`desired_contact`)."""
        return desired_contact(self.phase, self.commands)

    # ---------------------------------------------------------------- terms
    def reward_terms(self) -> list[RewardTerm]:
        """The configured terms with their per-second weights multiplied by the control dt."""
        return [RewardTerm(t.name, t.fn, t.weight * self.sim.control_dt)
                for t in super().reward_terms()]

    # ------------------------------------------------------------- per step
    def post_physics(self) -> None:
        """Joint acceleration, feet air time, tracking averages, falls, commands, pushes."""
        dt, qd = self.dt, self.joint_vel
        # In place throughout: per-env buffers stay normal tensors when a policy is rolled
        # out under torch.inference_mode (resets write into them outside it).
        self.joint_acc.copy_((qd - self.last_joint_vel) / dt)
        self.last_joint_vel.copy_(qd)

        self.phase.copy_(advance_phase(self.phase, dt))
        g = self.gravity_b
        self.fallen.copy_((self.sim.sensordata[:, self.trunk_touch] > CONTACT_FORCE)
                       | (self.base_pos[:, 2] < FALL_HEIGHT) | (tilt_angle(g) > FALL_TILT))

        lin_err = (self.lin_vel_b[:, :2] - self.commands[:, :2]).norm(dim=1)
        yaw_err = (self.ang_vel_b[:, 2] - self.commands[:, 2]).abs()
        quality = torch.exp(-(lin_err / SUCCESS_LIN_ERR).square()
                            - (yaw_err / SUCCESS_YAW_ERR).square())
        a = self.ema_alpha
        self.ema_lin_err.lerp_(lin_err, a)
        self.ema_yaw_err.lerp_(yaw_err, a)
        self.ema_quality.lerp_(quality, a)

        self.command_timer -= dt
        due = (self.command_timer <= 0.0).nonzero().flatten()
        if len(due):
            self._resample_commands(due, self._gen)
        if self.push_velocity > 0.0:
            self.push_timer -= dt
            due = (self.push_timer <= 0.0).nonzero().flatten()
            if len(due):
                kick = self.rand(len(due), [-self.push_velocity] * 2, [self.push_velocity] * 2,
                                 self._gen)
                v0 = self.root_dof.start
                self.sim.qvel[due, v0:v0 + 2] += kick
                self.push_timer[due] = self.rand(len(due), self.push_interval_s[0],
                                                 self.push_interval_s[1], self._gen)

    def success(self) -> torch.Tensor:
        """Planar velocity (and yaw rate) tracked over the last ~second, not fallen."""
        return ((self.ema_lin_err < SUCCESS_LIN_ERR) & (self.ema_yaw_err < SUCCESS_YAW_ERR)
                & ~self.fallen)

    def progress(self) -> torch.Tensor:
        """Recent tracking quality in [0, 1] (0 when fallen)."""
        return torch.where(self.fallen, 0.0, self.ema_quality.clamp(0.0, 1.0))

    def terminated(self) -> torch.Tensor:
        """Trunk on the ground, base below 0.15 m, or tilted beyond 1 rad."""
        return self.fallen.clone()

    # -------------------------------------------------------------- commands
    def set_command(self, env_ids: torch.Tensor, command: Sequence[float] | torch.Tensor,
                    hold: bool = True) -> None:
        """Command ``(vx, vy, yaw rate)`` (a 3-sequence or [n, 3]) to ``env_ids``.

        With ``hold`` the command is kept until the env resets (no resampling); pushes
        are unaffected (stop them with ``push_timer``). For evaluations and teleoperation.
        """
        env_ids = torch.as_tensor(env_ids, device=self.commands.device).flatten()
        cmd = torch.as_tensor(command, dtype=torch.float64, device=self.commands.device)
        self.commands[env_ids] = cmd.expand(len(env_ids), 3)
        if hold:
            self.command_timer[env_ids] = math.inf

    # ---------------------------------------------------------------- reset
    def _resample_commands(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        n = len(env_ids)
        cmd = self.rand(n, COMMAND_LOW, COMMAND_HIGH, gen)
        standing = torch.rand(n, generator=gen, dtype=torch.float64) < STANDING_FRACTION
        cmd[standing.to(cmd.device)] = 0.0
        self.commands[env_ids] = cmd
        self.command_timer[env_ids] = self.rand(n, RESAMPLE_S[0], RESAMPLE_S[1], gen)

    def reset(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        """Default pose + joint noise at reset height, random yaw, small base velocity."""
        super().reset(env_ids, gen)
        self._gen = gen
        sim, n, nj = self.sim, len(env_ids), self.nj
        q = self.default_q + self.rand(n, [-RESET_JOINT_NOISE] * nj, [RESET_JOINT_NOISE] * nj,
                                       gen)
        lower = torch.tensor(self.robot.lower, dtype=torch.float64, device=sim.device)
        upper = torch.tensor(self.robot.upper, dtype=torch.float64, device=sim.device)
        sim.qpos[rows(env_ids, self.qpos_ids)] = torch.maximum(torch.minimum(q, upper), lower)
        p0 = self.root_qpos.start
        yaw = self.rand(n, -math.pi, math.pi, gen)
        root = torch.zeros(n, 7, dtype=torch.float64, device=sim.device)
        root[:, 2] = RESET_HEIGHT
        root[:, 3:] = yaw_quat(yaw)
        sim.qpos[env_ids, p0:p0 + 7] = root
        v0 = self.root_dof.start
        sim.qvel[env_ids, v0:v0 + 6] = self.rand(
            n, [-RESET_BASE_VEL] * 6, [RESET_BASE_VEL] * 6, gen)

        self._resample_commands(env_ids, gen)
        self.push_timer[env_ids] = self.rand(n, self.push_interval_s[0],
                                             self.push_interval_s[1], gen)
        self.phase[env_ids] = torch.rand(n, generator=gen, dtype=torch.float64).to(sim.device)
        self.joint_acc[env_ids] = 0.0
        self.ema_lin_err[env_ids] = 1.0
        self.ema_yaw_err[env_ids] = 1.0
        self.ema_quality[env_ids] = 0.0
        self.fallen[env_ids] = False

    def after_reset(self, env_ids: torch.Tensor) -> None:
        """Start the joint-acceleration difference from the reset velocities."""
        self.last_joint_vel[env_ids] = self.joint_vel[env_ids]


def _add_site(body: mujoco.MjsBody, name: str, kind: mujoco.mjtGeom, size: Sequence[float],
              pos: Sequence[float]) -> str:
    site = body.add_site()
    site.name = name
    site.type = kind
    site.size = list(size)
    site.pos = list(pos)
    site.group = 4
    return name


def _add_touch(spec: mujoco.MjSpec, site: str) -> None:
    sensor = spec.add_sensor()
    sensor.name = f"{site}_touch"
    sensor.type = mujoco.mjtSensor.mjSENS_TOUCH
    sensor.objtype = mujoco.mjtObj.mjOBJ_SITE
    sensor.objname = site
