"""go2_walk's observation and reward terms: pure batched torch functions.

The observation itself is built by the robot-side functions of
:mod:`robots.go2.observation` (a deployment calls them with its sensor readings);
the term functions here take the task (a :class:`sim.tasks.go2_walk.task.Go2Walk`)
and are what its config weighs (:class:`sim.tasks.go2_walk.config.Go2WalkConfig`).
"""

from __future__ import annotations

from typing import Protocol

import torch

from robots.go2.observation import gait_clock, joint_pos_rel
from sim.protocol import SimState

CONTACT_FORCE = 1.0  # N; touch-sensor reading that counts as contact

# Gait clock (periodic-reward shaping as in Siekmann et al. 2021 and walk-these-ways,
# Margolis & Agrawal 2022): a trot, diagonal pairs in phase, half a period apart.
GAIT_OFFSETS = (0.0, 0.5, 0.5, 0.0)  # per foot, robot.yaml order FL, FR, RL, RR
GAIT_DUTY = 0.5  # share of the period a foot is in stance
STANDING_SPEED = 0.1  # command norm below which all feet are asked to stay down


class WalkingTask(Protocol):
    """What the terms read from the task (:class:`sim.tasks.go2_walk.task.Go2Walk`)."""

    @property
    def lin_vel_b(self) -> torch.Tensor:
        """[B, 3] base linear velocity in the base frame (m/s)."""
        ...

    @property
    def ang_vel_b(self) -> torch.Tensor:
        """[B, 3] base angular velocity in the base frame (rad/s)."""
        ...

    @property
    def gravity_b(self) -> torch.Tensor:
        """[B, 3] unit gravity direction in the base frame."""
        ...

    @property
    def commands(self) -> torch.Tensor:
        """[B, 3] velocity command: vx, vy (m/s), yaw rate (rad/s)."""
        ...

    @property
    def phase(self) -> torch.Tensor:
        """[B] gait clock phase in [0, 1)."""
        ...

    @property
    def default_q(self) -> torch.Tensor:
        """[nj] default joint positions (rad)."""
        ...

    @property
    def joint_pos(self) -> torch.Tensor:
        """[B, nj] joint positions (rad)."""
        ...

    @property
    def joint_vel(self) -> torch.Tensor:
        """[B, nj] joint velocities (rad/s)."""
        ...

    @property
    def joint_acc(self) -> torch.Tensor:
        """[B, nj] joint accelerations (rad/s^2)."""
        ...

    @property
    def joint_torques(self) -> torch.Tensor:
        """[B, nj] actuator torques (N m)."""
        ...

    @property
    def foot_contact(self) -> torch.Tensor:
        """[B, 4] bool: feet touching the ground."""
        ...

    @property
    def foot_height(self) -> torch.Tensor:
        """[B, 4] feet site heights in the world frame (m)."""
        ...

    @property
    def desired_contact(self) -> torch.Tensor:
        """[B, 4] bool: feet the gait clock wants on the ground."""
        ...

    @property
    def fallen(self) -> torch.Tensor:
        """[B] bool: the robot fell (trunk contact, base too low or too tilted)."""
        ...

    @property
    def thigh_touch(self) -> slice | torch.Tensor:
        """Indices of the thigh touch sensors in ``sim.sensordata``."""
        ...

    @property
    def sim(self) -> SimState:
        """The batched simulator state."""
        ...


def desired_contact(phase: torch.Tensor, command: torch.Tensor) -> torch.Tensor:
    """[B, 4] bool: which feet the trot clock wants on the ground (all when standing)."""
    offsets = torch.tensor(GAIT_OFFSETS, dtype=phase.dtype, device=phase.device)
    stance = torch.remainder(phase[:, None] + offsets, 1.0) < GAIT_DUTY
    standing = command.norm(dim=1) < STANDING_SPEED
    return stance | standing[:, None]


def tilt_angle(gravity_b: torch.Tensor) -> torch.Tensor:
    """Angle [B] between the base z axis and world up, from the projected gravity."""
    return torch.acos((-gravity_b[:, 2]).clamp(-1.0, 1.0))


# ------------------------------------------------------ terms of the task
def obs_base_lin_vel(task: WalkingTask) -> torch.Tensor:
    """[B, 3] base linear velocity, base frame."""
    return task.lin_vel_b


def obs_base_ang_vel(task: WalkingTask) -> torch.Tensor:
    """[B, 3] base angular velocity, base frame."""
    return task.ang_vel_b


def obs_projected_gravity(task: WalkingTask) -> torch.Tensor:
    """[B, 3] gravity direction in the base frame."""
    return task.gravity_b


def obs_velocity_command(task: WalkingTask) -> torch.Tensor:
    """[B, 3] the (vx, vy, yaw rate) command."""
    return task.commands


def obs_gait_phase(task: WalkingTask) -> torch.Tensor:
    """[B, 2] (sin, cos) of the gait clock."""
    return gait_clock(task.phase)


def obs_joint_pos(task: WalkingTask) -> torch.Tensor:
    """[B, nj] joint positions relative to the default pose."""
    return joint_pos_rel(task.joint_pos, task.default_q)


def obs_joint_vel(task: WalkingTask) -> torch.Tensor:
    """[B, nj] joint velocities."""
    return task.joint_vel


def track_lin_vel_xy(task: WalkingTask, std: float) -> torch.Tensor:
    """[B] ``exp(-|cmd_xy - v_xy|^2 / std^2)``."""
    return torch.exp(-(task.commands[:, :2] - task.lin_vel_b[:, :2]).square().sum(1)
                     / std ** 2)


def track_ang_vel_z(task: WalkingTask, std: float) -> torch.Tensor:
    """[B] ``exp(-(cmd_yaw - w_z)^2 / std^2)``."""
    return torch.exp(-(task.commands[:, 2] - task.ang_vel_b[:, 2]).square() / std ** 2)


def lin_vel_z(task: WalkingTask) -> torch.Tensor:
    """[B] squared vertical base velocity."""
    return task.lin_vel_b[:, 2].square()


def ang_vel_xy(task: WalkingTask) -> torch.Tensor:
    """[B] squared roll and pitch rates."""
    return task.ang_vel_b[:, :2].square().sum(1)


def joint_torques(task: WalkingTask) -> torch.Tensor:
    """[B] squared estimated joint torques."""
    return task.joint_torques.square().sum(1)


def joint_acc(task: WalkingTask) -> torch.Tensor:
    """[B] squared joint accelerations."""
    return task.joint_acc.square().sum(1)


def gait_contact(task: WalkingTask) -> torch.Tensor:
    """[B] share of the feet whose contact matches the gait clock."""
    return (task.foot_contact == task.desired_contact).to(torch.float64).mean(1)


def feet_clearance(task: WalkingTask, height: float) -> torch.Tensor:
    """[B] squared error of the swinging feet's height to ``height`` (m)."""
    return ((task.foot_height - height).square() * ~task.desired_contact).sum(1)


def undesired_contacts(task: WalkingTask) -> torch.Tensor:
    """[B] number of thighs touching something."""
    return (task.sim.sensordata[:, task.thigh_touch] > CONTACT_FORCE).sum(1).to(torch.float64)


def flat_orientation(task: WalkingTask) -> torch.Tensor:
    """[B] squared tilt of the base (projected gravity's xy)."""
    return task.gravity_b[:, :2].square().sum(1)


def termination(task: WalkingTask) -> torch.Tensor:
    """[B] 1.0 when the robot fell this step."""
    return task.fallen.to(torch.float64)
