"""Offline learners on datasets: IQL and behaviour cloning, on state observations."""

from __future__ import annotations

from embodied.offline.data import Transitions, load_transitions
from embodied.offline.iql import OfflineConfig, OfflineLearner, expectile_loss

__all__ = ["OfflineConfig", "OfflineLearner", "Transitions", "expectile_loss",
           "load_transitions"]
