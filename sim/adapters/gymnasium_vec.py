"""Gymnasium 1.x views of a :class:`sim.protocol.BatchedEnv`.

* :class:`GymnasiumVectorEnv` is a ``gymnasium.vector.VectorEnv`` over the whole
  batch (numpy in, numpy out). The batched env resets finished envs inside
  ``step``, which gymnasium calls ``AutoresetMode.SAME_STEP``: the observation
  returned for a finished env is the first one of its next episode, and the last
  one of the finished episode is in ``infos["final_obs"]`` (a numpy object array,
  ``None`` for envs that did not finish, mask ``infos["_final_obs"]``), exactly as
  ``gymnasium.vector.SyncVectorEnv(..., autoreset_mode="SameStep")`` reports it.
* :class:`GymnasiumEnv` is a single ``gymnasium.Env`` over a batch of one. It keeps
  the ordinary single-env contract: the step that ends an episode returns that
  episode's final observation, and the next ``reset()`` returns the observation
  the batched env already reset to (no second reset, so no extra randomness used).

Both are registered as gymnasium ids by :mod:`sim.adapters`
(``gymnasium.make("embodied/PandaReach-v0")``, ``gymnasium.make_vec(..., num_envs=8)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from sim.adapters._common import as_actions, render_fps, render_tiled, single_spaces, to_numpy
from sim.protocol import BatchedEnv

RENDER_MODES = ("rgb_array",)

__all__ = ["GymnasiumEnv", "GymnasiumVectorEnv", "make_vector_env"]


def _check_render_mode(render_mode: str | None) -> None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be None or one of {list(RENDER_MODES)}, "
                         f"got {render_mode!r}")


def _first_seed(seed: int | Sequence[int | None] | None) -> int | None:
    """The batched env has one generator: a list of per-env seeds seeds it by its first."""
    if seed is None or isinstance(seed, int | np.integer):
        return None if seed is None else int(seed)
    seeds = list(seed)
    return None if not seeds or seeds[0] is None else int(seeds[0])


class GymnasiumVectorEnv(gymnasium.vector.VectorEnv):
    """A ``gymnasium.vector.VectorEnv`` over a batched env, with same-step autoreset.

    ``step`` returns numpy arrays: observations float32 ``[B, obs_dim]``, rewards
    float64 ``[B]``, terminations and truncations bool ``[B]``, and infos as a dict
    of ``[B]`` arrays each with a boolean mask ``_key`` (gymnasium's convention):

    * ``success`` (bool), ``progress`` (float32): the task's success flag and
      progress after this step, valid (masked ``True``) for envs still running;
      for finished envs the values of their last step are in ``final_info``.
    * ``final_obs`` / ``_final_obs``: object array of the finished episodes' last
      observations (``None`` elsewhere), only in steps where some env finished.
    * ``final_info`` / ``_final_info``: for the finished envs, ``success``,
      ``progress``, ``episode_return`` (float64) and ``episode_length`` (int64).
    * ``nan_actions`` (int64, every env): NaN entries of this step's action
      (replaced by 0 before they reached the simulation).

    ``reset(seed=...)`` reseeds the batched env's generator (a list of seeds: its
    first one), so trajectories, observation noise and domain randomisation are
    reproducible from the seed; an env made without a ``seed`` setting draws its
    seed from entropy, so unseeded envs differ. Actions must be ``[B, action_dim]``.
    With ``render_mode="rgb_array"``, ``render()`` returns one frame per sub-env (as
    gymnasium's vector wrappers such as ``RecordVideo`` expect): a tuple of uint8
    ``[H, V * W, 3]``, each env's camera views side by side.
    """

    # gymnasium declares ``metadata`` an instance attribute (``__init__`` adds the env's
    # fps), so it cannot be a ClassVar; this is the default ``gymnasium.make`` reads.
    metadata: dict[str, Any] = {  # noqa: RUF012
        "render_modes": list(RENDER_MODES),
        "autoreset_mode": AutoresetMode.SAME_STEP,
    }

    def __init__(self, env: BatchedEnv, render_mode: str | None = None,
                 cameras: Sequence[str] | None = None, width: int | None = None,
                 height: int | None = None):
        """Wrap ``env``; ``cameras``, ``width`` and ``height`` choose what ``render()`` shows."""
        _check_render_mode(render_mode)
        self.batched = env
        self.num_envs = env.num_envs
        self.render_mode = render_mode
        self.render_cameras = tuple(cameras) if cameras else None
        self.render_width, self.render_height = width, height
        self.metadata = {**type(self).metadata, "render_fps": render_fps(env)}
        self.single_observation_space, self.single_action_space = single_spaces(env)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every env (reseeding first if ``seed`` is given); ``options`` are ignored."""
        seed = _first_seed(seed)
        super().reset(seed=seed)
        obs = to_numpy(self.batched.reset(seed=seed))
        return obs, {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                 dict[str, Any]]:
        """Step every env with ``actions`` ``[B, action_dim]`` in [-1, 1]; finished envs reset."""
        obs, reward, terminated, truncated, info = self.batched.step(
            as_actions(self.batched, actions))
        term, trunc = to_numpy(terminated).astype(bool), to_numpy(truncated).astype(bool)
        done = term | trunc
        return (to_numpy(obs), to_numpy(reward).astype(np.float64), term, trunc,
                self._infos(info, done))

    def _infos(self, info: dict[str, Any], done: np.ndarray) -> dict[str, Any]:
        """Gymnasium's dict-of-arrays infos (see the class docstring)."""
        running = ~done
        infos: dict[str, Any] = {}
        if "nan_actions" in info:
            infos["nan_actions"] = to_numpy(info["nan_actions"]).astype(np.int64)
            infos["_nan_actions"] = np.ones(self.num_envs, dtype=bool)
        last: dict[str, np.ndarray] = {}
        for key, dtype in (("success", np.bool_), ("progress", np.float32)):
            if key in info:
                last[key] = to_numpy(info[key]).astype(dtype)
                infos[key] = np.where(running, last[key], np.zeros((), dtype))
                infos[f"_{key}"] = running.copy()
        if not done.any():
            return infos

        n = self.num_envs
        final_obs_all = to_numpy(info["final_obs"])
        final_obs = np.full(n, None, dtype=object)
        for i in np.flatnonzero(done):
            final_obs[i] = final_obs_all[i].copy()
        infos["final_obs"], infos["_final_obs"] = final_obs, done.copy()

        ids = to_numpy(info["done_ids"]).astype(np.int64)
        final: dict[str, Any] = {}
        if "final_success" in info:
            last["success"] = to_numpy(info["final_success"]).astype(np.bool_)
        for key, values in last.items():
            final[key] = np.where(done, values, np.zeros((), values.dtype))
            final[f"_{key}"] = done.copy()
        for key, column_dtype in (("episode_return", np.float64), ("episode_length", np.int64)):
            if key in info:
                column = np.zeros(n, column_dtype)
                column[ids] = to_numpy(info[key])
                final[key], final[f"_{key}"] = column, done.copy()
        infos["final_info"], infos["_final_info"] = final, done.copy()
        return infos

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One frame per sub-env: its camera views side by side, uint8 ``[H, V * W, 3]``.

        ``None`` (with a warning) when the adapter was made without a render mode.
        """
        if not _can_render(self):
            return None
        return tuple(render_tiled(self.batched, range(self.num_envs), self.render_cameras,
                                  self.render_width, self.render_height))

    def close_extras(self, **kwargs: Any) -> None:
        """Close the batched env (its renderers)."""
        self.batched.close()


class GymnasiumEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """A single ``gymnasium.Env`` over a batched env of one env.

    ``step`` returns ``(obs, reward, terminated, truncated, info)`` with a float32
    observation, and ``info`` holding ``success`` / ``is_success`` (bool),
    ``progress`` (float), ``reward_terms`` (name -> weighted term reward), ``nan_actions``
    (NaN entries of the action, replaced by 0) and, at the end of an
    episode, ``episode_return`` and ``episode_length``. When an episode ends the
    returned observation is its final one; the next ``reset()`` (without a seed)
    returns the first observation of the episode the batched env already started.
    ``reset(seed=s)`` reseeds the batched env, so observations, noise and
    randomisation after it depend on ``s`` only.
    """

    # An instance attribute in gymnasium, as in GymnasiumVectorEnv.
    metadata: dict[str, Any] = {"render_modes": list(RENDER_MODES), "render_fps": 30}  # noqa: RUF012

    def __init__(self, task: str | BatchedEnv = "panda_reach", render_mode: str | None = None,
                 cameras: Sequence[str] | None = None, width: int | None = None,
                 height: int | None = None, **cfg: Any):
        """Build ``make_env(task, num_envs=1, **cfg)``, or wrap a batched env of one env.

        Args:
            task: A task name of :func:`sim.tasks.task_names`, or a ``BatchedEnv``
                with ``num_envs == 1``.
            render_mode: ``None`` or ``"rgb_array"``.
            cameras: Cameras ``render()`` shows (default: the task's cameras).
            width: Render width per view (default: the first camera's).
            height: Render height per view.
            **cfg: :class:`sim.mujoco_env.EnvConfig` overrides when ``task`` is a name
                (e.g. ``seed``, ``episode_length_s``, ``obs_noise``).
        """
        _check_render_mode(render_mode)
        if isinstance(task, str):
            from sim import make_env

            task_name = task
            env = make_env(task, num_envs=1, **cfg)
        else:
            if cfg:
                raise TypeError(f"config overrides {sorted(cfg)} need a task name, not an env")
            env, task_name = task, type(task).__name__
        if env.num_envs != 1:
            raise ValueError(f"GymnasiumEnv needs a batched env of 1 env, got {env.num_envs}")
        self.batched = env
        self.task_name = task_name
        self.render_mode = render_mode
        self.render_cameras = tuple(cameras) if cameras else None
        self.render_width, self.render_height = width, height
        self.metadata = {**type(self).metadata, "render_fps": render_fps(env)}
        self.observation_space, self.action_space = single_spaces(env)
        self._next_obs: np.ndarray | None = None  # the auto-reset observation after an episode

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode; ``options`` are ignored.

        Right after an episode ended (and without a seed) this returns the
        observation the batched env auto-reset to; otherwise it resets the batched
        env, reseeding it first if ``seed`` is given.
        """
        super().reset(seed=seed)
        if seed is None and self._next_obs is not None:
            obs = self._next_obs
        else:
            obs = to_numpy(self.batched.reset(seed=seed))[0].copy()
        self._next_obs = None
        return obs, {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Advance one control step with ``action`` ``[action_dim]`` in [-1, 1]."""
        obs, reward, terminated, truncated, info = self.batched.step(
            as_actions(self.batched, action))
        term, trunc = bool(terminated[0]), bool(truncated[0])
        out = to_numpy(obs)[0].copy()
        self._next_obs = None
        step_info: dict[str, Any] = {}
        if "success" in info:
            step_info["success"] = step_info["is_success"] = bool(info["success"][0])
        if "progress" in info:
            step_info["progress"] = float(info["progress"][0])
        if "nan_actions" in info:
            step_info["nan_actions"] = int(info["nan_actions"][0])
        if isinstance(info.get("reward_terms"), dict):
            step_info["reward_terms"] = {k: float(v[0]) for k, v in info["reward_terms"].items()}
        if term or trunc:
            self._next_obs = out
            out = to_numpy(info["final_obs"])[0].copy()
            if "episode_return" in info:
                step_info["episode_return"] = float(info["episode_return"][0])
                step_info["episode_length"] = int(info["episode_length"][0])
        return out, float(reward[0]), term, trunc, step_info

    def render(self) -> np.ndarray | None:
        """The camera views side by side, uint8 ``[H, V * W, 3]`` (``None`` without a mode)."""
        return render_first_env(self)

    def close(self) -> None:
        """Close the batched env (its renderers); safe to call twice."""
        self.batched.close()


def make_vector_env(task: str, num_envs: int = 16, render_mode: str | None = None,
                    cameras: Sequence[str] | None = None, width: int | None = None,
                    height: int | None = None, **cfg: Any) -> GymnasiumVectorEnv:
    """Gymnasium vector entry point: ``make_env(task, num_envs, **cfg)`` as a vector env."""
    from sim import make_env

    return GymnasiumVectorEnv(make_env(task, num_envs=num_envs, **cfg), render_mode=render_mode,
                              cameras=cameras, width=width, height=height)


def _can_render(adapter: GymnasiumEnv | GymnasiumVectorEnv) -> bool:
    """Whether the adapter has a render mode (warns as gymnasium's envs do if not)."""
    if adapter.render_mode is None:
        gymnasium.logger.warn("render() called without a render_mode; pass "
                              "render_mode='rgb_array' to the constructor")
        return False
    return True


def render_first_env(adapter: GymnasiumEnv) -> np.ndarray | None:
    """Env 0's camera views side by side, per the adapter's render settings."""
    if not _can_render(adapter):
        return None
    return render_tiled(adapter.batched, [0], adapter.render_cameras, adapter.render_width,
                        adapter.render_height)[0]
