"""Scoring a frame dataset with a reward model and computing the PRM metrics on it.

- :func:`evaluate`: every metric of ``metrics.py`` on the held-out episodes.
- :func:`fit_success_calibration`: the Platt calibration of a freshly trained PRM's
  success head on the held-out episodes (``calibration.py``).
- :func:`shift_suite`: the same episodes simulated afresh under each kind of visual
  shift (other light levels, surface colours, moved cameras, pixel noise; ranges in
  ``configs/commands/reward_eval.yaml``) and scored: success F1, AUROC, ECE and
  progress Pearson per kind, and a PNG. Every kind replays the same physics (the visual
  draws have a generator of their own), so kinds differ in how frames look only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodied.reward.base import RewardModel
from embodied.reward.prm.calibration import SuccessCalibration, calibration_report
from embodied.reward.prm.data import (
    DataConfig,
    FrameDataset,
    all_policies,
    load_frames,
    policy_sources,
    save_frames,
    simulate,
)
from embodied.reward.prm.inference import make_scorer
from embodied.reward.prm.metrics import counterfactual_metrics, progress_metrics
from embodied.reward.prm.network import MultiViewPRM

#: Figures of a shift kind kept in the JSON (a subset of :func:`evaluate`'s).
SHIFT_KEYS = ("success_f1", "success_auroc", "success_ece", "progress_pearson",
              "progress_spearman", "voc", "states")


@torch.inference_mode()
def score_rows(model: RewardModel, data: FrameDataset, rows: np.ndarray, instruction: str,
               batch_size: int = 256,
               start_rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Progress and success probability (NaN if the model has none) of dataset rows.

    ``start_rows`` (one per row): the views of those rows go with each state as its start
    views (``<camera>@start``) to a model with temporal context; others ignore them.
    """
    prog, succ = [], []
    context = start_rows is not None and getattr(model, "start_context", False)
    names = [*data.cameras, *(f"{c}@start" for c in data.cameras)] if context \
        else data.cameras
    for i in range(0, len(rows), batch_size):
        idx = rows[i:i + batch_size]
        frames = torch.from_numpy(np.ascontiguousarray(data.frames[idx]))
        if context:
            start = np.ascontiguousarray(data.frames[start_rows[i:i + batch_size]])
            frames = torch.cat([frames, torch.from_numpy(start)], 1)
        out = model.score(frames, instruction, cameras=names)
        prog.append(out.progress.float().cpu().numpy())
        succ.append(out.success_prob.float().cpu().numpy() if out.success_prob is not None
                    else np.full(len(idx), np.nan, np.float32))
    if not prog:
        return np.zeros(0, np.float32), np.zeros(0, np.float32)
    return np.concatenate(prog), np.concatenate(succ)


KINDS = ("expert", "noisy", "failed", "wander")  # simulated kinds reported apart


def evaluate(model: RewardModel, data: FrameDataset, split: str | None = "val",
             plot: str | Path | None = None, max_counterfactual: int = 512) -> dict[str, Any]:
    """All metrics (``metrics.py``) on the episodes of ``split`` (None: all); optionally a PNG."""
    eps = data.episode_rows(split)
    if not eps:
        raise ValueError(f"the dataset has no '{split}' episodes")
    meta = [e for e in data.episodes if split is None or e["split"] == split]
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
    out["kinds"] = {k: sum(m["kind"] == k for m in meta) for k in KINDS}
    if plot is not None:
        out["plot"] = str(plot_episodes(preds, trues, meta, plot))
    return out


def fit_success_calibration(net: MultiViewPRM, data: FrameDataset,
                            batch_size: int = 256) -> dict[str, Any]:
    """Platt calibration of ``net``'s success head on the ``val`` states of ``data``.

    Returns :func:`~embodied.reward.prm.calibration.calibration_report`'s dict, to be
    stored as ``info["success_calibration"]`` in the checkpoint.
    """
    rows = data.rows("val")
    scorer = make_scorer(net, SuccessCalibration())  # the raw head
    probs = []
    for i in range(0, len(rows), batch_size):
        idx = rows[i:i + batch_size]
        frames = torch.from_numpy(np.ascontiguousarray(data.frames[idx]))
        with torch.inference_mode():
            probs.append(scorer(frames, [data.instruction] * len(idx), None)[1].float().numpy())
    prob = np.concatenate(probs) if probs else np.zeros(0, np.float32)
    return calibration_report(prob, data.success[rows])


