"""Robo-Dopamine's General Reward Model (GRM-3B, a Qwen2.5-VL fine-tune): progress from hops.

The GRM compares a BEFORE and an AFTER state, each from several views, anchored by a
reference START and a reference END (goal) image of the front camera, and answers a
hop ``<score>+NN%</score>`` in [-100%, +100%]: for progress, the share of what
remained from BEFORE to the goal that AFTER covers; for regress, the share of what
BEFORE had achieved that AFTER lost. So with Phi in [0, 1]:

    Phi(after) = Phi(before) + hop * (1 - Phi(before))   if hop >= 0
    Phi(after) = Phi(before) + hop * Phi(before)         if hop <  0

which keeps chained progress in [0, 1] (``chain``). Three estimates of a state s_t
(the paper's multi-perspective fusion), each one prompt per state:

- ``incremental``: hops between consecutive scored states, chained from Phi(s_0) = 0;
- ``forward``: one hop from the episode's first state, Phi = chain(0, hop);
- ``backward``: one hop from the goal to s_t, Phi = chain(1, hop);

``fuse`` averages the enabled ``estimates`` (equal weights). The reference START is
the episode's first frame (front view); the reference END is ``goal``, a completed-task
image of the front camera (``.png``/``.jpg``, or ``.npy`` uint8 [H, W, 3] or
[V, H, W, 3]: all views of a completed state, used as the backward BEFORE state;
with one image, it stands in for every view, as in the GRM's own examples).

Labelling scores every ``stride``-th frame (and the last), interpolating in between;
in RL, each env's previous scored frame, chained progress and first frame are kept in
its ``EpisodeHistory``. Registered as ``grm`` (``configs/reward/grm.yaml``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodied.reward.base import RewardOutput
from embodied.reward.episodic import EpisodeHistory, fill, keyframes
from embodied.reward.vlm.cache import Row
from embodied.reward.vlm.parsing import parse_hop
from embodied.reward.vlm.protocol import ProtocolVlmReward

ESTIMATES = ("incremental", "forward", "backward")
DEFAULT_VIEW_NAMES = ("Front", "Left Wrist", "Right Wrist")

DEFAULT_INTRO = (
    "You judge robot task progress from images, strictly and impartially: does the AFTER "
    "set of images come closer to completing the task than the BEFORE set? The reference "
    "images only anchor the scale.\n\n<Task>\n`{instruction}`\n\nREFERENCE START (the task "
    "just begins), Robot {front} Image: ")
DEFAULT_OUTRO = (
    "\n\nCompare the BEFORE and AFTER sets along the START -> END scale. AFTER better: a "
    "positive score, scaled by what remained from BEFORE to END. AFTER worse: a negative "
    "score, scaled by how far BEFORE had come from START. No clear change: 0. Use every "
    "view; the wrist views decide grasp and contact details.\n"
    "Answer with ONE line, an integer percentage in [-100%, +100%] inside score tags: "
    "<score>+NN%</score> or <score>-NN%</score> or <score>0%</score>")


def chain(before: np.ndarray | float, hop: np.ndarray | float) -> np.ndarray:
    """Progress after a hop from progress ``before`` (module docstring), in [0, 1]."""
    before = np.asarray(before, np.float64)
    hop = np.clip(np.asarray(hop, np.float64), -1.0, 1.0)
    return np.clip(np.where(hop >= 0, before + hop * (1.0 - before), before + hop * before),
                   0.0, 1.0)


def chain_hops(hops: Sequence[float], start: float = 0.0) -> np.ndarray:
    """Progress at each of len(hops) + 1 states: ``start``, then each hop chained."""
    out = [float(start)]
    for hop in hops:
        out.append(float(chain(out[-1], hop)))
    return np.asarray(out, np.float32)


def fuse(estimates: Mapping[str, np.ndarray]) -> np.ndarray:
    """The mean of the progress estimates given (equal weights)."""
    if not estimates:
        raise ValueError("fuse needs at least one progress estimate")
    return np.mean(np.stack([np.asarray(v, np.float32) for v in estimates.values()]), 0)


GOAL_HINT = ("pass reward.goal=<a completed-task frame: .png or .npy>; `python -m "
             "embodied.reward.vlm.goal TASK OUT.npy` renders the task expert's at success")


def load_goal(path: str | Path | None) -> np.ndarray:
    """A goal image as uint8 [V, H, W, 3] (V = 1 for a single image)."""
    if path is None:
        raise ValueError(f"the GRM needs a goal image: {GOAL_HINT}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"GRM goal image {path} does not exist; {GOAL_HINT}")
    if path.suffix == ".npy":
        goal = np.load(path)
    else:
        from PIL import Image

        goal = np.asarray(Image.open(path).convert("RGB"))
    goal = goal[None] if goal.ndim == 3 else goal
    if goal.ndim != 4 or goal.shape[-1] != 3 or goal.dtype != np.uint8:
        raise ValueError(f"GRM goal {path} must be uint8 [H, W, 3] or [V, H, W, 3], got "
                         f"{goal.dtype} {list(goal.shape)}")
    return goal


class DopamineGRM(ProtocolVlmReward):
    """Robo-Dopamine GRM hops chained and fused into progress (module docstring).

    ``goal``: the completed-task image(s). ``estimates``: which of ``ESTIMATES`` to
    fuse. ``view_names``: the names the prompt gives the views, in order (None: Front,
    Left Wrist, Right Wrist for three views, else the camera names or "View i").
    ``stride``: frames between scored frames when labelling. ``fallback_hop``: the hop
    of an unreadable answer (0: no change). ``intro``/``outro``: the prompt text before
    the START image (with ``{instruction}`` and ``{front}``) and after the AFTER images.
    """

    def __init__(self, model: str, *, goal: str | Path | None,
                 estimates: Sequence[str] = ESTIMATES, view_names: Sequence[str] | None = None,
                 stride: int = 1, fallback_hop: float = 0.0, intro: str | None = None,
                 outro: str | None = None, server: Mapping[str, Any] | None = None,
                 camera_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        estimates = tuple(estimates)
        bad = [e for e in estimates if e not in ESTIMATES]
        if bad or not estimates:
            raise ValueError(f"estimates must be a non-empty subset of {ESTIMATES}, got "
                             f"{list(estimates)}")
        if stride < 1:
            raise ValueError(f"stride must be >= 1, got {stride}")
        if not -1.0 <= fallback_hop <= 1.0:
            raise ValueError(f"fallback_hop must be in [-1, 1], got {fallback_hop}")
        self.goal = load_goal(goal)
        super().__init__(model, server=server, camera_names=camera_names, **kwargs)
        self.estimates = estimates
        self.view_names = tuple(view_names) if view_names else None
        self.stride = int(stride)
        self.fallback_hop = float(fallback_hop)
        self.intro = DEFAULT_INTRO if intro is None else intro
        self.outro = DEFAULT_OUTRO if outro is None else outro
        self.history_keep = 2

    def _names(self, views: int) -> list[str]:
        if self.view_names is not None:
            if len(self.view_names) != views:
                raise ValueError(f"view_names names {len(self.view_names)} views, the frames "
                                 f"have {views}")
            return list(self.view_names)
        if views == len(DEFAULT_VIEW_NAMES):
            return list(DEFAULT_VIEW_NAMES)
        if self.camera_names is not None:
            return list(self.camera_names)
        return ["Front", *(f"View {i + 1}" for i in range(1, views))]

    def _goal_views(self, views: int) -> np.ndarray:
        if len(self.goal) == views:
            return self.goal
        if len(self.goal) == 1:
            return np.repeat(self.goal, views, 0)
        raise ValueError(f"the GRM goal has {len(self.goal)} views, the frames have {views}")

    def _row(self, start: np.ndarray, before: np.ndarray, after: np.ndarray,
             instruction: str) -> Row:
        """One GRM prompt: START and END (front), then BEFORE and AFTER views [V, H, W, 3]."""
        names = self._names(len(after))
        row: list[Any] = [
            {"type": "text", "text": self.intro.format(instruction=instruction.rstrip("."),
                                                       front=names[0])},
            start[0],
            {"type": "text", "text": f"\nREFERENCE END (the task fully completed), Robot "
                                     f"{names[0]} Image: "},
            self.goal[0], {"type": "text", "text": "\n</Task>\n"}]
        for label, state in (("BEFORE", before), ("AFTER", after)):
            for name, image in zip(names, state, strict=True):
                row += [{"type": "text", "text": f"\n{label} Robot {name} Image: "}, image]
            row.append({"type": "text", "text": "\n"})
        row.append({"type": "text", "text": self.outro})
        return row

    def _hops(self, rows: list[Row]) -> np.ndarray:
        return np.asarray(self.ask(rows, parse_hop, self.fallback_hop,
                                   f"hop {self.fallback_hop}"), np.float32)

    def _score_episode(self, frames: np.ndarray, instruction: str) -> RewardOutput:
        at = keyframes(len(frames), self.stride)
        first, goal = frames[0], self._goal_views(frames.shape[1])
        rows: dict[str, list[Row]] = {
            "incremental": [self._row(first, frames[a], frames[b], instruction)
                            for a, b in pairwise(at)],
            "forward": [self._row(first, first, frames[t], instruction) for t in at[1:]],
            "backward": [self._row(first, goal, frames[t], instruction) for t in at]}
        wanted = [e for e in ESTIMATES if e in self.estimates]
        flat = [row for e in wanted for row in rows[e]]
        hops, out, i = self._hops(flat), {}, 0
        for e in wanted:
            h, i = hops[i:i + len(rows[e])], i + len(rows[e])
            if e == "incremental":
                out[e] = chain_hops(h)
            elif e == "forward":
                out[e] = np.concatenate([[0.0], chain(0.0, h)])
            else:
                out[e] = chain(1.0, h)
        return RewardOutput(progress=torch.from_numpy(fill(len(frames), at, fuse(out))))

    def _score_latest(self, histories: list[EpisodeHistory],
                      instructions: list[str]) -> RewardOutput:
        rows: list[Row] = []
        slots: list[tuple[int, str]] = []
        for b, (h, instruction) in enumerate(zip(histories, instructions, strict=True)):
            goal = self._goal_views(h.last.shape[0])
            for e in self.estimates:
                if e == "backward":
                    rows.append(self._row(h.first, goal, h.last, instruction))
                elif h.steps > 1:  # the first state of an episode has progress 0 by definition
                    before = h.memo["before"] if e == "incremental" else h.first
                    rows.append(self._row(h.first, before, h.last, instruction))
                else:
                    continue
                slots.append((b, e))
        hops = self._hops(rows)
        estimates = {e: np.zeros(len(histories), np.float32) for e in self.estimates}
        for (b, e), hop in zip(slots, hops, strict=True):
            base = {"incremental": histories[b].memo.get("incremental", 0.0), "forward": 0.0,
                    "backward": 1.0}[e]
            estimates[e][b] = chain(base, hop)
        for b, h in enumerate(histories):
            h.memo["before"] = h.last
            h.memo["incremental"] = float(estimates.get("incremental", np.zeros(b + 1))[b])
        return RewardOutput(progress=torch.from_numpy(fuse(estimates)))


__all__ = [
    "DEFAULT_INTRO",
    "DEFAULT_OUTRO",
    "ESTIMATES",
    "DopamineGRM",
    "chain",
    "chain_hops",
    "fuse",
    "load_goal",
]
