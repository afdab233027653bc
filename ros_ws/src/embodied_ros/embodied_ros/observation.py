"""Policy observations from robot state, built by the same functions as in simulation.

The vector a policy saw in training is assembled by pure torch functions in
``robots/<robot>/observation.py`` (:func:`robots.panda.observation.build_reach_observation`,
:func:`robots.panda.observation.build_push_observation`,
:func:`robots.go2.observation.build_observation`), which the simulated tasks call too
or, for panda_push, reproduce (a parity test holds them equal); the builders here only
turn ROS state (joint positions and velocities, IMU, base velocity, the pushed
object's pose, command, goal) into their inputs. Forward kinematics for the arm's tcp runs
in torch on the robot's MJCF chain (:class:`robots.kinematics.SiteKinematics`), so
nothing here needs MuJoCo or the simulator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from numpy.typing import ArrayLike

from robots import RobotSpec
from robots.go2.observation import advance_phase, base_lin_vel_b
from robots.go2.observation import build_observation as build_walk_observation
from robots.kinematics import SiteKinematics
from robots.panda.observation import (
    PUSH_GEOMETRY,
    build_push_observation,
    build_reach_observation,
    gripper_opening,
)


@dataclass
class RobotState:
    """The newest robot state, in robot.yaml joint order (floats, SI units)."""

    q: np.ndarray
    qd: np.ndarray
    finger_q: np.ndarray = field(default_factory=lambda: np.zeros(0))
    quat_wxyz: np.ndarray | None = None  # base orientation (IMU)
    ang_vel_b: np.ndarray | None = None  # base angular velocity, base frame (IMU)
    lin_vel_b: np.ndarray | None = None  # base linear velocity, base frame (estimator)
    object_pos: np.ndarray | None = None  # pushed object's centre, arm base frame (perception)
    object_quat_wxyz: np.ndarray | None = None  # its orientation, unit (perception)


def floating_base_state(free_qpos: np.ndarray, free_qvel: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(quaternion w, x, y, z [4]; angular velocity [3]; linear velocity [3]) of a freejoint.

    From a MuJoCo freejoint's qpos [7] and qvel [6]; both velocities in the base frame
    (what an IMU and a state estimator report on hardware). MuJoCo's freejoint angular
    velocity is already in the body frame.
    """
    quat = np.asarray(free_qpos[3:7], dtype=np.float64)
    lin_w = torch.as_tensor(np.asarray(free_qvel[0:3], dtype=np.float64))[None]
    lin_b = base_lin_vel_b(torch.as_tensor(quat)[None], lin_w)[0].numpy()
    return quat.copy(), np.asarray(free_qvel[3:6], dtype=np.float64).copy(), lin_b


def _row(x: ArrayLike) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float64)).reshape(1, -1)


class ObservationBuilder(ABC):
    """Builds the observation of one task from :class:`RobotState` and the task inputs."""

    task: str = ""
    obs_dim: int = 0
    legged: bool = False  # needs IMU, base velocity and a velocity command
    needs_object: bool = False  # needs the pose of an object (``object_pose``)
    # The task's observation terms in order (checked against an exported policy's
    # ``observation`` layout when not empty).
    terms: tuple[str, ...] = ()
    # The task settings (an exported policy's ``task_settings``) the builder reads.
    settings: tuple[str, ...] = ()

    def __init__(self, robot: RobotSpec, settings: Mapping[str, float] | None = None):
        """A builder for ``robot``; ``settings``: the policy's task settings.

        Raises:
            ValueError: ``settings`` names one the builder does not know (the policy
                was trained with a setting the bridge would not reproduce).
        """
        unknown = sorted(set(settings or {}) - set(self.settings))
        if unknown:
            raise ValueError(f"the policy was trained with the task setting '{unknown[0]}', "
                             f"which the bridge's '{self.task}' observation does not build "
                             f"(it reads {list(self.settings)}). Fix: update embodied_ros")
        self.robot = robot
        self.default = robot.default_pose

    @abstractmethod
    def build(self, state: RobotState, last_action: np.ndarray,
              command: np.ndarray) -> np.ndarray:
        """float32 [1, obs_dim]; ``command`` is the task input (goal or velocity command)."""

    def check_terms(self, layout: list[dict]) -> None:
        """ValueError unless an exported policy's observation ``layout`` has our ``terms``.

        ``layout`` is the metadata's list of ``{"name": ...}`` in observation order; an
        empty layout or a builder without ``terms`` is not checked.
        """
        names = tuple(str(t.get("name")) for t in layout)
        if self.terms and names and names != self.terms:
            raise ValueError(f"the policy observes the terms {list(names)}, the bridge builds "
                             f"{list(self.terms)} for task '{self.task}'")

    def reset(self) -> None:
        """Forget internal state (a new hand-over to the policy)."""

    def advance(self) -> None:
        """One policy step was taken (for builders with a clock)."""


