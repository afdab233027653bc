"""Scoring a frame dataset with a reward model and computing the PRM metrics on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodied.reward.base import RewardModel
from embodied.reward.prm.data import FrameDataset
from embodied.reward.prm.metrics import counterfactual_metrics, progress_metrics


@torch.inference_mode()
def score_rows(model: RewardModel, data: FrameDataset, rows: np.ndarray, instruction: str,
               batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Progress and success probability (NaN if the model has none) of dataset rows."""
    prog, succ = [], []
    for i in range(0, len(rows), batch_size):
        idx = rows[i:i + batch_size]
        frames = torch.from_numpy(np.ascontiguousarray(data.frames[idx]))
        out = model.score(frames, instruction, cameras=data.cameras)
        prog.append(out.progress.float().cpu().numpy())
        succ.append(out.success_prob.float().cpu().numpy() if out.success_prob is not None
                    else np.full(len(idx), np.nan, np.float32))
    if not prog:
        return np.zeros(0, np.float32), np.zeros(0, np.float32)
    return np.concatenate(prog), np.concatenate(succ)


def evaluate(model: RewardModel, data: FrameDataset, split: str = "val",
             plot: str | Path | None = None, max_counterfactual: int = 512) -> dict[str, Any]:
    """All metrics (``metrics.py``) on the episodes of ``split``; optionally a PNG."""
    eps = data.episode_rows(split)
    if not eps:
        raise ValueError(f"the dataset has no '{split}' episodes")
    meta = [e for e in data.episodes if e["split"] == split]
    rows = np.concatenate(eps)
    pred, prob = score_rows(model, data, rows, data.instruction)
    cuts = np.cumsum([len(e) for e in eps])[:-1]
    preds, probs = np.split(pred, cuts), np.split(prob, cuts)
    trues = [data.progress[e] for e in eps]
    oks = [data.success[e] for e in eps]
    out = progress_metrics(preds, trues, oks, [m["kind"] == "expert" for m in meta], probs)
    # Counterfactual instructions on the same progressed states.
    far = rows[data.progress[rows] >= 0.5][:max_counterfactual]
    if len(far):
        others = data.meta["counterfactual_instructions"]
        matched = pred[np.isin(rows, far)]
        mismatched = np.concatenate([score_rows(model, data, far, text)[0]
                                     for text in others])
        out |= counterfactual_metrics(matched, mismatched)
    out["kinds"] = {k: sum(m["kind"] == k for m in meta) for k in ("expert", "noisy", "failed")}
    if plot is not None:
        out["plot"] = str(plot_episodes(preds, trues, meta, plot))
    return out


def plot_episodes(preds: list[np.ndarray], trues: list[np.ndarray], meta: list[dict],
                  path: str | Path, per_kind: int = 2) -> Path:
    """Predicted (solid) against simulator progress (dashed) for a few episodes per kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in ("expert", "noisy", "failed") if any(m["kind"] == k for m in meta)]
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.2 * len(kinds), 3.2), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        picked = [i for i, m in enumerate(meta) if m["kind"] == kind][:per_kind]
        for j, i in enumerate(picked):
            color = f"C{j}"
            ax.plot(preds[i], color=color, label=f"episode {meta[i]['index']} predicted")
            ax.plot(trues[i], color=color, linestyle="--", label="simulator")
        ax.set_title(f"{kind} episodes (held out)")
        ax.set_xlabel("recorded state")
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("progress")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def print_metrics(m: dict[str, Any]) -> None:
    """The metrics of a reward model, one per line."""
    print(f"\nheld-out episodes {m['kinds']}")
    rows = [("VOC (expert)", "voc"), ("VOC reversed", "voc_reversed"),
            ("success F1", "success_f1"), ("success AUROC", "success_auroc"),
            ("Pearson vs sim", "progress_pearson"), ("Spearman vs sim", "progress_spearman"),
            ("pairwise accuracy", "pairwise_accuracy"),
            ("counterfactual gap", "counterfactual_gap"),
            ("counterfactual AUROC", "counterfactual_auroc")]
    for label, key in rows:
        if key in m:
            print(f"  {label:<22}{m[key]:.3f}")
    if "plot" in m:
        print(f"  plot                  {m['plot']}")
