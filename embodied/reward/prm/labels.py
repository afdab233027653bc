"""Progress labels for the learned PRM: K-bin discretisation, temporal clips, counterfactuals.

Progress p in [0, 1] is discretised into K bins whose centres are ``k / (K - 1)``
(k = 0..K-1, so 0 and 1 are bin centres). The training target is the *two-hot*
distribution over the two bins around p, whose expected value is exactly p; the model's
progress is the expected value of its predicted distribution.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

# Instructions no Panda or Go2 task here performs: counterfactual negatives beside the
# other tasks' own instructions (the frames of task A under any of these mean no progress).
UNRELATED_INSTRUCTIONS: tuple[str, ...] = (
    "open the top drawer",
    "stack the blue block on the yellow block",
    "wipe the table with the sponge",
    "turn the valve clockwise",
    "put the banana in the bowl",
    "press the green button",
)


def bin_centers(num_bins: int) -> torch.Tensor:
    """float32 [K]: the progress value of each bin, ``k / (K - 1)``."""
    if num_bins < 2:
        raise ValueError(f"num_bins must be >= 2, got {num_bins}")
    return torch.linspace(0.0, 1.0, num_bins)


def progress_to_bins(progress: torch.Tensor | np.ndarray, num_bins: int) -> torch.Tensor:
    """long [N]: the nearest bin of each progress value (clamped to [0, 1])."""
    p = torch.as_tensor(progress, dtype=torch.float32).clamp(0.0, 1.0)
    return torch.round(p * (num_bins - 1)).long()


def two_hot(progress: torch.Tensor | np.ndarray, num_bins: int) -> torch.Tensor:
    """float32 [N, K]: weights on the two bins around p; their expected value is p."""
    p = torch.as_tensor(progress, dtype=torch.float32).clamp(0.0, 1.0) * (num_bins - 1)
    lo = p.floor().long().clamp(max=num_bins - 1)
    hi = (lo + 1).clamp(max=num_bins - 1)
    w_hi = p - lo.float()
    out = torch.zeros(p.shape[0], num_bins)
    out.scatter_add_(1, lo[:, None], (1.0 - w_hi)[:, None])
    out.scatter_add_(1, hi[:, None], w_hi[:, None])
    return out


def expected_progress(logits: torch.Tensor) -> torch.Tensor:
    """[N]: the expected bin centre under ``softmax(logits)`` [N, K]."""
    centers = bin_centers(logits.shape[-1]).to(logits)
    return (logits.softmax(-1) * centers).sum(-1)


def first_success(success: np.ndarray) -> int | None:
    """Index of the first True in an episode's success flags, or None."""
    hits = np.flatnonzero(np.asarray(success, dtype=bool))
    return int(hits[0]) if len(hits) else None


def temporal_clips(success: np.ndarray, num_clips: int, rng: np.random.Generator,
                   min_length: int = 2) -> list[int]:
    """End indices of clips ``[0, end]`` of one episode that stop before it succeeds.

    The last frame of such a clip is a partial-progress, *not yet successful* state of
    an expert episode: a hard negative for success detection (RoboReward's temporal
    clipping). Episodes without success are clipped anywhere. Empty if the episode
    succeeds before ``min_length`` frames.
    """
    n = len(success)
    stop = first_success(success)
    stop = n if stop is None else stop
    if stop < min_length:
        return []
    return sorted(rng.choice(np.arange(min_length - 1, stop), size=min(num_clips, stop -
                                                                        min_length + 1),
                             replace=False).tolist())


def counterfactual_instructions(instruction: str, others: Sequence[str]) -> list[str]:
    """Instructions that do not describe the task of ``instruction`` (others + unrelated)."""
    pool = [*others, *UNRELATED_INSTRUCTIONS]
    seen, out = {instruction.strip().lower()}, []
    for text in pool:
        key = text.strip().lower()
        if key not in seen:
            seen.add(key)
            out.append(text)
    return out


# Near-miss instructions: the task's own sentence with one detail changed, so it names a
# colour, an object or a relation the scene does not show (its progress is 0).
COLOURS: tuple[str, ...] = ("red", "green", "blue", "yellow", "orange", "purple")
OBJECTS: dict[str, str] = {"ball": "cube", "cube": "ball", "sphere": "block",
                           "block": "sphere", "target": "bowl", "goal": "drawer"}
RELATIONS: dict[str, str] = {"to": "away from", "into": "out of", "onto": "off",
                             "on": "off"}


def near_miss_instructions(instruction: str) -> dict[str, list[str]]:
    """Instructions one detail away from ``instruction``, by kind of change.

    ``colour``: one named colour replaced by another (absent from the sentence);
    ``object``: one object noun replaced by another object; ``relation``: one spatial
    relation replaced by its opposite. A kind without a word to change is empty.
    """
    words = instruction.split()
    lower = [w.lower() for w in words]

    def swapped(i: int, new: str) -> str:
        return " ".join([*words[:i], new, *words[i + 1:]])

    out: dict[str, list[str]] = {"colour": [], "object": [], "relation": []}
    for i, w in enumerate(lower):
        if w in COLOURS:
            out["colour"] += [swapped(i, c) for c in COLOURS if c not in lower][:2]
        if w in OBJECTS:
            out["object"].append(swapped(i, OBJECTS[w]))
        if w in RELATIONS:
            out["relation"].append(swapped(i, RELATIONS[w]))
    return out


def relative_progress(progress: np.ndarray, start_progress: np.ndarray) -> np.ndarray:
    """Share of the way left at a start state that the current state has covered.

    ``(p - p_start) / (1 - p_start)`` clamped to [0, 1]: the progress of a clip that
    begins at the start state. A clip played backwards (the start later in the episode
    than the current state) has made no progress: 0.
    """
    p, p0 = np.asarray(progress, np.float32), np.asarray(start_progress, np.float32)
    return np.clip((p - p0) / np.maximum(1.0 - p0, 0.05), 0.0, 1.0).astype(np.float32)


def context_starts(rows: np.ndarray, first: np.ndarray, last: np.ndarray,
                   progress: np.ndarray, shift_prob: float, reverse_prob: float,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The start state shown with each row, and the progress target under that start.

    ``rows`` are dataset rows; ``first`` / ``last`` [N] the first and last row of each
    row's episode; ``progress`` [N] the simulator's progress of every row. By default the
    start is the episode's first state and the target the row's own progress. With
    probability ``shift_prob`` the start is an earlier state of the episode (a clip that
    begins mid-way), with ``reverse_prob`` a later one (the clip played backwards, a
    reversed-clip negative); their targets are ``relative_progress`` from that start.
    """
    rows = np.asarray(rows)
    lo, hi = first[rows], last[rows]
    start, target = lo.copy(), progress[rows].astype(np.float32).copy()
    draw = rng.random(len(rows))
    shift = draw < shift_prob
    reverse = (draw >= shift_prob) & (draw < shift_prob + reverse_prob) & (rows < hi)
    start[shift] = rng.integers(lo[shift], rows[shift] + 1)
    start[reverse] = rng.integers(rows[reverse] + 1, hi[reverse] + 1)
    moved = shift | reverse
    target[moved] = relative_progress(progress[rows[moved]], progress[start[moved]])
    return start, target