def shift_config(data: FrameDataset, visual: Mapping[str, Any], episodes: int, seed: int,
                 batch_envs: int) -> DataConfig:
    """The simulation of ``data`` (task, env, cameras, size, stride, kinds) under ``visual``.

    The scripted kinds only, in the dataset's proportions (its wander episodes scaled
    from its ``episodes`` to ``episodes``): rollouts of the dataset's given policies
    (``policies`` and the coverage recipe of ``policy_run``) are left out.
    """
    base = DataConfig(**{k: v for k, v in data.meta.get("config", {}).items()
                         if k in DataConfig.__dataclass_fields__})
    wander = round(base.wander_episodes * episodes / max(base.episodes, 1))
    return replace(base, task=data.meta["task"], cameras=data.cameras, width=data.meta["width"],
                   height=data.meta["height"], stride=data.meta["stride"], episodes=episodes,
                   batch_envs=batch_envs, seed=seed, visual=dict(visual), policies=[],
                   policy_run=None, wander_episodes=wander)


def shift_dataset(cfg: DataConfig, folder: Path | None) -> FrameDataset:
    """The episodes of ``cfg``, simulated once.

    Loaded from ``folder`` if simulated there before with the same settings (a setting
    the saved config lacks counts at its default: it was added since, with the behaviour
    before as default) and the same policy checkpoints (a run folder's picks change as it
    trains), none of them written since (a run trained again in the same folder), else
    simulated (and saved there, if given).
    """
    if folder is not None and (folder / "meta.json").is_file():
        data = load_frames(folder)
        rolled = {e["policy"] for e in data.episodes if e["kind"] == "policy"}
        wanted = {s.checkpoint for s in policy_sources(all_policies(cfg))}
        saved = (folder / "meta.json").stat().st_mtime
        older = all(c == "random" or Path(c).stat().st_mtime <= saved for c in wanted)
        same = (asdict(DataConfig(task=cfg.task)) | data.meta.get("config", {})) == asdict(cfg)
        if same and rolled == wanted and older:
            return data
    data = simulate(cfg)
    if folder is not None:
        save_frames(data, folder)
    return data


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write a matplotlib figure as a PNG (folders made) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def shift_suite(model: RewardModel, data: FrameDataset, kinds: Mapping[str, Mapping[str, Any]],
                episodes: int, seed: int, batch_envs: int = 8, cache: str | Path | None = None,
                plot: str | Path | None = None) -> dict[str, Any]:
    """Metrics per kind of visual shift on fresh episodes (see the module doc).

    Args:
        model: Any reward model.
        data: The model's dataset: the shift episodes are simulated like it (task,
            cameras, image size, stride, share of expert / noisy / failed episodes).
        kinds: Name -> visual randomisation settings (``sim.visual.VisualRandomization``);
            ``{"enabled": False}`` is the unshifted reference.
        episodes: Episodes per kind.
        seed: Seed of the episodes (the same physics for every kind).
        batch_envs: Episodes simulated together.
        cache: Folder holding one dataset per kind (``<cache>/<kind>``), reused when its
            settings match, so several models are scored on the same frames.
        plot: Where to write the PNG (metrics per kind and one frame per kind).

    Returns:
        ``{"episodes", "seed", "ranges": kinds, "kinds": {name: {figures}}}`` with the
        figures of :data:`SHIFT_KEYS`, and ``plot`` if written.
    """
    out: dict[str, Any] = {"episodes": episodes, "seed": seed,
                           "ranges": {k: dict(v) for k, v in kinds.items()}, "kinds": {}}
    examples = {}
    for name, visual in kinds.items():
        cfg = shift_config(data, visual, episodes, seed, batch_envs)
        shifted = shift_dataset(cfg, None if cache is None else Path(cache) / name)
        m = evaluate(model, shifted, split=None, max_counterfactual=0)
        out["kinds"][name] = {k: m[k] for k in SHIFT_KEYS}
        last = shifted.episode_rows(None)[0][-1]
        examples[name] = np.asarray(shifted.frames[last])
    if plot is not None:
        out["plot"] = str(plot_shift(out["kinds"], examples, plot))
    return out


