"""Tasks as terms: observations, weighted rewards, success, progress, resets.

A task is written once against :class:`sim.protocol.SimState` with batched
torch operations, so every backend (C MuJoCo on the CPU, GPU engines) runs the
same task code. Subclasses declare their terms as pure functions of the task
(``observation_functions``, ``reward_functions``); a :class:`TaskConfig` holds
every reward term's weight and parameters and every observation term's noise,
so a weight sweep is a config change. The env sums and concatenates.

Unlike Isaac Lab and mjlab, whose term configs also name the term's function,
the functions stay with the task class and the config holds only numbers, so
every setting is a plain Hydra override (``task.rewards.<term>.weight=...``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import fields as dataclasses_fields
from typing import Any, ClassVar

import mujoco
import torch

from robots import RobotSpec
from robots.actions import JointPositionAction
from sim.protocol import SimState


@dataclass(frozen=True)
class ObsTerm:
    """One slice of the observation vector; ``noise`` is a uniform +-range added in training."""

    name: str
    fn: Callable[[], torch.Tensor]
    noise: float = 0.0


@dataclass(frozen=True)
class RewardTerm:
    """One weighted reward term; the env reward is the sum of ``weight * fn()``."""

    name: str
    fn: Callable[[], torch.Tensor]
    weight: float


# Term name -> pure function of the task (and, for reward terms, the term's parameters).
TermFunctions = Mapping[str, Callable[..., torch.Tensor]]
# Term name -> (low, high) of its values: floats or per-dimension sequences.
TermBounds = dict[str, tuple[Any, Any]]

# MuJoCo's joint limits are soft constraints: under bang-bang actions the Panda and Go2
# joints went up to 0.11 rad past them, the Panda fingers 20% of their range. Observation
# bounds derived from limits are widened by this share of each joint's range on each side.
SOFT_LIMIT_MARGIN = 0.5


def soft_limit_bounds(lower: Any, upper: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Joint limits widened by :data:`SOFT_LIMIT_MARGIN` of their range.

    These bound what a simulated joint position stays within (float64 tensors).
    """
    lower = torch.as_tensor(lower, dtype=torch.float64)
    upper = torch.as_tensor(upper, dtype=torch.float64)
    margin = SOFT_LIMIT_MARGIN * (upper - lower)
    return lower - margin, upper + margin


@dataclass
class RewardTermCfg:
    """A reward term's setting: the env adds ``weight * func(task, **params)``."""

    weight: float
    params: dict[str, float] = field(default_factory=dict)


@dataclass
class ObsTermCfg:
    """An observation term's setting: uniform +-``noise`` added in training."""

    noise: float = 0.0


@dataclass
class TaskConfig:
    """Every term setting of a task, by term name (reward terms are summed in this order).

    ``settings``: the task's own numbers that several terms share (a geometry, say), by
    name; a task declares the ones it has with their defaults.
    """

    rewards: dict[str, RewardTermCfg] = field(default_factory=dict)
    observations: dict[str, ObsTermCfg] = field(default_factory=dict)
    settings: dict[str, float] = field(default_factory=dict)


class TaskConfigError(ValueError):
    """A task config names a term or setting the task does not have.

    The message lists the known ones.
    """


_TERM_GROUPS = {"rewards": "reward", "observations": "observation"}


def configure(defaults: TaskConfig, overrides: Mapping[str, Any] | None,
              task: str) -> TaskConfig:
    """``defaults`` with ``overrides`` applied.

    ``overrides``: ``{"rewards": {term: {"weight": w, "params": {...}}}, "observations": {term:
    {"noise": n}}, "settings": {name: value}}`` (a ``None`` setting keeps the default). Other
    keys of ``overrides`` (a whole task config group entry may be passed) are ignored; an
    unknown term, setting or parameter raises :class:`TaskConfigError`.
    """
    cfg = copy.deepcopy(defaults)
    for name, value in ((overrides or {}).get("settings") or {}).items():
        if name not in cfg.settings:
            raise TaskConfigError(f"task '{task}' has no setting '{name}'; its settings: "
                                  f"{sorted(cfg.settings)}")
        if value is not None:
            cfg.settings[name] = float(value)
    for group, kind in _TERM_GROUPS.items():
        terms = getattr(cfg, group)
        for name, settings in ((overrides or {}).get(group) or {}).items():
            if name not in terms:
                raise TaskConfigError(f"task '{task}' has no {kind} term '{name}'; its {kind} "
                                      f"terms: {list(terms)}")
            term = terms[name]
            for key, value in (settings or {}).items():
                if key == "params" and isinstance(term, RewardTermCfg):
                    unknown = sorted(set(value or {}) - set(term.params))
                    if unknown:
                        raise TaskConfigError(
                            f"{kind} term '{name}' of task '{task}' has no parameter "
                            f"{unknown[0]!r}; its parameters: {sorted(term.params)}")
                    term.params.update({k: float(v) for k, v in (value or {}).items()})
                elif key != "params" and hasattr(term, key):
                    setattr(term, key, float(value))
                else:
                    known = [f.name for f in dataclasses_fields(term)]
                    raise TaskConfigError(f"{kind} term '{name}' of task '{task}' has no "
                                          f"setting '{key}'; its settings: {known}")
    return cfg


