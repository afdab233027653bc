"""The learner of an ``algo.name``, with every learner of the project registered."""

from __future__ import annotations

from embodied.learners import ppo, sb3
from embodied.learners.base import Learner, learner_class, learner_names
from embodied.offline import runner

LEARNER_MODULES = (ppo, sb3, runner)  # imported for their registrations

__all__ = ["LEARNER_MODULES", "Learner", "learner_class", "learner_names"]
