"""The backend-neutral batched env: a task on a physics engine.

:class:`TaskEnv` implements :class:`sim.protocol.BatchedEnv` once for every
engine: actions (with their mapping and latency), observations with noise,
weighted rewards, success/progress, auto-reset with final observations,
divergence handling and the randomisation draws. The engine behind it is a
:class:`sim.physics.Physics` (C MuJoCo by default, see :mod:`sim.backends`).
One env step = ``decimation`` physics steps with the actuator targets held, as
on the real robot's PD loop. The observation is float32.

Seeding follows gymnasium: ``EnvConfig.seed=None`` seeds the env's generator
from the operating system's entropy (``env.seed`` says which seed it drew), an
explicit seed reproduces every draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mujoco
import torch

from robots import load_robot
from robots.actions import make_action_map
from robots.build import robot_mjspec
from robots.command_filter import DeployFilter, DeploySettings
from sim.physics import Physics, has_renderer
from sim.protocol import batch_actions
from sim.randomization import DomainRandomization
from sim.task import Task
from sim.visual import VisualRandomization, VisualSampler

# Builds a backend's physics: (compiled model, num_envs, decimation, cfg) -> Physics.
PhysicsFactory = Callable[[mujoco.MjModel, int, int, "EnvConfig"], Physics]


@dataclass
class EnvConfig:
    """Settings shared by every backend."""

    num_envs: int = 16
    seed: int | None = None  # None: drawn from the OS's entropy (gymnasium's convention)
    nthread: int | None = None  # physics threads; None: all cores
    obs_noise: bool = True
    randomization: DomainRandomization = field(default_factory=DomainRandomization)
    # How camera frames look (lights, surface colours, camera poses, pixel noise), drawn
    # per env at reset from a generator of its own; off by default (sim/visual.py).
    visual: VisualRandomization = field(default_factory=VisualRandomization)
    episode_length_s: float | None = None  # None: the task's own
    decimation: int | None = None  # physics steps per control step; None: the task's own
    divergence_qvel: float = 1e3  # |qvel| above this counts as a diverged simulation
    divergence_jump: float = 1.0  # |change of any qpos| in one control step, likewise
    # Coarser meshes for capsules/cylinders in camera frames: ~4x faster software
    # rendering, indistinguishable at 96 px. None: MuJoCo's default tessellation.
    render_tessellation: tuple[int, int] | None = (12, 6)
    # Draw the infinite floor out to this many metres only (sim/render.py: several times
    # faster software rendering; pixels of floor inside it unchanged). None: MuJoCo's.
    render_plane_extent: float | None = None
    # With render_plane_extent: each frame draws only the part of that floor its camera
    # sees (sim/plane_crop.py: the same quads; pixels equal but for vertex rounding, at
    # most 1 level in about 1e-5 of them). False: the whole extent in every frame.
    render_plane_crop: bool = True
    # Camera frames: "gl" (MuJoCo's OpenGL renderer on CPU copies of the envs), "engine"
    # (the backend's own renderer: MuJoCo Warp's ray tracer), "auto": the engine's on a
    # GPU, else GL (on the CPU, GL rendered 3.4x more frames/s than Warp's ray tracer here).
    renderer: str = "auto"
    # torch intra-op threads of the process (None: leave torch's setting). The env's
    # tensors are small, and torch's thread pool otherwise competes with MuJoCo's
    # physics threads for the cores: 1 thread made 256 Go2 envs on 2 cores 1.35x faster.
    torch_threads: int | None = 1
    # Action space (robots/actions.py): "joint_position" | "joint_delta"; None: the task's own.
    action: str | None = None
    action_speed: float = 0.5  # joint_delta: share of the joint velocity limits per action
    # Pass the joint targets through the ROS policy node's own target filters each
    # control step (robots/command_filter.py: joint margin, step and PD-torque bounds,
    # velocity and acceleration limits), so that training sees what deployment enforces.
    deploy_limits: bool = False
    deploy_settings: DeploySettings = field(default_factory=DeploySettings)
    # GPU-parallel engines: "cuda:0", "cpu" (Warp's CPU device); None: a GPU if there is one.
    device: str | None = None


def compile_task_model(task: Task) -> mujoco.MjModel:
    """The task's scene compiled: robot (with actuators and cameras) + task objects."""
    spec = robot_mjspec(task.robot)
    task.build_scene(spec)
    return spec.compile()


