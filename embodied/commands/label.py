"""`embodied label`: score a dataset's frames with a reward model into a new dataset.

The source is only read; an interrupted labelling resumes (see
:mod:`embodied.datasets.label`). Under ``torchrun`` the ranks share the episodes.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from embodied import distributed
from embodied.commands.registry import command
from embodied.datasets import DatasetError
from embodied.datasets.label import label_dataset
from embodied.reward.vlm.remote import ServerError


@command("label", "score a dataset's frames with a reward model into a new dataset "
         "(resumable)", errors=(DatasetError, ServerError))
def run_label(cfg: DictConfig) -> dict[str, Any]:
    """Label ``cfg.dataset`` into ``cfg.out``; returns the summary."""
    torch.set_num_threads(int(cfg.get("torch_threads") or 1))
    distributed.init()
    return label_dataset(cfg)
