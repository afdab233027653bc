"""Policy observations from robot state, built by the simulator's own observation code.

The vector a policy saw in training is assembled by pure functions in ``sim/tasks``
(:func:`sim.tasks.panda_reach.build_reach_observation`,
:func:`sim.tasks.go2_walk.build_observation`); the builders here only turn ROS state
(joint positions and velocities, IMU, base velocity, command, goal) into their inputs.
Forward kinematics for the arm's tcp runs the robot's own MuJoCo model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import mujoco
import numpy as np
import torch

from robots import RobotSpec
from robots.build import robot_mjspec
from sim.tasks.go2_walk import advance_phase, base_lin_vel_b
from sim.tasks.go2_walk import build_observation as build_walk_observation
from sim.tasks.panda_base import gripper_opening
from sim.tasks.panda_reach import build_reach_observation


@dataclass
class RobotState:
    """The newest robot state, in robot.yaml joint order (floats, SI units)."""

    q: np.ndarray
    qd: np.ndarray
    finger_q: np.ndarray = field(default_factory=lambda: np.zeros(0))
    quat_wxyz: np.ndarray | None = None  # base orientation (IMU)
    ang_vel_b: np.ndarray | None = None  # base angular velocity, base frame (IMU)
    lin_vel_b: np.ndarray | None = None  # base linear velocity, base frame (estimator)


def floating_base_state(free_qpos: np.ndarray, free_qvel: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(quaternion w, x, y, z; angular velocity, base frame; linear velocity, base frame)
    from a MuJoCo freejoint's qpos [7] and qvel [6] (what an IMU and a state estimator
    report on hardware). MuJoCo's freejoint angular velocity is already in the body frame."""
    quat = np.asarray(free_qpos[3:7], dtype=np.float64)
    lin_w = torch.as_tensor(np.asarray(free_qvel[0:3], dtype=np.float64))[None]
    lin_b = base_lin_vel_b(torch.as_tensor(quat)[None], lin_w)[0].numpy()
    return quat.copy(), np.asarray(free_qvel[3:6], dtype=np.float64).copy(), lin_b


def _row(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float64)).reshape(1, -1)


class ObservationBuilder(ABC):
    """Builds the observation of one task from :class:`RobotState` and the task inputs."""

    task: str = ""
    obs_dim: int = 0
    legged: bool = False  # needs IMU, base velocity and a velocity command

    def __init__(self, robot: RobotSpec):
        self.robot = robot
        self.default = robot.default_pose

    @abstractmethod
    def build(self, state: RobotState, last_action: np.ndarray,
              command: np.ndarray) -> np.ndarray:
        """float32 [1, obs_dim]; ``command`` is the task input (goal or velocity command)."""

    def reset(self) -> None:
        """Forget internal state (a new hand-over to the policy)."""

    def advance(self) -> None:
        """One policy step was taken (for builders with a clock)."""


class ArmKinematics:
    """Forward kinematics of a fixed-base robot's site (the tcp), on its MuJoCo model."""

    def __init__(self, robot: RobotSpec, site: str):
        self.model = robot_mjspec(robot).compile()
        self.data = mujoco.MjData(self.model)
        self.site = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, site)
        joint = lambda n: self.model.jnt_qposadr[  # noqa: E731
            mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, n)]
        self.qadr = np.array([joint(n) for n in robot.joint_names])
        fingers = robot.gripper.joints if robot.gripper else ()
        self.fadr = np.array([joint(n) for n in fingers], dtype=int)

    def site_position(self, q: np.ndarray, finger_q: np.ndarray | None = None) -> np.ndarray:
        """World (= arm base) position [3] of the site at joint positions ``q``."""
        self.data.qpos[self.qadr] = q
        if finger_q is not None and len(self.fadr):
            self.data.qpos[self.fadr] = finger_q
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.site_xpos[self.site].copy()


class ReachObservation(ObservationBuilder):
    """panda_reach: arm terms + target minus tcp; the command is the goal point [3]."""

    task = "panda_reach"
    obs_dim = 29

    def __init__(self, robot: RobotSpec):
        super().__init__(robot)
        if robot.gripper is None or "ee" not in robot.sites:
            raise ValueError(f"panda_reach needs a robot with a gripper and an 'ee' site; "
                             f"'{robot.name}' has none")
        self.kinematics = ArmKinematics(robot, robot.sites["ee"])

    def build(self, state: RobotState, last_action: np.ndarray,
              command: np.ndarray) -> np.ndarray:
        g = self.robot.gripper
        ee = self.kinematics.site_position(state.q, state.finger_q)
        opening = gripper_opening(_row(state.finger_q), g.lower, g.upper)
        obs = build_reach_observation(_row(state.q), _row(state.qd), _row(self.default),
                                      opening, _row(ee), _row(last_action), _row(command))
        return obs.to(torch.float32).numpy()


class WalkObservation(ObservationBuilder):
    """go2_walk: base velocities, projected gravity, command, gait clock, joints, last action.

    The gait clock is the node's own: it starts at phase 0 when the policy takes over and
    advances one control period per policy step (:func:`sim.tasks.go2_walk.advance_phase`),
    as the task advances it after every physics update.
    """

    task = "go2_walk"
    obs_dim = 50
    legged = True

    def __init__(self, robot: RobotSpec):
        super().__init__(robot)
        self.phase = torch.zeros(1, dtype=torch.float64)

    def reset(self, phase: float = 0.0) -> None:
        """Restart the gait clock at ``phase``."""
        self.phase.fill_(phase)

    def advance(self) -> None:
        self.phase = advance_phase(self.phase, self.robot.control_dt)

    def build(self, state: RobotState, last_action: np.ndarray,
              command: np.ndarray) -> np.ndarray:
        obs = build_walk_observation(_row(state.lin_vel_b), _row(state.ang_vel_b),
                                     _row(state.quat_wxyz), _row(command), self.phase,
                                     _row(state.q), _row(state.qd), _row(self.default),
                                     _row(last_action))
        return obs.to(torch.float32).numpy()


BUILDERS: dict[str, type[ObservationBuilder]] = {
    b.task: b for b in (ReachObservation, WalkObservation)}


def make_builder(task: str, robot: RobotSpec) -> ObservationBuilder:
    """The observation builder of ``task``; a clear error for tasks the bridge cannot run."""
    if task not in BUILDERS:
        raise ValueError(f"the ROS bridge has no observation builder for task '{task}'; it "
                         f"runs {sorted(BUILDERS)}. Fix: add one in embodied_ros/observation.py")
    return BUILDERS[task](robot)