class TaskEnv:
    """A batch of one task's envs on a physics engine; implements :class:`sim.protocol.BatchedEnv`.

    ``physics`` builds the engine (default: C MuJoCo); ``overrides`` set fields of
    ``cfg`` by name (TypeError for a name EnvConfig does not have).
    """

    def __init__(self, task: Task | type[Task], cfg: EnvConfig | None = None,
                 physics: PhysicsFactory | None = None, **overrides: Any) -> None:
        cfg = cfg or EnvConfig()
        for key, value in overrides.items():
            if not hasattr(cfg, key):
                raise TypeError(f"unknown env setting '{key}'; EnvConfig has: "
                                f"{sorted(vars(EnvConfig()))}")
            setattr(cfg, key, value)
        self.cfg = cfg
        if cfg.torch_threads is not None and torch.get_num_threads() != cfg.torch_threads:
            torch.set_num_threads(cfg.torch_threads)
        if isinstance(task, type):
            task = task(load_robot(task.robot_name))
        self.task = task
        self.robot = task.robot
        self.model = compile_task_model(task)
        self.decimation = int(cfg.decimation or task.decimation or self.robot.decimation)
        if physics is None:
            from sim.backends.mujoco_c import mujoco_physics
            physics = mujoco_physics
        self.physics = physics(self.model, cfg.num_envs, self.decimation, cfg)
        self.backend = self.physics.name
        self.state = self.physics.state
        self.num_envs = cfg.num_envs
        self.device = self.state.device
        self.instruction = task.instruction
        self.camera_names = tuple(task.cameras or self.robot.camera_names)
        self.control_dt = self.state.control_dt
        self.action_map = make_action_map(cfg.action or task.action_type, self.robot,
                                          cfg.num_envs, cfg.action_speed, self.device,
                                          self.control_dt, task.ee_bounds)
        task.action_map = self.action_map  # the experts' IK speaks the env's action space
        self.action_dim = self.action_map.action_dim
        self.max_episode_steps = round(
            (cfg.episode_length_s or task.episode_length_s) / self.state.control_dt
        )
        self._ctrl_ids = slice(0, self.action_map.ctrl_dim)  # the robot's actuators come first
        self._nj = len(self.robot.joints)
        self._deploy = (DeployFilter(self.robot, cfg.num_envs, self.control_dt,
                                     cfg.deploy_settings, self.device)
                        if cfg.deploy_limits else None)
        self._gen = torch.Generator()
        # The seed of the generator's last (re)seeding; drawn from entropy without one.
        self.seed = self._gen.seed() if cfg.seed is None else int(cfg.seed)
        self._gen.manual_seed(self.seed)
        rnd = cfg.randomization
        if rnd.enabled and not self.physics.supports_parameter_randomization:
            print(f"[sim] {self.backend}: friction, mass and PD-gain randomisation is not "
                  "supported by this engine; only the action latency is randomised")
        task.setup(self.state)
        self._obs_terms = task.observation_terms()
        self._reward_terms = task.reward_terms()
        dev = self.device
        self.episode_step = torch.zeros(self.num_envs, dtype=torch.long, device=dev)
        self.episode_return = torch.zeros(self.num_envs, dtype=torch.float64, device=dev)
        self.diverged_total = 0
        self.diverged_envs = torch.zeros(self.num_envs, dtype=torch.long, device=dev)
        self.nan_action_total = 0  # env steps whose action held a NaN (replaced by 0)
        lat_hi = rnd.action_latency_steps[1] if rnd.enabled else 0
        # Ring buffer of the last actions sent; an env with latency d gets the one from d steps ago.
        self._head, self._env_ids = 0, torch.arange(self.num_envs, device=dev)
        self._history = torch.zeros(lat_hi + 1, self.num_envs, self.action_dim,
                                    dtype=torch.float64, device=dev)
        self._latency = torch.zeros(self.num_envs, dtype=torch.long, device=dev)
        self._renderers: dict[tuple, Any] = {}
        self._visual = self._visual_sampler()
        self._final_frames: dict[str, Any] | None = None  # see request_final_frames
        self.obs_dim = self._observe(noise=False).shape[1]
        self.obs_bounds = self._observation_bounds()
        self.reset()

    # ------------------------------------------------------------ set-up
    def _randomize(self, ids: torch.Tensor) -> None:
        rnd, n = self.cfg.randomization, len(ids)
        self._latency[ids] = rnd.sample_latency(n, self._gen).to(self.device)
        if not rnd.enabled:
            return
        friction = rnd.sample(rnd.friction_scale, n, self._gen)
        mass = rnd.sample(rnd.mass_scale, n, self._gen)
        gain = rnd.sample(rnd.pd_gain_scale, n, self._gen)
        if self.physics.supports_parameter_randomization:
            self.physics.scale_parameters(ids, friction, mass, gain, self._ctrl_ids)

    def _visual_sampler(self) -> VisualSampler | None:
        """The per-env visual draws, or None when visual randomisation is off."""
        if not self.cfg.visual.enabled:
            return None
        robot_body = (int(self.model.jnt_bodyid[self.model.actuator_trnid[0, 0]])
                      if self.model.nu else None)
        return VisualSampler(self.cfg.visual, self.model, robot_body, self.num_envs, self.seed)

    def _observation_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """float32 (low, high) [obs_dim]: the task's term bounds widened by the terms' noise.

        Unbounded terms get -inf / inf; a bound of a term the env does not observe raises
        ValueError.
        """
        declared = self.task.observation_bounds()
        unknown = sorted(set(declared) - {t.name for t in self._obs_terms})
        if unknown:
            raise ValueError(f"task '{self.task.name}' declares bounds of unknown "
                             f"observation terms {unknown}")
        lows, highs = [], []
        for term in self._obs_terms:
            dim = term.fn().reshape(self.num_envs, -1).shape[1]
            low, high = declared.get(term.name, (-math.inf, math.inf))
            noise = term.noise if self.cfg.obs_noise else 0.0
            lows.append(torch.as_tensor(low, dtype=torch.float64).expand(dim) - noise)
            highs.append(torch.as_tensor(high, dtype=torch.float64).expand(dim) + noise)
        return torch.cat(lows).to(torch.float32), torch.cat(highs).to(torch.float32)

    # ------------------------------------------------------------- core
    def _observe(self, noise: bool, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Observation [B, obs_dim] (rows ``ids`` only, if given) with training noise."""
        parts = []
        for term in self._obs_terms:
            value = term.fn().reshape(self.num_envs, -1)
            if ids is not None:
                value = value[ids]
            if noise and term.noise > 0 and self.cfg.obs_noise:
                u = torch.rand(value.shape, generator=self._gen, dtype=value.dtype)
                value = value + term.noise * (2 * u.to(value.device) - 1)
            parts.append(value)
        return torch.cat(parts, dim=1).to(torch.float32)

    def _reset_envs(self, ids: torch.Tensor) -> None:
        self.physics.reset(ids)
        self._randomize(ids)
        if self._visual is not None:
            self._visual.resample(ids.tolist())
        self.task.reset(ids, self._gen)
        self.state.ctrl[ids, self._ctrl_ids] = self.action_map.reset(
            ids, self.task.joint_pos[ids])
        self._history[:, ids] = self.task.last_action[ids]
        if self._deploy is not None:
            self._deploy.reset(ids, self.task.joint_pos[ids])
        self.physics.forward(ids)
        self.task.clear_cache()
        self.task.after_reset(ids)
        self.episode_step[ids] = 0
        self.episode_return[ids] = 0.0

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Reset every env (reseeding first if ``seed`` is given); returns obs [B, obs_dim]."""
        if seed is not None:
            self.seed = int(seed)
            self._gen.manual_seed(self.seed)
            if self._visual is not None:
                self._visual.reseed(self.seed)
        self._reset_envs(torch.arange(self.num_envs, device=self.device))
        return self._observe(noise=True)

    def observe(self, noise: bool = True) -> torch.Tensor:
        """The current observation [B, obs_dim], e.g. after a task command was changed."""
        return self._observe(noise=noise)

    def rng_state(self) -> torch.Tensor:
        """The state of the generator behind resets and randomisation (for checkpoints)."""
        return self._gen.get_state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        """Restore a state returned by :meth:`rng_state`."""
        self._gen.set_state(state)

    def _diverged(self, qpos_before: torch.Tensor, finite_before: torch.Tensor) -> torch.Tensor:
        s = self.state
        # A non-finite state before the step: MuJoCo resets such a simulation to qpos0
        # while stepping, so the state after it looks healthy.
        bad = ~finite_before
        bad |= ~torch.isfinite(s.qpos).all(1) | ~torch.isfinite(s.qvel).all(1)
        bad |= s.qvel.abs().amax(1) > self.cfg.divergence_qvel
        # MuJoCo itself resets a simulation whose accelerations blew up, silently and
        # without rewinding time: the state then jumps back to the model's qpos0.
        bad |= (s.qpos - qpos_before).abs().amax(1) > self.cfg.divergence_jump
        return bad

    def step(self, actions: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every env one control step; finished envs are reset (see BatchedEnv)."""
        actions = batch_actions(actions, self.num_envs, self.action_dim, self.device,
                                torch.float64)
        nan_actions = torch.isnan(actions).sum(1)
        actions = torch.nan_to_num(actions.clamp(-1.0, 1.0), nan=0.0)
        self.nan_action_total += int((nan_actions > 0).sum())
        self._history[self._head] = actions
        applied = self._history[(self._head - self._latency) % len(self._history), self._env_ids]
        self._head = (self._head + 1) % len(self._history)
        self.task.apply_action(actions)  # what the policy sent (observed as 'last action')
        ctrl = self.action_map(applied)
        if self._deploy is not None:  # the arm's targets as the ROS policy node sends them
            arm = self._deploy(ctrl[:, :self._nj], self.task.joint_pos, self.task.joint_vel)
            ctrl = torch.cat([arm, ctrl[:, self._nj:]], dim=1)  # (a new tensor: the map
            # may return its own state, which keeps the policy's unfiltered targets)
        self.state.ctrl[:, self._ctrl_ids] = ctrl
        qpos_before = self.state.qpos.clone()
        finite_before = (torch.isfinite(qpos_before).all(1)
                         & torch.isfinite(self.state.qvel).all(1))
        self.physics.step(self.decimation)
        self.task.clear_cache()
        self.episode_step += 1
        diverged = self._diverged(qpos_before, finite_before)
        self.task.post_physics()

        obs = self._observe(noise=True)
        terms = {t.name: t.weight * t.fn() for t in self._reward_terms}
        reward = torch.stack(list(terms.values())).sum(0)
        success = self.task.success()
        progress = self.task.progress()
        terminated = self.task.terminated() & ~diverged
        truncated = (self.episode_step >= self.max_episode_steps) | diverged
        if diverged.any():
            obs = torch.nan_to_num(obs, nan=0.0, posinf=0.0, neginf=0.0)
            reward = torch.where(diverged, 0.0, reward)
            terms = {k: torch.where(diverged, 0.0, v) for k, v in terms.items()}
            self.diverged_total += int(diverged.sum())
            self.diverged_envs += diverged.long()
        reward = reward.to(torch.float32)
        self.episode_return += reward
        done = terminated | truncated
        info: dict[str, Any] = {
            "success": success,
            "progress": progress.to(torch.float32),
            "reward_terms": {k: v.to(torch.float32) for k, v in terms.items()},
            "diverged": diverged,
            "time_outs": truncated,
            "nan_actions": nan_actions,
        }
        if done.any():
            ids = done.nonzero().flatten()
            info["final_obs"] = obs.clone()
            info["final_success"] = success.clone()
            info["episode_return"] = self.episode_return[ids].clone()
            info["episode_length"] = self.episode_step[ids].clone()
            info["done_ids"] = ids
            if self._final_frames is not None:  # the terminal states, before they are reset
                info["final_frames"] = self.render(env_ids=ids, **self._final_frames)
            self._reset_envs(ids)
            obs[ids] = self._observe(noise=True, ids=ids)
        return obs, reward, terminated, truncated, info

    # --------------------------------------------------------- rendering
    def request_final_frames(self, cameras: list[str] | None = None, width: int | None = None,
                             height: int | None = None, enabled: bool = True) -> None:
        """Render the terminal states of finished envs before the auto-reset.

        When enabled, ``step`` adds ``info["final_frames"]``: uint8 [len(done_ids), V, H,
        W, 3], the frames of ``info["done_ids"]`` (in that order) as ``render(cameras,
        width=width, height=height)`` would have shown them before the reset. Frame-based
        reward models need them to score the last transition of an episode. Off by
        default (rendering is the expensive part of a step).
        """
        self._final_frames = ({"cameras": list(cameras) if cameras else None, "width": width,
                               "height": height} if enabled else None)

    def render(self, cameras: list[str] | None = None, env_ids: torch.Tensor | None = None,
               width: int | None = None, height: int | None = None) -> torch.Tensor:
        """Camera frames uint8 [B, V, H, W, 3] of ``env_ids`` (default all) from ``cameras``."""
        from sim.render import MultiViewRenderer

        names = tuple(cameras or self.camera_names)
        known = [self.model.camera(i).name for i in range(self.model.ncam)]
        unknown = [c for c in names if c not in known]
        if unknown:
            raise KeyError(f"no camera {', '.join(map(repr, unknown))} in task "
                           f"'{self.task.name}'; its cameras: {known}")
        resolution = self.model.cam_resolution[known.index(names[0])]
        width, height = width or int(resolution[0]), height or int(resolution[1])
        extent, crop = self.cfg.render_plane_extent, self.cfg.render_plane_crop
        key = (names, width, height, extent, crop)
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        if self._engine_renders() and has_renderer(self.physics):
            if self._visual is not None:
                raise ValueError("visual randomisation needs the GL renderer; set "
                                 "renderer='gl' or turn visual.enabled off")
            cam_ids = [known.index(c) for c in names]
            return self.physics.render(cam_ids, ids, width, height).cpu()
        if key not in self._renderers:
            self._renderers[key] = MultiViewRenderer(
                self.model, names, width, height, tessellation=self.cfg.render_tessellation,
                plane_extent=extent, crop_plane=crop)
        datas = self.physics.mjdata(ids)
        visual = None if self._visual is None else self._visual.batch(ids)
        return torch.from_numpy(self._renderers[key].render(datas, visual=visual))

    def _engine_renders(self) -> bool:
        """Whether frames come from the engine's own renderer (``cfg.renderer``)."""
        choice, has = self.cfg.renderer, has_renderer(self.physics)
        if choice not in ("auto", "gl", "engine"):
            raise ValueError(f"renderer='{choice}': choose 'auto', 'gl' or 'engine'")
        if choice == "engine" and not has:
            raise ValueError(f"the {self.backend} backend has no renderer of its own; "
                             "use renderer='gl'")
        return choice == "engine" or (choice == "auto" and has and self.device.type == "cuda")

    def close(self) -> None:
        """Release renderers (GL contexts) and the engine."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()
        self.physics.close()
