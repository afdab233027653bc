"""The seams of the simulation layer: what a task reads, what a learner steps.

``SimState`` is what task code sees of a batch of simulations: torch tensors
shaped [B, ...] that are live views of the backend's arrays (MuJoCo's batch
arrays on the CPU, Warp arrays on a GPU). Task code written against it runs on
every backend. ``BatchedEnv`` is what learners, adapters and reward models see.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch


class SimState(Protocol):
    """Batched simulator state as torch tensors (first dimension: env)."""

    num_envs: int
    device: torch.device
    physics_dt: float
    control_dt: float
    qpos: torch.Tensor  # [B, nq], writable
    qvel: torch.Tensor  # [B, nv], writable
    ctrl: torch.Tensor  # [B, nu], writable
    mocap_pos: torch.Tensor  # [B, nmocap, 3], writable
    xpos: torch.Tensor  # [B, nbody, 3]
    xquat: torch.Tensor  # [B, nbody, 4] (w, x, y, z)
    site_xpos: torch.Tensor  # [B, nsite, 3]
    site_xmat: torch.Tensor  # [B, nsite, 9]
    sensordata: torch.Tensor  # [B, nsensordata]

    def body_id(self, name: str) -> int:
        """Index of body ``name`` into ``xpos`` / ``xquat``; raises ``KeyError`` if missing."""
        ...

    def site_id(self, name: str) -> int:
        """Index of site ``name`` into ``site_xpos`` / ``site_xmat``; raises ``KeyError``."""
        ...

    def sensor_slice(self, name: str) -> slice:
        """Columns of sensor ``name`` in ``sensordata``; raises ``KeyError`` if missing."""
        ...

    def joint_qpos_slice(self, name: str) -> slice:
        """Columns of joint ``name`` in ``qpos``; raises ``KeyError`` if missing."""
        ...

    def joint_dof_slice(self, name: str) -> slice:
        """Columns of joint ``name`` in ``qvel``; raises ``KeyError`` if missing."""
        ...

    def site_jacobian(self, site: int) -> torch.Tensor:
        """Translational Jacobian [B, 3, nv] of a site's origin."""
        ...


@runtime_checkable
class BatchedEnv(Protocol):
    """A batch of environments stepped together; tensors on ``device``.

    ``step`` auto-resets finished envs: the returned observation of a finished
    env is the first one of its next episode. The step info holds, per env
    [B]: ``success`` (bool), ``progress`` (privileged, in [0, 1]), ``diverged``
    (bool: the simulation blew up, was reset, and is reported truncated; do not
    bootstrap from it), ``time_outs`` (= truncated); ``reward_terms`` (name ->
    the term's weighted reward [B]; the terms sum to the reward). When any env
    finished, also ``done_ids`` [D] and, as full [B, ...] tensors valid at
    ``done_ids``: ``final_obs`` (the last observation of the finished episode,
    for bootstrapping) and ``final_success``; and
    aligned with ``done_ids``: ``episode_return``, ``episode_length``.
    ``nan_actions`` (int [B]) counts the NaN entries of each env's action in
    this step (they were replaced by 0).

    ``step`` takes actions ``[num_envs, action_dim]`` (a flat ``[action_dim]``
    only when ``num_envs == 1``, see :func:`batch_actions`). An env whose
    observation terms have bounds also has ``obs_bounds``: float32 tensors
    ``(low, high)`` [obs_dim], ``-inf`` / ``inf`` where a term is unbounded.
    """

    num_envs: int
    control_dt: float
    max_episode_steps: int
    obs_dim: int
    action_dim: int
    device: torch.device
    instruction: str
    camera_names: tuple[str, ...]

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Reset every env (reseeding first if ``seed`` is given); returns obs [B, obs_dim]."""
        ...

    def observe(self, noise: bool = True) -> torch.Tensor:
        """The current observation [B, obs_dim], with observation noise if ``noise``."""
        ...

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every env one control step with ``actions`` in [-1, 1].

        Returns:
            ``(obs [B, obs_dim], reward [B], terminated [B] bool, truncated [B] bool,
            info)``, the info as described in the class docstring.

        Raises:
            ValueError: ``actions`` has a shape :func:`batch_actions` rejects.
        """
        ...

    def render(
        self,
        cameras: list[str] | None = None,
        env_ids: torch.Tensor | None = None,
        width: int | None = None,
        height: int | None = None,
    ) -> torch.Tensor:
        """Camera frames uint8 [len(env_ids), V, H, W, 3], views in the order of ``cameras``.

        Defaults: the env's ``camera_names``, every env, the first camera's resolution.
        Raises ``KeyError`` for a camera the env does not have.
        """
        ...

    def close(self) -> None:
        """Release the renderers (GL contexts) and the simulation engine."""
        ...


@runtime_checkable
class RngStateful(Protocol):
    """An env whose random generator (resets, randomisation) can be saved and restored.

    :class:`sim.env.TaskEnv` is one; a checkpoint that stores this state makes a
    resumed run draw the same resets as the uninterrupted one.
    """

    def rng_state(self) -> torch.Tensor:
        """The state of the generator behind resets and randomisation (for checkpoints)."""
        ...

    def set_rng_state(self, state: torch.Tensor) -> None:
        """Restore a state returned by :meth:`rng_state`."""
        ...


def batch_actions(actions: Any, num_envs: int, action_dim: int,
                  device: torch.device | str | None = None,
                  dtype: torch.dtype | None = None) -> torch.Tensor:
    """``actions`` as a tensor [num_envs, action_dim] (on ``device``, as ``dtype``).

    A flat [action_dim] is accepted only when ``num_envs == 1``. Any other shape raises
    ``ValueError``, even one with the right number of elements: reshaping [action_dim,
    num_envs] or [num_envs * action_dim] would hand one env's actions to another.
    """
    a = torch.as_tensor(actions, device=device, dtype=dtype)
    if tuple(a.shape) == (num_envs, action_dim):
        return a
    if num_envs == 1 and tuple(a.shape) == (action_dim,):
        return a.reshape(1, action_dim)
    flat = f" (or [{action_dim}])" if num_envs == 1 else ""
    raise ValueError(f"actions must have shape [{num_envs}, {action_dim}] (envs, action "
                     f"dim){flat}, got {list(a.shape)}")