def per_step(fn: Callable) -> Callable:
    """Compute a derived quantity of the current state once per step.

    Reward, success, progress and observation terms often share quantities
    (distances, grasp tests); the env clears the cache whenever the physics
    state changes (after each physics step and each reset).
    """
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(self: Task) -> torch.Tensor:
        cache = self._step_cache
        if name not in cache:
            cache[name] = fn(self)
        return cache[name]

    return wrapper


class Task:
    """Base class: a robot, a scene, terms, and per-env task state.

    The env calls, in order: ``build_scene`` (before compiling), ``setup``
    (after compiling), then per step ``apply_action`` -> physics ->
    ``post_physics`` -> terms; and ``reset`` for envs that finished.

    Subclasses declare ``observation_functions`` (name -> ``fn(task)`` [B, d], in
    observation order), ``reward_functions`` (name -> ``fn(task, **params)`` [B]) and
    ``config_class``, whose defaults set every term's noise, weight and parameters.
    """

    name: str = ""
    robot_name: str = ""
    instruction: str = ""
    episode_length_s: float = 5.0
    decimation: int | None = None  # physics steps per control step; None: the robot's
    cameras: tuple[str, ...] = ()
    action_type: str = "joint_position"  # default action space (robots/actions.py)
    # ee_delta actions: box (low, high) of the commanded tcp in the robot base frame
    ee_bounds: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None
    config_class: ClassVar[type[TaskConfig]] = TaskConfig
    observation_functions: ClassVar[TermFunctions] = {}
    reward_functions: ClassVar[TermFunctions] = {}

    def __init__(self, robot: RobotSpec, cfg: TaskConfig | None = None):
        self.robot = robot
        self.cfg = cfg if cfg is not None else self.config_class()
        for group, fns in (("rewards", self.reward_functions),
                           ("observations", self.observation_functions)):
            terms = getattr(self.cfg, group)
            if set(terms) != set(fns):
                kind = _TERM_GROUPS[group]
                raise TaskConfigError(f"task '{self.name}' {kind} terms {list(fns)} do not "
                                      f"match its config's {list(terms)}")
        self._sim: SimState | None = None
        # The env's action mapping (set by the env; scripted experts act through it).
        self.action_map: JointPositionAction | None = None
        self._step_cache: dict[str, torch.Tensor] = {}

    def clear_cache(self) -> None:
        """Forget :func:`per_step` values; called by the env when the state changed."""
        self._step_cache.clear()

    # ----------------------------------------------------------------- scene
    def build_scene(self, spec: mujoco.MjSpec) -> None:
        """Add the floor, lights and task objects to the robot's MjSpec."""
        add_floor_and_light(spec)

    @property
    def sim(self) -> SimState:
        """The batched state the task was set up on.

        Raises:
            RuntimeError: before :meth:`setup`.
        """
        if self._sim is None:
            raise RuntimeError(f"task '{self.name}' is not set up: call setup(sim) first")
        return self._sim

    def setup(self, sim: SimState) -> None:
        """Resolve names to indices and allocate per-env buffers."""
        self._sim = sim
        n, dev = sim.num_envs, sim.device
        self.qpos_ids = as_index([sim.joint_qpos_slice(j.name).start for j in self.robot.joints])
        self.dof_ids = as_index([sim.joint_dof_slice(j.name).start for j in self.robot.joints])
        self.default_q = torch.tensor(self.robot.default_pose, device=dev, dtype=torch.float64)
        dim = self.action_map.action_dim if self.action_map else self.robot.action_dim
        self.last_action = torch.zeros(n, dim, device=dev, dtype=torch.float64)
        self.prev_action = torch.zeros_like(self.last_action)

    # ------------------------------------------------------------ per step
    def apply_action(self, actions: torch.Tensor) -> None:
        """Remember the actions the robot receives this step (for action terms)."""
        self.prev_action.copy_(self.last_action)
        self.last_action.copy_(actions)

    def post_physics(self) -> None:
        """Update task state after the physics step (commands, timers).

        A task that writes physics state here (e.g. pushes) must call
        :meth:`clear_cache` afterwards.
        """

    def observation_terms(self) -> list[ObsTerm]:
        """The policy observation, in ``observation_functions`` order, noise from the config."""
        return [ObsTerm(name, functools.partial(fn, self), self.cfg.observations[name].noise)
                for name, fn in self.observation_functions.items()]

    def observation_bounds(self) -> TermBounds:
        """(low, high) of the observation terms that are bounded, by term name, before noise.

        The env widens them by each term's noise. Terms not listed are unbounded. The
        base task declares none.
        """
        return {}

    def relative_joint_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Bounds of joint positions minus the default pose.

        They are the robot's limits, widened as :func:`soft_limit_bounds` says.
        """
        low, high = soft_limit_bounds(self.robot.lower, self.robot.upper)
        default = torch.as_tensor(self.robot.default_pose, dtype=torch.float64)
        return low - default, high - default

    def reward_terms(self) -> list[RewardTerm]:
        """The weighted reward terms, in config order, weights and parameters from the config."""
        return [RewardTerm(name, functools.partial(self.reward_functions[name], self,
                                                   **term.params), term.weight)
                for name, term in self.cfg.rewards.items()]

    def success(self) -> torch.Tensor:
        """bool [B]: the task is accomplished in the current state."""
        return torch.zeros(self.sim.num_envs, dtype=torch.bool, device=self.sim.device)

    def progress(self) -> torch.Tensor:
        """float [B] in [0, 1]: privileged task progress (stages for multi-stage tasks)."""
        return self.success().to(torch.float64)

    def terminated(self) -> torch.Tensor:
        """bool [B]: the episode ended in a failure or terminal state."""
        return torch.zeros(self.sim.num_envs, dtype=torch.bool, device=self.sim.device)

    def reset(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        """Write the initial state of ``env_ids``: by default the robot's default pose."""
        sim = self.sim
        sim.qpos[rows(env_ids, self.qpos_ids)] = self.default_q
        sim.qvel[rows(env_ids, self.dof_ids)] = 0.0
        self.last_action[env_ids] = 0.0
        self.prev_action[env_ids] = 0.0

    def after_reset(self, env_ids: torch.Tensor) -> None:
        """Called once the reset state's kinematics are computed (positions are valid)."""

    # ----------------------------------------------------------- helpers
    @property
    def joint_pos(self) -> torch.Tensor:
        """Robot joint positions [B, nj] (rad or m), in robot.yaml order."""
        return self.sim.qpos[:, self.qpos_ids]

    @property
    def joint_vel(self) -> torch.Tensor:
        """Robot joint velocities [B, nj] (rad/s or m/s), in robot.yaml order."""
        return self.sim.qvel[:, self.dof_ids]

    def rand(self, n: int, low: float | Sequence[float] | torch.Tensor,
             high: float | Sequence[float] | torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Uniform samples [n, d] between per-dimension bounds ``low`` and ``high``."""
        low = torch.as_tensor(low, dtype=torch.float64)
        high = torch.as_tensor(high, dtype=torch.float64)
        u = torch.rand((n, *low.shape), generator=gen, dtype=torch.float64)
        return (low + (high - low) * u).to(self.sim.device)


def as_index(ids: list[int], device: torch.device | str = "cpu") -> slice | torch.Tensor:
    """A slice for consecutive indices (a view, and much faster than fancy indexing), else ids."""
    if ids and ids == list(range(ids[0], ids[0] + len(ids))):
        return slice(ids[0], ids[0] + len(ids))
    return torch.tensor(ids, device=device)


def rows(env_ids: torch.Tensor, cols: slice | torch.Tensor) -> tuple:
    """Index of the block (env_ids x cols) of a [B, n] tensor, for cols from :func:`as_index`."""
    return (env_ids, cols) if isinstance(cols, slice) else (env_ids[:, None], cols)


def add_floor_and_light(spec: mujoco.MjSpec,
                        rgba: tuple[float, float, float, float] = (0.35, 0.38, 0.42, 1.0)) -> None:
    """A ground plane and a directional light, the shared base of every scene."""
    floor = spec.worldbody.add_geom()
    floor.name = "floor"
    floor.type = mujoco.mjtGeom.mjGEOM_PLANE
    floor.size = [0, 0, 0.05]
    floor.rgba = list(rgba)
    light = spec.worldbody.add_light()
    light.name = "sun"
    light.pos = [0.5, -0.5, 2.5]
    light.dir = [-0.2, 0.2, -1.0]
    light.diffuse = [0.7, 0.7, 0.7]
    light.castshadow = False