def plot_shift(kinds: Mapping[str, Mapping[str, float]], examples: Mapping[str, np.ndarray],
               path: str | Path) -> Path:
    """Bars of success F1 / AUROC and progress Pearson per shift kind, above one frame each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(kinds)
    fig = plt.figure(figsize=(max(6.0, 1.6 * len(names)), 5.6))
    grid = fig.add_gridspec(2, len(names), height_ratios=[2.2, 1.0])
    ax = fig.add_subplot(grid[0, :])
    x = np.arange(len(names))
    for j, (key, label) in enumerate((("success_f1", "success F1"),
                                      ("success_auroc", "success AUROC"),
                                      ("progress_pearson", "progress Pearson"))):
        ax.bar(x + (j - 1) * 0.27, [kinds[n][key] for n in names], width=0.27, label=label)
    ax.axhline(0.85, color="k", linestyle=":", linewidth=1)
    ax.set_xticks(x, names, fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("visual-shift suite (fresh episodes)")
    for k, name in enumerate(names):
        sub = fig.add_subplot(grid[1, k])
        frame = examples[name]
        sub.imshow(np.concatenate(list(frame), axis=1))
        sub.set_axis_off()
    return save_figure(fig, path)


def plot_episodes(preds: list[np.ndarray], trues: list[np.ndarray], meta: list[dict],
                  path: str | Path, per_kind: int = 2) -> Path:
    """Predicted (solid) against simulator progress (dashed) for a few episodes per kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in KINDS if any(m["kind"] == k for m in meta)]
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
    return save_figure(fig, path)


def print_metrics(m: dict[str, Any]) -> None:
    """The metrics of a reward model, one per line."""
    print(f"\nheld-out episodes {m['kinds']}")
    rows = [("VOC (expert)", "voc"), ("VOC reversed", "voc_reversed"),
            ("success F1", "success_f1"), ("success AUROC", "success_auroc"),
            ("success ECE", "success_ece"),
            ("Pearson vs sim", "progress_pearson"), ("Spearman vs sim", "progress_spearman"),
            ("pairwise accuracy", "pairwise_accuracy"),
            ("counterfactual gap", "counterfactual_gap"),
            ("counterfactual AUROC", "counterfactual_auroc")]
    for label, key in rows:
        if key in m:
            print(f"  {label:<22}{m[key]:.3f}")
    if "plot" in m:
        print(f"  plot                  {m['plot']}")
    if "shift" in m:
        print(f"\nvisual-shift suite ({m['shift']['episodes']} fresh episodes per kind)")
        print(f"  {'kind':<18}{'F1':>7}{'AUROC':>8}{'ECE':>7}{'Pearson':>9}")
        for kind, f in m["shift"]["kinds"].items():
            print(f"  {kind:<18}{f['success_f1']:>7.3f}{f['success_auroc']:>8.3f}"
                  f"{f['success_ece']:>7.3f}{f['progress_pearson']:>9.3f}")
        if "plot" in m["shift"]:
            print(f"  plot                  {m['shift']['plot']}")


def policy_state_config(data: FrameDataset, policy: str, stages: int, episodes: int,
                        noise: float, seed: int, expert_episodes: int = 16) -> DataConfig:
    """Fresh rollouts of ``policy``'s checkpoints in the env and look of ``data``.

    ``policy``: a run folder of `embodied train` (``stages`` of its checkpoints, spread
    over training) or a checkpoint file; ``episodes`` per checkpoint with Gaussian action
    noise ``noise``; plus ``expert_episodes`` scripted expert episodes (for reversed clips)
    and no other kind. Frames as the scene is built (no visual randomisation).
    """
    base = shift_config(data, {"enabled": False}, expert_episodes, seed, 16)
    return replace(base, expert_fraction=1.0, noisy_fraction=0.0, wander_episodes=0, policies=[
        {"checkpoint": policy, "stages": stages, "episodes": episodes, "noise": noise}])


