"""Reward models (progress from camera frames or privileged state) and reward shaping.

``make_reward_model(cfg)`` builds a registered model from ``configs/reward/*.yaml``;
``RewardMixer`` turns progress into the RL reward of a mode (sparse, prm, prm+sparse,
oracle). Importing this package does not import transformers.
"""

from __future__ import annotations

from embodied.reward.base import (
    RewardModel,
    RewardOutput,
    check_frames,
    get_reward_model_class,
    make_reward_model,
    register_reward_model,
    reward_model_names,
)
from embodied.reward.shaping import (
    REWARD_MODES,
    PotentialShaping,
    RewardMixer,
    combine_rewards,
    shape,
    shaping_term,
    shaping_weight,
)

__all__ = [
    "REWARD_MODES",
    "PotentialShaping",
    "RewardMixer",
    "RewardModel",
    "RewardOutput",
    "check_frames",
    "combine_rewards",
    "get_reward_model_class",
    "make_reward_model",
    "register_reward_model",
    "reward_model_names",
    "shape",
    "shaping_term",
    "shaping_weight",
]
