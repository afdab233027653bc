"""A Stable-Baselines3 ``VecEnv`` over a :class:`sim.protocol.BatchedEnv`.

SB3's conventions, as its ``DummyVecEnv`` + ``Monitor`` produce them:

* ``dones = terminated | truncated``; finished envs are already reset, so the
  returned observation is the next episode's first, and
  ``infos[i]["terminal_observation"]`` is the finished episode's last.
* ``infos[i]["TimeLimit.truncated"] = truncated & ~terminated``: PPO and the
  off-policy algorithms bootstrap from ``terminal_observation`` when it is true.
* ``infos[i]["episode"] = {"r": return, "l": length, "t": seconds}`` (what
  ``Monitor`` writes), so ``model.ep_info_buffer`` and the ``rollout/ep_rew_mean``
  logs work without wrapping; ``infos[i]["is_success"]`` feeds ``success_rate``.
  These keys are set for the envs that finished in that step only.
* ``infos[i]["nan_actions"]``: NaN entries of env ``i``'s action (replaced by 0),
  set only in steps where the action held one.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium
import numpy as np
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from sim.adapters._common import as_actions, render_tiled, single_spaces, to_numpy
from sim.protocol import BatchedEnv

__all__ = ["SB3VecEnv"]

# Attributes of the adapter itself that get_attr/set_attr serve (SB3 asks for them).
_ADAPTER_ATTRS = ("render_mode",)


class SB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` over one batched env (all its ``num_envs`` sub-envs).

    The sub-envs share one simulator object, so ``get_attr`` returns the batched
    env's attribute once per requested index, ``env_method`` calls the method once
    and repeats its result per index, and ``set_attr`` only accepts all indices.
    ``seed(s)`` makes the next ``reset()`` reseed the batched env's generator with
    ``s`` (SB3 hands env ``i`` the seed ``s + i``; one generator takes the first).
    ``env_is_wrapped(Monitor)`` is ``True``: the infos carry ``Monitor``'s episode
    statistics, so ``evaluate_policy`` reports true (unnormalised) returns.
    """

    def __init__(self, env: BatchedEnv, render_mode: str | None = None,
                 render_envs: int = 1, cameras: Sequence[str] | None = None,
                 width: int | None = None, height: int | None = None):
        """Wrap ``env``.

        Args:
            env: The batched env; this adapter closes it on ``close()``.
            render_mode: ``None`` or ``"rgb_array"`` (``render("human")`` then shows
                the frame with OpenCV, as SB3's own VecEnvs do).
            render_envs: How many envs (the first ones) ``render()`` shows, one row each.
            cameras: Cameras shown (default: the task's), side by side.
            width: Render width per view (default: the first camera's).
            height: Render height per view.
        """
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.batched = env
        self.render_mode = render_mode  # VecEnv.__init__ reads it back via get_attr
        self.render_envs = max(1, min(int(render_envs), env.num_envs))
        self.render_cameras = tuple(cameras) if cameras else None
        self.render_width, self.render_height = width, height
        self._actions: np.ndarray | None = None
        self._t_start = time.time()
        self.closed = False
        observation_space, action_space = single_spaces(env)
        super().__init__(env.num_envs, observation_space, action_space)

    # ------------------------------------------------------------------ core
    def reset(self) -> np.ndarray:
        """Reset every env, reseeding with the seed set by :meth:`seed` if any."""
        seed = self._seeds[0] if self._seeds else None
        obs = to_numpy(self.batched.reset(seed=None if seed is None else int(seed)))
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Remember ``actions`` ``[num_envs, action_dim]`` for :meth:`step_wait`."""
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        """Step the batched env; returns ``(obs, rewards, dones, infos)`` in SB3's conventions."""
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async()")
        actions, self._actions = self._actions, None
        obs, reward, terminated, truncated, info = self.batched.step(
            as_actions(self.batched, actions))
        term = to_numpy(terminated).astype(bool)
        trunc = to_numpy(truncated).astype(bool)
        dones = term | trunc
        # A diverged simulation is reported truncated, but its state is not worth bootstrapping.
        diverged = info.get("diverged")
        bootstrap = trunc & ~term
        if diverged is not None:
            bootstrap &= ~to_numpy(diverged).astype(bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if "nan_actions" in info:
            counts = to_numpy(info["nan_actions"])
            for i in np.flatnonzero(counts):
                infos[i]["nan_actions"] = int(counts[i])
        if dones.any():
            final_obs = to_numpy(info["final_obs"])
            success_flags = info.get("final_success", info.get("success"))
            success = None if success_flags is None else to_numpy(success_flags)
            elapsed = round(time.time() - self._t_start, 6)
            ids = to_numpy(info["done_ids"]).tolist()
            returns = to_numpy(info["episode_return"]).tolist()
            lengths = to_numpy(info["episode_length"]).tolist()
            for i, ret, length in zip(ids, returns, lengths, strict=True):
                infos[i] |= {
                    "terminal_observation": final_obs[i].copy(),
                    "TimeLimit.truncated": bool(bootstrap[i]),
                    "episode": {"r": float(ret), "l": int(length), "t": elapsed},
                    "is_success": bool(success[i]) if success is not None else False,
                }
        return to_numpy(obs), to_numpy(reward).astype(np.float32), dones, infos

    def close(self) -> None:
        """Close the batched env (its renderers); safe to call twice."""
        if not self.closed:
            self.batched.close()
            self.closed = True

    # ------------------------------------------------------- sub-env access
    def _indices(self, indices: VecEnvIndices) -> list[int]:
        ids = list(self._get_indices(indices))
        for i in ids:
            if not 0 <= int(i) < self.num_envs:
                raise IndexError(f"env index {i} out of range for {self.num_envs} envs")
        return [int(i) for i in ids]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The batched env's attribute ``attr_name``, once per index (shared by all envs)."""
        owner = self if attr_name in _ADAPTER_ATTRS else self.batched
        value = getattr(owner, attr_name)
        return [value for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set ``attr_name`` on the batched env; only for all envs at once (they share it)."""
        if sorted(self._indices(indices)) != list(range(self.num_envs)):
            raise ValueError("the envs share one batched env: set_attr needs indices=None "
                             "(all envs)")
        setattr(self if attr_name in _ADAPTER_ATTRS else self.batched, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        """Call the batched env's ``method_name`` once; its result is repeated per index."""
        ids = self._indices(indices)
        result = getattr(self.batched, method_name)(*method_args, **method_kwargs)
        return [result for _ in ids]

    def env_is_wrapped(self, wrapper_class: type[gymnasium.Wrapper],
                       indices: VecEnvIndices = None) -> list[bool]:
        """``True`` for ``Monitor`` (the infos carry its episode statistics), else ``False``."""
        wrapped = isinstance(wrapper_class, type) and issubclass(Monitor, wrapper_class)
        return [wrapped for _ in self._indices(indices)]

    # ------------------------------------------------------------- render
    def get_images(self) -> Sequence[np.ndarray | None]:
        """Every env's camera views side by side, uint8 ``[H, V * W, 3]`` each."""
        return list(self._frames(range(self.num_envs)))

    def _frames(self, env_ids: Iterable[int]) -> np.ndarray:
        return render_tiled(self.batched, list(env_ids), self.render_cameras, self.render_width,
                            self.render_height)

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """The first ``render_envs`` envs' views: one row per env, one column per camera."""
        mode = mode or self.render_mode
        if mode is None or self.render_mode is None:
            warnings.warn("render() needs render_mode='rgb_array' at construction", stacklevel=2)
            return None
        if mode not in ("rgb_array", "human"):
            warnings.warn(f"unsupported render mode {mode!r}", stacklevel=2)
            return None
        image = np.concatenate(list(self._frames(range(self.render_envs))), axis=0)
        if mode == "human":
            import cv2

            cv2.imshow("vecenv", image[:, :, ::-1])
            cv2.waitKey(1)
            return None
        return image