def policy_state_metrics(model: RewardModel, data: FrameDataset,
                         paraphrases: list[str]) -> dict[str, Any]:
    """A model on the policy episodes of ``data``: how it holds on the states RL visits.

    Pearson with the simulator's progress (over all states and per policy checkpoint),
    the correlation of the change between consecutive recorded states (what shaping
    pays), mean absolute change of the score under each of ``paraphrases``, the mean
    score of near-miss instructions on states whose true progress is >= 0.5 and, for
    models with temporal context, VOC and mean score of reversed expert episodes (the
    clip's own first frame as start). Every state is scored with its episode's first
    state as start views. Targets (issue): Pearson >= 0.9, step-delta >= 0.6, paraphrase
    change <= 0.1, near miss <= 0.3.
    """
    from embodied.reward.prm.labels import near_miss_instructions
    from embodied.reward.prm.metrics import pearson, voc

    def prog(rows: np.ndarray, text: str, starts: np.ndarray) -> np.ndarray:
        return score_rows(model, data, rows, text, start_rows=starts)[0]

    firsts = np.array([e["start"] for e in data.episodes])[data.episode]
    policy_eps = [e for e in data.episodes if e["kind"] == "policy"]
    rows = data.rows(kinds=("policy",))
    pred = prog(rows, data.instruction, firsts[rows])
    true = data.progress[rows]
    stage = np.concatenate([[e["policy"]] * e["length"] for e in policy_eps])
    cuts = np.cumsum([e["length"] for e in policy_eps])[:-1]
    d_pred = np.concatenate([np.diff(p) for p in np.split(pred, cuts)])
    d_true = np.concatenate([np.diff(t) for t in np.split(true, cuts)])
    far = data.rows()[data.progress[data.rows()] >= 0.5]
    near = {kind: [float(prog(far, text, firsts[far]).mean()) for text in texts]
            for kind, texts in near_miss_instructions(data.instruction).items() if texts}
    para = [float(np.abs(prog(rows, text, firsts[rows]) - pred).mean()) for text in paraphrases]
    out: dict[str, Any] = {
        "context": "start" if getattr(model, "start_context", False) else "none",
        "states": len(rows), "pearson": round(pearson(pred, true), 4),
        "pearson_per_stage": {Path(k).stem: round(pearson(pred[stage == k], true[stage == k]), 4)
                              for k in dict.fromkeys(stage)},
        "step_delta_pearson": round(pearson(d_pred, d_true), 4),
        "mae": round(float(np.abs(pred - true).mean()), 4),
        "paraphrase_abs_change": {t: round(v, 4) for t, v in zip(paraphrases, para, strict=True)},
        "paraphrase_abs_change_mean": round(float(np.mean(para)), 4),
        "near_miss_states": len(far),
        "true_instruction_on_them": round(float(prog(far, data.instruction,
                                                     firsts[far]).mean()), 4),
        "near_miss_mean": {k: round(float(np.mean(v)), 4) for k, v in near.items()},
        "near_miss_max": round(max(max(v) for v in near.values()), 4)}
    if getattr(model, "start_context", False):
        vocs, means = [], []
        for e in data.episodes:
            if e["kind"] != "expert":
                continue
            ep = np.arange(e["start"], e["start"] + e["length"])
            hit = np.flatnonzero(data.success[ep])
            back = (ep[:int(hit[0]) + 1] if len(hit) else ep)[::-1]
            p = prog(back, data.instruction, np.full(len(back), back[0]))
            vocs.append(voc(p))
            means.append(float(p.mean()))
        # a rank statistic: a reversed clip scored near 0 throughout, slightly falling,
        # still has VOC near -1; the mean says how much progress the model sees in it
        out["reversed_voc_with_context"] = round(float(np.mean(vocs)), 4)
        out["reversed_mean_progress_with_context"] = round(float(np.mean(means)), 4)
    out["targets"] = {"pearson>=0.9": out["pearson"] >= 0.9,
                      "step_delta>=0.6": out["step_delta_pearson"] >= 0.6,
                      "paraphrase<=0.1": out["paraphrase_abs_change_mean"] <= 0.1,
                      "near_miss<=0.3": out["near_miss_max"] <= 0.3}
    return out
