"""panda_reach's scripted expert."""

from __future__ import annotations

import torch

from sim.tasks.panda_base.expert import ScriptedExpert
from sim.tasks.panda_reach.task import PandaReach


class ReachExpert(ScriptedExpert):
    """Scripted expert: differential IK (position only) straight to the target.

    ``noise`` adds Gaussian action noise and waypoint perturbations (see
    :class:`sim.tasks.panda_base.expert.ScriptedExpert`).
    """

    task: PandaReach

    def __init__(self, task: PandaReach, noise: float = 0.0, gen: torch.Generator | None = None):
        super().__init__(task, noise, gen)

    def act(self) -> torch.Tensor:
        """Actions moving the tcp towards the (perturbed) target, gripper open."""
        t = self.task
        return self.ik(self.waypoint(t.target), torch.ones(t.sim.num_envs, device=t.sim.device))
