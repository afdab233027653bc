"""Implicit Q-learning (Kostrikov, Nair & Levine 2021) and behaviour cloning, on states.

IQL never queries actions outside the dataset:

- value: expectile regression of ``V(s)`` towards ``min(Q1, Q2)(s, a)`` of the target
  critics, ``L = |tau - 1(u < 0)| u^2`` with ``u = Q - V`` (tau > 0.5 leans to the
  better actions of the data);
- critics: ``Q_i(s, a) -> r + gamma (1 - terminal) V(s')``, Polyak-averaged targets;
- policy (advantage-weighted regression): minimise ``exp(beta (Q - V)) |mu(s) - a|^2``,
  weights clipped at ``max_weight``. The weighted log-likelihood of a Gaussian with a
  fixed std is this loss up to scale; learning the std as well (as in the paper) made
  the mean fit far slower on the Panda tasks, whose expert actions vary by a few
  hundredths of an action unit from step to step.

BC is the same policy update with every weight 1 (``beta = 0``, no critics), so the two
differ only in what the reward teaches; RA-BC (``rabc``) is BC with each frame's weight
from the dataset (its reward model's progress gain, :mod:`embodied.datasets.rabc`).

With ``chunk`` k > 1 the policy predicts the next k actions (``[k * A]``, action
chunking as in ACT) and the exported/evaluated policy executes them with temporal
ensembling (:class:`embodied.policy_io.ChunkedPolicy`); the critics judge the first
action of a chunk and its advantage weighs the whole chunk's regression.
``ignore_obs`` names observation terms the policy does not see (the inputs are zeroed
by the first layer's weights, which stay 0): a behaviour cloner that sees its own last
action learns to repeat it instead of reading the state (copycat problem).

The policy is an :class:`ActorCritic` (its critic holds V), so a run folder of this
learner evaluates and exports like PPO's.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

import torch
from torch import nn

from embodied.rl.actor_critic import ActorCritic, mlp

C = TypeVar("C")


def settings_from(cls: type[C], values: dict[str, Any], what: str) -> C:
    """Dataclass ``cls`` from a config mapping.

    An unknown key raises ``ValueError`` naming the known ones (``what``: the settings'
    name in the message).
    """
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {what} settings {unknown}; known: {sorted(known)}")
    return cls(**values)


@dataclass
class OfflineConfig:
    """Settings of IQL (``name='iql'``), BC (``name='bc'``) and RA-BC (``name='rabc'``)."""

    name: str = "iql"
    gamma: float = 0.99
    expectile: float = 0.7          # tau
    beta: float = 3.0               # inverse temperature of the advantage weights
    max_weight: float = 100.0
    # Divide advantages by their minibatch std before ``exp(beta A)``, so ``beta`` does not
    # depend on the reward's scale (a dense shaped reward moves Q - V by a few hundredths).
    normalize_advantage: bool = True
    polyak: float = 0.005           # target critic update rate
    reward_scale: float = 1.0
    learning_rate: float = 3e-4
    batch_size: int = 256
    actor_hidden: list[int] = field(default_factory=lambda: [256, 256])
    critic_hidden: list[int] = field(default_factory=lambda: [256, 256])
    activation: str = "relu"
    init_noise_std: float = 1.0     # exploration std of the exported policy's sampler only
    normalize_obs: bool = True
    # Floor of the observation std used for normalising: an observation that barely varies
    # in the data (e.g. a last-action term of a steady joint) would otherwise be scaled up
    # so much that the policy's own small deviations become huge inputs in closed loop.
    min_obs_std: float = 0.1
    chunk: int = 1                  # actions predicted per step (action chunking)
    ensemble_decay: float = 0.1     # temporal ensembling weight exp(-decay * age)
    ignore_obs: list[str] = field(default_factory=list)  # observation terms the policy ignores

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> OfflineConfig:
        """Build from a config mapping; unknown keys are an error that lists the known ones."""
        return settings_from(cls, values, "offline algo")


ALGOS = ("iql", "bc", "rabc")


class TwinQ(nn.Module):
    """Two Q networks ``Q_i(s, a)`` on normalised observations."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int], activation: str):
        super().__init__()
        self.q1 = mlp(obs_dim + action_dim, hidden, 1, activation)
        self.q2 = mlp(obs_dim + action_dim, hidden, 1, activation)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(Q1, Q2)``, each [B], of ``actions`` [B, action_dim] at ``obs`` [B, obs_dim]."""
        x = torch.cat([obs, actions], -1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """Mean of ``|tau - 1(diff < 0)| diff^2``."""
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return (weight * diff.square()).mean()


class OfflineLearner:
    """IQL or BC updates of an :class:`ActorCritic` (and, for IQL, twin critics)."""

    def __init__(self, obs_dim: int, action_dim: int, cfg: OfflineConfig,
                 ignored: torch.Tensor | None = None):
        """``action_dim``: of one action; ``ignored``: bool [obs_dim], inputs the policy skips."""
        if cfg.name not in ALGOS:
            raise ValueError(f"offline algo must be one of {ALGOS}, got '{cfg.name}'")
        if cfg.chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {cfg.chunk}")
        self.cfg, self.action_dim = cfg, action_dim
        self.policy = ActorCritic(obs_dim, action_dim * cfg.chunk, cfg.actor_hidden,
                                  cfg.critic_hidden, cfg.activation, cfg.init_noise_std,
                                  cfg.normalize_obs)
        self.policy.eval()  # the normaliser holds the dataset's statistics, never updated
        if ignored is not None and bool(ignored.any()):
            first = next(m for m in self.policy.actor.modules() if isinstance(m, nn.Linear))
            keep = (~ignored).to(first.weight.dtype)
            with torch.no_grad():
                first.weight.mul_(keep)
            first.weight.register_hook(lambda grad: grad * keep)  # Adam keeps them at 0
        self.actor_opt = torch.optim.Adam(self.policy.actor.parameters(), lr=cfg.learning_rate)
        self.q: TwinQ | None = None
        if cfg.name == "iql":
            self.q = TwinQ(obs_dim, action_dim, cfg.critic_hidden, cfg.activation)  # first action
            self.q_target = copy.deepcopy(self.q).requires_grad_(False)
            self.q_opt = torch.optim.Adam(self.q.parameters(), lr=cfg.learning_rate)
            self.v_opt = torch.optim.Adam(self.policy.critic.parameters(), lr=cfg.learning_rate)

    def set_obs_statistics(self, obs: torch.Tensor) -> None:
        """Normalise observations with the dataset's mean and variance."""
        norm = self.policy.obs_normalizer
        if hasattr(norm, "update"):
            norm.count.zero_()
            norm.mean.zero_()
            norm.var.fill_(1.0)
            norm.update(obs)
            norm.var.clamp_(min=self.cfg.min_obs_std ** 2)

    def update(self, obs: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor,
               next_obs: torch.Tensor, terminal: torch.Tensor,
               frame_weights: torch.Tensor | None = None) -> dict[str, float]:
        """One gradient step on a minibatch; returns the losses and diagnostics.

        ``actions`` [B, chunk * A] (chunks); ``frame_weights`` [B] multiply the policy
        loss of ``rabc`` (ignored by ``bc`` and ``iql``).
        """
        cfg, policy = self.cfg, self.policy
        s = policy.normalize(obs, update=False)
        stats: dict[str, float] = {}
        chunk_actions, actions = actions, actions[:, :self.action_dim]
        if self.q is None:
            weights = torch.ones_like(rewards)
            if cfg.name == "rabc" and frame_weights is not None:
                weights = frame_weights
        else:
            s_next = policy.normalize(next_obs, update=False)
            with torch.no_grad():
                q_t = torch.min(*self.q_target(s, actions))
                target = cfg.reward_scale * rewards + cfg.gamma * (1.0 - terminal) * \
                    policy.evaluate(s_next)
            v = policy.evaluate(s)
            v_loss = expectile_loss(q_t - v, cfg.expectile)
            self.v_opt.zero_grad(set_to_none=True)
            v_loss.backward()
            self.v_opt.step()
            q1, q2 = self.q(s, actions)
            q_loss = (q1 - target).square().mean() + (q2 - target).square().mean()
            self.q_opt.zero_grad(set_to_none=True)
            q_loss.backward()
            self.q_opt.step()
            with torch.no_grad():
                for p, p_t in zip(self.q.parameters(), self.q_target.parameters(), strict=True):
                    p_t.lerp_(p, cfg.polyak)
                advantage = q_t - v.detach()
                scaled = advantage / (advantage.std() + 1e-6) if cfg.normalize_advantage \
                    else advantage
                weights = (cfg.beta * scaled).exp().clamp(max=cfg.max_weight)
            stats |= {"loss/value": v_loss.item(), "loss/q": q_loss.item(),
                      "q_mean": q_t.mean().item(), "advantage_mean": advantage.mean().item(),
                      "weight_mean": weights.mean().item()}
        actor_loss = (weights * (policy.actor(s) - chunk_actions).square().sum(-1)).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        stats["loss/policy"] = actor_loss.item()
        return stats

    def state_dict(self) -> dict[str, Any]:
        """Networks and optimisers (the policy is saved separately, as PPO's is)."""
        out: dict[str, Any] = {"config": asdict(self.cfg), "actor_opt": self.actor_opt.state_dict()}
        if self.q is not None:
            out |= {"q": self.q.state_dict(), "q_target": self.q_target.state_dict(),
                    "q_opt": self.q_opt.state_dict(), "v_opt": self.v_opt.state_dict()}
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (after the policy itself is loaded)."""
        self.actor_opt.load_state_dict(state["actor_opt"])
        if self.q is not None:
            self.q.load_state_dict(state["q"])
            self.q_target.load_state_dict(state["q_target"])
            self.q_opt.load_state_dict(state["q_opt"])
            self.v_opt.load_state_dict(state["v_opt"])