class ArmObservation(ObservationBuilder):
    """Base of the Panda builders: tcp forward kinematics and the gripper opening."""

    def __init__(self, robot: RobotSpec, settings: Mapping[str, float] | None = None):
        super().__init__(robot, settings)
        if robot.gripper is None or "ee" not in robot.sites:
            raise ValueError(f"{self.task} needs a robot with a gripper and an 'ee' site; "
                             f"'{robot.name}' has none")
        self.kinematics = SiteKinematics.from_robot(robot, "ee")

    def arm_inputs(self, state: RobotState) -> tuple[torch.Tensor, torch.Tensor]:
        """(tcp position [1, 3], gripper opening [1, 1]) of ``state``."""
        g = self.robot.gripper
        opening = gripper_opening(_row(state.finger_q), g.lower, g.upper)
        return self.kinematics.position(_row(state.q)), opening


class ReachObservation(ArmObservation):
    """panda_reach: arm terms + target minus tcp; the command is the goal point [3]."""

    task = "panda_reach"
    obs_dim = 29

    def build(self, state: RobotState, last_action: np.ndarray,
              command: np.ndarray) -> np.ndarray:
        """float32 [1, 29]; ``command`` is the goal point [3] (world frame, m)."""
        ee, opening = self.arm_inputs(state)
        obs = build_reach_observation(_row(state.q), _row(state.qd), _row(self.default),
                                      opening, ee, _row(last_action), _row(command))
        return obs.to(torch.float32).numpy()


class PushObservation(ArmObservation):
    """panda_push: arm terms, the cube's pose relative to goal and tcp, the push target.

    The cube is the object of ``state`` (``object_pos``, ``object_quat_wxyz``); the
    command is the goal on the table (x, y; a z is ignored: the goal lies on the table
    top, at the arm base's height). The push target's release radius is the policy's
    task setting ``release_radius``; a policy whose metadata has none was trained with
    :data:`robots.panda.observation.PUSH_GEOMETRY`'s.
    """

    task = "panda_push"
    obs_dim = 40
    needs_object = True
    terms = ("joint_pos", "joint_vel", "gripper", "ee_pos", "last_action", "cube_pos",
             "cube_rot6d", "cube_to_goal", "ee_to_cube", "push_target_rel")
    settings = ("release_radius",)

    def __init__(self, robot: RobotSpec, settings: Mapping[str, float] | None = None):
        super().__init__(robot, settings)
        radius = (settings or {}).get("release_radius", PUSH_GEOMETRY.release_radius)
        self.geometry = replace(PUSH_GEOMETRY, release_radius=float(radius))

    def build(self, state: RobotState, last_action: np.ndarray,
              command: np.ndarray) -> np.ndarray:
        """float32 [1, 40]; ``command`` is the goal [2 or 3] (arm base frame, m)."""
        if state.object_pos is None or state.object_quat_wxyz is None:
            raise ValueError("panda_push observes the cube: the state has no object pose")
        ee, opening = self.arm_inputs(state)
        quat = np.asarray(state.object_quat_wxyz, dtype=np.float64)
        obs = build_push_observation(_row(state.q), _row(state.qd), _row(self.default),
                                     opening, ee, _row(last_action), _row(state.object_pos),
                                     _row(quat / np.linalg.norm(quat)),
                                     _row(np.asarray(command)[:2]), self.geometry)
        return obs.to(torch.float32).numpy()


class WalkObservation(ObservationBuilder):
    """go2_walk: base velocities, projected gravity, command, gait clock, joints, last action.

    The gait clock is the node's own: it starts at phase 0 when the policy takes over and
    advances one control period per policy step (:func:`robots.go2.observation.advance_phase`),
    as the task advances it after every physics update.
    """

    task = "go2_walk"
    obs_dim = 50
    legged = True

    def __init__(self, robot: RobotSpec, settings: Mapping[str, float] | None = None):
        super().__init__(robot, settings)
        self.phase = torch.zeros(1, dtype=torch.float64)

    def reset(self, phase: float = 0.0) -> None:
        """Restart the gait clock at ``phase``."""
        self.phase.fill_(phase)

    def advance(self) -> None:
        """Advance the gait clock by one control period."""
        self.phase = advance_phase(self.phase, self.robot.control_dt)

    def build(self, state: RobotState, last_action: np.ndarray,
              command: np.ndarray) -> np.ndarray:
        """float32 [1, 50]; ``command`` is the velocity command [3] (vx, vy m/s; yaw rate rad/s)."""
        obs = build_walk_observation(_row(state.lin_vel_b), _row(state.ang_vel_b),
                                     _row(state.quat_wxyz), _row(command), self.phase,
                                     _row(state.q), _row(state.qd), _row(self.default),
                                     _row(last_action))
        return obs.to(torch.float32).numpy()


BUILDERS: dict[str, type[ObservationBuilder]] = {
    b.task: b for b in (ReachObservation, PushObservation, WalkObservation)}


def make_builder(task: str, robot: RobotSpec,
                 settings: Mapping[str, float] | None = None) -> ObservationBuilder:
    """The observation builder of ``task`` with the policy's task ``settings``.

    ``settings`` is an exported policy's ``task_settings`` (None: a policy exported
    before policies carried them, built with the task's settings of that time). A clear
    error for tasks the bridge cannot run.
    """
    if task not in BUILDERS:
        raise ValueError(f"the ROS bridge has no observation builder for task '{task}'; it "
                         f"runs {sorted(BUILDERS)}. Fix: add one in embodied_ros/observation.py")
    return BUILDERS[task](robot, settings)
