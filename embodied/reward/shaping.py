"""From progress to RL reward: potential-based shaping and the reward modes.

Potential-based shaping (Ng, Harada & Russell 1999) adds
``F(s, s') = gamma * phi(s') - phi(s)`` to the reward, with ``phi`` = the reward
model's progress. Summed over an episode it telescopes to
``gamma^T phi(s_T) - phi(s_0)``, so it changes no policy's ranking as long as the
potential of a terminal state is the same for every policy.

Terminal-state convention (``terminal_potential``):

- ``"zero"`` (default): when an episode is *terminated* (the MDP really ended: the
  robot fell, the cube left the workspace), ``phi(s_T) = 0``. This is Ng et al.'s
  condition for episodic tasks (an absorbing state's potential must be 0; see also
  Grzes 2017, "Reward shaping in episodic reinforcement learning"): with it the
  shaped return of every terminated episode is ``r_return - phi(s_0)``, so the
  optimal policy is unchanged, and ending an episode early never pays by itself:
  the last transition gives back ``-phi(s_{T-1})``, the progress earned so far.
- ``"final"``: ``phi(s_T)`` = the model's progress of the terminal state. Not policy
  invariant (it pays ``gamma * phi(s_T)`` for ending in a high-progress state); offered
  for tasks that terminate *on success* and are trained with ``mode='prm'`` alone,
  where ``"zero"`` would make succeeding worth nothing.

*Truncated* episodes (time limits) are not terminal: the learner bootstraps from
``V(s_T)``, so the shaping term keeps the terminal state's real potential,
``gamma * phi(s_T) - phi(s_{T-1})``, whatever ``terminal_potential`` says.

Auto-reset: ``env.step`` returns the first observation of the next episode for
envs that finished. Shaping therefore needs two potentials at a boundary:
``phi_final`` (of the terminal state, for the last transition) and ``phi_obs`` (of the
returned observation, which becomes ``phi(s)`` of the next transition). With
``SimProgressReward``, ``info["progress"]`` is the terminal state's progress; a
frame model sees only the post-reset frames, so for it ``phi_final`` is unknown at
truncations and ``PotentialShaping`` falls back to ``phi(s_{T-1})`` there (a bias of
``-(1 - gamma) phi(s_{T-1})`` on one step per episode) unless the caller passes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import torch

from embodied.config import ConfigError

TerminalPotential = Literal["zero", "final"]
RewardMode = Literal["sparse", "prm", "prm+sparse", "oracle"]
REWARD_MODES: tuple[str, ...] = ("sparse", "prm", "prm+sparse", "oracle")
WEIGHT_UNITS: tuple[str, ...] = ("absolute", "sparse_return")
SHAPING_TARGETS: tuple[str, ...] = ("return", "advantage")


def sparse_return_bound(sparse_weight: float, gamma: float) -> float:
    """The largest discounted sparse return, ``sparse_weight / (1 - gamma)``.

    Success held on every step of an endless episode; the yardstick of the shaping
    scale under ``prm_weight_unit: sparse_return``.
    """
    if not 0.0 <= gamma < 1.0:
        raise ConfigError(f"reward.prm_weight_unit=sparse_return needs a discount below 1, "
                          f"got gamma={gamma}; use reward.prm_weight_unit=absolute")
    return sparse_weight / (1.0 - gamma)


def shaping_weight(cfg: Mapping[str, Any], gamma: float) -> float:
    """The absolute weight of the shaping term of a ``configs/reward/*.yaml`` config.

    ``prm_weight_unit: absolute`` (or missing): ``prm_weight`` itself.
    ``sparse_return``: ``prm_weight`` x the sparse return bound (``sparse_return_bound``),
    so a potential of progress in [0, 1] spans that share of the largest sparse return
    whatever the discount and the success reward are.
    """
    weight = float(cfg.get("prm_weight", 1.0))
    unit = cfg.get("prm_weight_unit") or "absolute"
    if unit not in WEIGHT_UNITS:
        raise ConfigError(f"reward.prm_weight_unit={unit}: choose one of {list(WEIGHT_UNITS)}")
    if unit == "absolute":
        return weight
    return weight * sparse_return_bound(float(cfg.get("sparse_weight", 1.0)), gamma)


def shaping_term(phi: torch.Tensor, phi_next: torch.Tensor, terminated: torch.Tensor,
                 gamma: float, terminal_potential: TerminalPotential = "zero") -> torch.Tensor:
    """``F = gamma * phi(s') - phi(s)`` [B]; ``phi(s') = 0`` where terminated (if "zero").

    ``phi_next`` is the potential of the state the transition reached (for a finished
    env: its terminal state, not the next episode's first state).
    """
    if terminal_potential not in ("zero", "final"):
        raise ValueError(f"terminal_potential must be 'zero' or 'final', got "
                         f"'{terminal_potential}'")
    phi_next = phi_next.to(phi.dtype)
    if terminal_potential == "zero":
        phi_next = torch.where(terminated.bool(), torch.zeros_like(phi_next), phi_next)
    return gamma * phi_next - phi


def shape(reward: torch.Tensor, phi: torch.Tensor, phi_next: torch.Tensor,
          terminated: torch.Tensor, gamma: float,
          terminal_potential: TerminalPotential = "zero") -> torch.Tensor:
    """Shaped reward ``r + gamma * phi(s') - phi(s)`` [B] (see ``shaping_term``)."""
    return reward + shaping_term(phi, phi_next, terminated, gamma, terminal_potential)


class PotentialShaping:
    """Shaping over a batched rollout: remembers ``phi(s_t)`` of every env across steps.

    Usage with any reward model::

        shaping = PotentialShaping(gamma=0.99)
        shaping.reset(phi_of(env.reset()))
        obs, r, term, trunc, info = env.step(a)
        f = shaping.step(phi_obs=phi_of(obs), terminated=term, truncated=trunc,
                         phi_final=..., diverged=info["diverged"])
    """

    def __init__(self, gamma: float, terminal_potential: TerminalPotential = "zero") -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        if terminal_potential not in ("zero", "final"):
            raise ValueError(f"terminal_potential must be 'zero' or 'final', got "
                             f"'{terminal_potential}'")
        self.gamma = float(gamma)
        self.terminal_potential: TerminalPotential = terminal_potential
        self.phi: torch.Tensor | None = None

    def reset(self, phi0: torch.Tensor) -> None:
        """Start every env's episode at potential ``phi0`` [B] (of ``env.reset()``'s obs)."""
        self.phi = phi0.detach().clone().float()

    def step(self, phi_obs: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
             phi_final: torch.Tensor | None = None,
             diverged: torch.Tensor | None = None) -> torch.Tensor:
        """The shaping term F [B] of this step's transitions; add it to the base reward.

        ``phi_obs``: potential of the observations ``env.step`` returned (for finished envs:
        the next episode's first state). ``phi_final``: [B] potential of the terminal
        states, read where ``terminated | truncated`` (for ``SimProgressReward``:
        ``info["progress"]``); if None, terminated envs need none under "zero" and
        truncated ones fall back to ``phi(s_{T-1})`` (see the module docstring).
        ``diverged``: envs whose simulation blew up; their F is 0 (their state is junk).
        """
        if self.phi is None:
            raise RuntimeError("PotentialShaping.step() before reset(phi0)")
        phi_obs = phi_obs.detach().float().to(self.phi.device)
        terminated = terminated.bool().to(self.phi.device)
        done = terminated | truncated.bool().to(self.phi.device)
        # Without phi_final: phi(s_{T-1}) stands in (terminated envs get 0 under "zero").
        final = self.phi if phi_final is None else phi_final.detach().float().to(self.phi.device)
        phi_next = torch.where(done, final, phi_obs)
        f = shaping_term(self.phi, phi_next, terminated, self.gamma, self.terminal_potential)
        if diverged is not None:
            f = torch.where(diverged.bool().to(f.device), torch.zeros_like(f), f)
        self.phi = phi_obs  # done envs: the new episode's first state
        return f


def combine_rewards(mode: RewardMode, env_reward: torch.Tensor, success: torch.Tensor,
                    shaping: torch.Tensor | None = None, sparse_weight: float = 1.0,
                    prm_weight: float = 1.0) -> torch.Tensor:
    """The RL reward [B] of a reward mode.

    - ``sparse``: ``sparse_weight * success``, from ``info["success"]`` (1 on every step
      the task's success condition holds, e.g. the reach target within 4 cm), not from
      the task's own weighted "success" reward term.
    - ``prm``: ``prm_weight * F`` (the shaping term alone).
    - ``prm+sparse``: sparse + ``prm_weight * F`` (policy invariant w.r.t. sparse).
    - ``oracle``: the env's hand-designed dense reward (all task reward terms).
    """
    if mode not in REWARD_MODES:
        raise ValueError(f"unknown reward mode '{mode}'; choose one of {list(REWARD_MODES)}")
    if mode == "oracle":
        return env_reward.float()
    sparse = sparse_weight * success.float().to(env_reward.device)
    if mode == "sparse":
        return sparse
    if shaping is None:
        raise ValueError(f"reward mode '{mode}' needs the shaping term (a reward model's "
                         "progress through PotentialShaping)")
    prm = prm_weight * shaping.float().to(env_reward.device)
    return prm if mode == "prm" else sparse + prm


class RewardMixer:
    """A reward mode plus its shaping state: what a learner calls once per env step.

    ``needs_progress`` says whether the caller must run a reward model at all
    (``sparse`` and ``oracle`` do not).

    ``shaping_target`` (``reward.shaping_target``): where the weighted shaping term goes.
    ``return``: into the reward (the learner's critic sees it and, once it has learned
    the shaped values, cancels it from the advantages). ``advantage``: the reward is the
    mode's without the term, and the term is left in ``advantage_term`` for a learner
    that adds its own GAE, with no critic, to the advantages
    (``embodied.rl.storage.RolloutStorage``): the advantages are then exactly those of
    the base reward under the critic ``V + prm_weight * phi``, a baseline the critic
    cannot learn away (docs/reward-models.md).
    """

    def __init__(self, mode: RewardMode = "sparse", gamma: float = 0.99,
                 terminal_potential: TerminalPotential = "zero", sparse_weight: float = 1.0,
                 prm_weight: float = 1.0, shaping_target: str = "return") -> None:
        if mode not in REWARD_MODES:
            raise ConfigError(f"unknown reward mode '{mode}' (reward.mode); choose one of "
                              f"{list(REWARD_MODES)}")
        if shaping_target not in SHAPING_TARGETS:
            raise ConfigError(f"reward.shaping_target={shaping_target}: choose one of "
                              f"{list(SHAPING_TARGETS)}")
        self.mode: RewardMode = mode
        self.sparse_weight = sparse_weight
        self.prm_weight = prm_weight
        self.shaping_target = shaping_target
        self.shaping = PotentialShaping(gamma, terminal_potential)
        self.advantage_term: torch.Tensor | None = None  # shaping_target=advantage: [B]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], gamma: float | None = None) -> RewardMixer:
        """From a ``configs/reward/*.yaml`` config; ``gamma: null`` there takes ``gamma``.

        ``prm_weight`` is read in ``prm_weight_unit`` (see ``shaping_weight``); the mixer
        keeps the absolute weight.
        """
        g = cfg.get("gamma")
        g = gamma if g is None else g
        if g is None:
            raise ValueError("reward.gamma is null: pass the learner's discount (algo.gamma)")
        return cls(mode=cfg.get("mode", "sparse"), gamma=float(g),
                   terminal_potential=cfg.get("terminal_potential", "zero"),
                   sparse_weight=float(cfg.get("sparse_weight", 1.0)),
                   prm_weight=shaping_weight(cfg, float(g)),
                   shaping_target=cfg.get("shaping_target") or "return")

    @property
    def prm_weight_relative(self) -> float | None:
        """The shaping weight as a share of the sparse return bound (None if gamma is 1)."""
        gamma = self.shaping.gamma
        if gamma >= 1.0 or self.sparse_weight == 0:
            return None
        return self.prm_weight / sparse_return_bound(self.sparse_weight, gamma)

    @property
    def needs_progress(self) -> bool:
        """True when the mode reads a reward model's progress."""
        return self.mode in ("prm", "prm+sparse")

    def reset(self, phi0: torch.Tensor | None = None) -> None:
        """Start episodes; ``phi0`` [B] is needed when ``needs_progress``."""
        if self.needs_progress:
            if phi0 is None:
                raise ValueError(f"reward mode '{self.mode}' needs reset(phi0)")
            self.shaping.reset(phi0)

    def __call__(self, env_reward: torch.Tensor, terminated: torch.Tensor,
                 truncated: torch.Tensor, info: Mapping[str, Any],
                 phi_obs: torch.Tensor | None = None,
                 phi_final: torch.Tensor | None = None) -> torch.Tensor:
        """The RL reward [B] of one env step (see ``combine_rewards`` and ``PotentialShaping``).

        With ``shaping_target='advantage'`` the shaping term is left out of the reward
        and kept, weighted, in ``advantage_term`` (zero where ``mode`` has no shaping).
        """
        f = None
        if self.needs_progress:
            if phi_obs is None:
                raise ValueError(f"reward mode '{self.mode}' needs phi_obs (the reward "
                                 "model's progress of the returned observations)")
            f = self.shaping.step(phi_obs, terminated, truncated, phi_final,
                                  info.get("diverged"))
        success = info["success"].bool()
        if info.get("diverged") is not None:  # the env zeroes their reward too
            success = success & ~info["diverged"].bool()
        if self.shaping_target == "advantage" and f is not None:
            self.advantage_term = self.prm_weight * f.float().to(env_reward.device)
            f = torch.zeros_like(f)
        return combine_rewards(self.mode, env_reward, success, f,
                               self.sparse_weight, self.prm_weight)
