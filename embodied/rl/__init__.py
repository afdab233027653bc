"""On-policy RL for batched envs: PPO in a few small parts (rsl_rl/CleanRL style).

- :mod:`normalizer`: running observation statistics as a module (saved with the policy)
- :mod:`actor_critic`: Gaussian MLP actor + MLP critic
- :mod:`storage`: rollout tensors [T, B, ...] and GAE with time-out bootstrapping
- :mod:`ppo`: the clipped-surrogate update with an adaptive-KL learning rate
- :mod:`runner`: the loop: collection, learning, logging, checkpoints, evaluation
- :mod:`checkpoint`: checkpoint files: find, read, write; :class:`CheckpointError`
"""

from __future__ import annotations

from embodied.rl.actor_critic import ActorCritic
from embodied.rl.checkpoint import CheckpointError
from embodied.rl.normalizer import EmpiricalNormalization
from embodied.rl.ppo import PPO, PPOConfig
from embodied.rl.runner import OnPolicyRunner
from embodied.rl.storage import RolloutStorage, bootstrap_time_outs, compute_gae

__all__ = [
    "PPO",
    "ActorCritic",
    "CheckpointError",
    "EmpiricalNormalization",
    "OnPolicyRunner",
    "PPOConfig",
    "RolloutStorage",
    "bootstrap_time_outs",
    "compute_gae",
]
