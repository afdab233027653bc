"""Preference labels on pairs of observations (RL-VLM-F): which of two shows more progress.

A label is P(the first observation is preferred) as float32: 1.0 (first), 0.0
(second), 0.5 (no preference: the labeller saw no difference or said so), NaN (no
label: the labeller's answer was unreadable). Bradley-Terry training
(``bradley_terry.py``) drops NaN pairs and, by its ``no_preference`` option, drops
the 0.5 pairs (as RL-VLM-F does) or trains on them as ties.

Labellers, behind one ``label(frames_a, frames_b, instructions, state_a, state_b)``:

- ``ScoreLabeller``: any ``RewardModel`` as the judge: the observation it scores
  higher, by more than ``margin``, is preferred. With the ``sim_progress`` model this
  labels from the simulator's true progress; with ``vlm`` from a VLM's percentages.
- ``VlmPreferenceLabeller``: a generative VLM shown both observations (all views of
  each) and asked which shows more progress, answering 1, 2 or 0 (cannot tell);
  optionally asked in both orders to cancel position bias.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from embodied.reward.base import RewardModel, check_frames, instructions, make_reward_model
from embodied.reward.bradley_terry import preference_accuracy
from embodied.reward.oracle import SimProgressReward

NO_PREFERENCE = 0.5

DEFAULT_PREFERENCE_PROMPT = (
    "Both observations show a robot from {views} cameras. The robot's task: {instruction}.\n"
    "Which observation shows more progress on the task? Answer 1 or 2, or 0 if you cannot "
    "tell.")

State = Mapping[str, Any] | None


class PreferenceLabeller(Protocol):
    """Labels pairs of observations with which one shows more task progress."""
    def label(self, frames_a: torch.Tensor, frames_b: torch.Tensor, instructions: list[str],
              state_a: State = None, state_b: State = None) -> np.ndarray:
        """P(a preferred over b) float32 [N]: 1, 0, 0.5 (no preference) or NaN (no label)."""
        ...


class ScoreLabeller:
    """Prefers the observation ``model`` scores higher; no preference within ``margin``."""

    def __init__(self, model: RewardModel, margin: float = 0.05,
                 cameras: Sequence[str] | None = None) -> None:
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        self.model = model
        self.margin = float(margin)
        self.cameras = list(cameras) if cameras else None

    def label(self, frames_a: torch.Tensor, frames_b: torch.Tensor, instructions: list[str],
              state_a: State = None, state_b: State = None) -> np.ndarray:
        """P(a preferred over b) float32 [N]: 1, 0, or 0.5 within ``margin``."""
        a = self.model.score(frames_a, instructions, cameras=self.cameras, state=state_a)
        b = self.model.score(frames_b, instructions, cameras=self.cameras, state=state_b)
        diff = (a.progress - b.progress).float().cpu().numpy()
        out = np.full(len(diff), NO_PREFERENCE, np.float32)
        out[diff > self.margin] = 1.0
        out[diff < -self.margin] = 0.0
        return out


class VlmPreferenceLabeller:
    """Asks a generative VLM which of two multi-view observations shows more progress.

    ``model``: local folder or hub id of an image-text-to-text model. ``prompt``: a
    template with ``{instruction}`` and ``{views}``. ``both_orders``: ask (a, b) and (b, a)
    and keep a label only where the answers agree (else no preference), cancelling the
    position bias VLMs have. Unreadable answers give NaN, counted in ``num_unparsed``.
    """

    def __init__(self, model: str, prompt: str | None = None,
                 camera_names: Sequence[str] | None = None, label_views: bool = True,
                 both_orders: bool = False, max_new_tokens: int = 8, batch_size: int = 4,
                 system_prompt: str | None = None, device: str = "cpu",
                 dtype: str = "float32", local_files_only: bool = False) -> None:
        from embodied.reward.vlm.chat import UnparsedCounter, VlmChat

        self.prompt = DEFAULT_PREFERENCE_PROMPT if prompt is None else prompt
        if "{instruction}" not in self.prompt:
            raise ValueError(f"prompt must contain '{{instruction}}', got {self.prompt!r}")
        self.chat = VlmChat(model, batch_size=batch_size, device=device, dtype=dtype,
                            system_prompt=system_prompt, local_files_only=local_files_only)
        self.cameras = list(camera_names) if camera_names else None
        self.label_views = label_views
        self.both_orders = both_orders
        self.max_new_tokens = int(max_new_tokens)
        self.counter = UnparsedCounter("preference")
        self.last_answers: list[str] = []

    @property
    def num_unparsed(self) -> int:
        """Answers so far that gave no label."""
        return self.counter.num_unparsed

    def _rows(self, frames_a: np.ndarray, frames_b: np.ndarray,
              instructions: list[str]) -> list[list[Any]]:
        from embodied.reward.vlm.chat import view_content

        views = frames_a.shape[1]
        labels = (self.cameras or [f"view {i + 1}" for i in range(views)]
                  if self.label_views else None)
        rows = []
        for a, b, instruction in zip(frames_a, frames_b, instructions, strict=True):
            text = self.prompt.format(instruction=instruction.rstrip("."), views=views)
            rows.append([{"type": "text", "text": "Observation 1:"}, *view_content(a, labels),
                         {"type": "text", "text": "Observation 2:"}, *view_content(b, labels),
                         {"type": "text", "text": text}])
        return rows

    def _ask(self, frames_a: np.ndarray, frames_b: np.ndarray,
             instructions: list[str]) -> np.ndarray:
        from embodied.reward.vlm.parsing import parse_preference

        answers = self.chat.generate(self._rows(frames_a, frames_b, instructions),
                                     self.max_new_tokens)
        parsed = [parse_preference(a) for a in answers]
        self.counter.add(answers, parsed, "no label (pair dropped)")
        self.last_answers = answers
        return np.array([np.nan if p is None else p for p in parsed], np.float32)

    def label(self, frames_a: torch.Tensor, frames_b: torch.Tensor, instructions: list[str],
              state_a: State = None, state_b: State = None) -> np.ndarray:
        """P(a preferred over b) float32 [N]: 1, 0, 0.5 or NaN (no label).

        With ``both_orders`` the pair is also asked swapped; answers that disagree give 0.5 (no
        preference), and NaN if either gave no label.
        """
        a, b = check_frames(frames_a).cpu().numpy(), check_frames(frames_b).cpu().numpy()
        first = self._ask(a, b, instructions)
        if not self.both_orders:
            return first
        second = 1.0 - self._ask(b, a, instructions)  # P(a preferred) from the swapped order
        return np.where(first == second, first,
                        np.where(np.isnan(first) | np.isnan(second), np.nan, NO_PREFERENCE)
                        ).astype(np.float32)


def sample_pairs(episodes: Sequence[np.ndarray], num_pairs: int, rng: np.random.Generator,
                 within_episode: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """``num_pairs`` pairs of row indices (a, b), a != b, from the given episodes' rows.

    A share ``within_episode`` of the pairs are two states of one episode (same scene,
    different time: teaches progress), the rest states of two random episodes.
    """
    episodes = [np.asarray(e) for e in episodes if len(e) > 0]
    if not episodes or sum(len(e) for e in episodes) < 2:
        raise ValueError("need at least two rows to sample preference pairs")
    rows = np.concatenate(episodes)
    a = np.empty(num_pairs, np.int64)
    b = np.empty(num_pairs, np.int64)
    multi = [e for e in episodes if len(e) > 1]
    for i in range(num_pairs):
        if multi and rng.random() < within_episode:
            ep = multi[rng.integers(len(multi))]
            a[i], b[i] = rng.choice(ep, size=2, replace=False)
        else:
            a[i], b[i] = rng.choice(rows, size=2, replace=False)
    return a, b


def label_pairs(labeller: PreferenceLabeller, frames: np.ndarray | torch.Tensor,
                a: np.ndarray, b: np.ndarray, instruction: str | Sequence[str],
                state: Mapping[str, np.ndarray] | None = None, batch_size: int = 64,
                progress_bar: bool = False) -> np.ndarray:
    """Labels [N] of the row pairs (a, b) of ``frames`` [M, V, H, W, 3], in batches.

    ``state``: per-row arrays (e.g. ``{"progress": ..., "success": ...}``) sliced for
    state labellers such as ``ScoreLabeller(sim_progress)``.
    """
    from tqdm import tqdm

    if len(a) != len(b):
        raise ValueError(f"a and b must pair up, got {len(a)} and {len(b)} rows")
    texts = instructions(instruction, len(a))
    out = []
    for i in tqdm(range(0, len(a), batch_size), desc="label pairs", disable=not progress_bar):
        ia, ib = a[i:i + batch_size], b[i:i + batch_size]

        def rows(idx: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(np.ascontiguousarray(frames[idx]))

        def sliced(idx: np.ndarray) -> dict[str, torch.Tensor] | None:
            return None if state is None else {k: torch.as_tensor(np.asarray(v)[idx])
                                               for k, v in state.items()}

        out.append(labeller.label(rows(ia), rows(ib), texts[i:i + batch_size], sliced(ia),
                                  sliced(ib)))
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)


def make_labeller(cfg: dict[str, Any], cameras: list[str]) -> PreferenceLabeller:
    """The labeller of ``cfg`` (``kind``: sim | vlm | model; configs/commands/reward_bt.yaml)."""
    kind = cfg.get("kind")
    if kind == "sim":
        return ScoreLabeller(SimProgressReward(), cfg.get("margin", 0.05), cameras)
    if kind == "vlm":
        return VlmPreferenceLabeller(**dict(cfg.get("vlm") or {}))
    if kind == "model":
        if not cfg.get("model"):
            raise ValueError("labeller.kind=model needs labeller.model (a reward model "
                             "config such as {name: vlm, model: PATH})")
        return ScoreLabeller(make_reward_model(cfg["model"]), cfg.get("margin", 0.05), cameras)
    raise ValueError(f"labeller.kind must be sim, vlm or model, got '{kind}'")


def preference_counts(labels: np.ndarray) -> dict[str, int]:
    """How many labels prefer the first, the second, neither, or are missing (NaN)."""
    return {"first": int((labels == 1).sum()), "second": int((labels == 0).sum()),
            "no_preference": int((labels == 0.5).sum()), "unlabelled": int(np.isnan(labels).sum())}



def true_preference_accuracy(reward: np.ndarray, data: Any, a: np.ndarray, b: np.ndarray,
                             labels: np.ndarray, margin: float, val_pairs: int,
                             rng: np.random.Generator, within_episode: float = 0.5
                             ) -> dict[str, Any]:
    """How well ``reward`` [rows] and the ``labels`` of the pairs (a, b) agree with the truth.

    ``data`` is a PRM frame dataset (:class:`embodied.reward.prm.data.FrameDataset`);
    the truth is the simulator's progress, labelled with ``margin``. Held out:
    ``val_pairs`` pairs of the validation episodes.
    """
    truth = {"progress": data.progress, "success": data.success}
    va, vb = sample_pairs(data.episode_rows("val"), val_pairs, rng, within_episode)
    sim = make_labeller({"kind": "sim", "margin": margin}, data.cameras)
    true_val = label_pairs(sim, data.frames, va, vb, data.instruction, state=truth)
    true_train = label_pairs(sim, data.frames, a, b, data.instruction, state=truth)
    val_acc, val_n = preference_accuracy(reward, va, vb, true_val)
    return {"labeller_accuracy": preference_accuracy(data.progress, a, b, labels)[0],
            "train_accuracy_true": preference_accuracy(reward, a, b, true_train)[0],
            "val_pairwise_accuracy": val_acc, "val_pairs": val_n}


__all__ = ["DEFAULT_PREFERENCE_PROMPT", "NO_PREFERENCE", "PreferenceLabeller",
           "ScoreLabeller", "VlmPreferenceLabeller", "label_pairs", "make_labeller",
           "preference_counts", "sample_pairs", "true_preference_accuracy"]
