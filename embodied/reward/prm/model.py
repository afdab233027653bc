"""The learned PRM as a reward model: ``reward=prm`` (``{'name': 'prm', 'checkpoint': ...}``).

Views are matched to the network's camera slots by name. A camera the frames do not
have counts as a missing view and is left out of the fusion (the network was trained
with view dropout for this); at least one of its cameras must be present.

A PRM trained with temporal context (``context: start``) also reads the views of the
episode's first state, passed as extra cameras named ``<camera>@start``
(``start_slots``; ``start_context`` is True). Without them it scores the current state
alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from embodied.reward.base import RewardModel, RewardOutput
from embodied.reward.prm.checkpoint import load_prm
from embodied.reward.prm.inference import make_scorer


def resolve_device(device: str) -> torch.device:
    """``auto`` -> cuda if available, else cpu."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class LearnedPRM(RewardModel):
    """Multi-view PRM loaded from a checkpoint of ``embodied reward train``."""

    def __init__(self, checkpoint: str | Path, device: str = "cpu",
                 batch_size: int = 1024) -> None:
        if checkpoint is None:
            raise ValueError("reward model 'prm' needs a checkpoint: train one with "
                             "`embodied reward train task=<task>` and pass "
                             "reward.checkpoint=<its run folder or prm.pt>")
        self.device = resolve_device(device)
        self.checkpoint = str(checkpoint)
        self.net, self.info = load_prm(checkpoint, self.device)
        self.predict = make_scorer(self.net)  # embodied/reward/prm/inference.py
        self.model_cameras = tuple(self.net.slots)
        self.start_context = self.net.cfg.context == "start"
        self.camera_names = None  # matched by name in _select_views (missing views allowed)
        size = self.net.cfg.image_size
        self.image_size = (size, size)
        self.instruction = self.info.get("instruction")
        self.batch_size = int(batch_size)
        self._present: torch.Tensor | None = None

    def _select_views(self, frames: torch.Tensor, cameras: Sequence[str] | None) -> torch.Tensor:
        """Frames in the network's camera order; absent cameras become masked slots."""
        want, v = self.model_cameras, frames.shape[1]
        if self.start_context and (cameras is None or not set(want[len(want) // 2:])
                                   & set(cameras)):
            want = want[:len(want) // 2]  # no start views given: the current state alone
        if cameras is None:
            if v != len(want):
                raise ValueError(f"the PRM expects the cameras {list(want)} but got {v} "
                                 "unnamed views; pass cameras=env.camera_names (the names "
                                 "of the rendered views)")
            self._present = None
            return frames
        cameras = list(cameras)
        if len(cameras) != v:
            raise ValueError(f"cameras names {len(cameras)} views ({cameras}) but frames "
                             f"have {v}; pass the list given to render()")
        have = [c for c in want if c in cameras]
        if not have:
            raise ValueError(f"none of the PRM's cameras {list(want)} is among the frames' "
                             f"{cameras}; render with cameras={list(want)}")
        if len(have) == len(want):
            self._present = None
            order = [cameras.index(c) for c in want]
            return frames if order == list(range(v)) else frames[:, order]
        out = frames.new_zeros((frames.shape[0], len(want), *frames.shape[2:]))
        present = torch.zeros(frames.shape[0], len(want), dtype=torch.bool)
        for slot, name in enumerate(want):
            if name in cameras:
                out[:, slot] = frames[:, cameras.index(name)]
                present[:, slot] = True
        self._present = present
        return out

    def weights_changed(self) -> None:
        """Rebuild the scoring path after ``net``'s weights changed (an online refresh).

        The fast path keeps its own folded copy of the convolutions, so scores keep
        coming from the old weights until this is called.
        """
        self.predict = make_scorer(self.net)

    @torch.inference_mode()
    def _score(self, frames: torch.Tensor | None, instructions: list[str],
               state: Mapping[str, Any] | None) -> RewardOutput:
        present = None if self._present is None else self._present.to(self.device)
        self._present = None
        prog, succ = [], []
        for i in range(0, frames.shape[0], self.batch_size):
            sl = slice(i, i + self.batch_size)
            p, s = self.predict(frames[sl], instructions[sl],
                                None if present is None else present[sl])
            prog.append(p)
            succ.append(s)
        return RewardOutput(progress=torch.cat(prog).float(), success_prob=torch.cat(succ).float())
