"""Feature statistics as LeRobot stores them: min, max, mean, std, count per feature.

Per-episode statistics are computed once (when an episode is written or labelled)
and aggregated exactly into the dataset's ``meta/stats.json`` with the parallel
mean/variance formula. Images are summarised per channel in [0, 1], shape
``[3, 1, 1]``, from every ``image_stride``-th frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

Stats = dict[str, np.ndarray]


def array_stats(values: np.ndarray) -> Stats:
    """Statistics over the first axis of ``values`` [N, ...] (booleans count as 0/1)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    return {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0),
            "count": np.array([len(x)])}


def image_stats(frames: np.ndarray, stride: int = 10) -> Stats:
    """Per-channel statistics [3, 1, 1] of uint8 frames [T, H, W, 3], scaled to [0, 1]."""
    sample = frames[::max(1, stride)].astype(np.float64) / 255.0
    pixels = sample.reshape(-1, 3)
    out = array_stats(pixels)
    for key in ("min", "max", "mean", "std"):
        out[key] = out[key].reshape(3, 1, 1)
    out["count"] = np.array([len(sample)])
    return out


def aggregate(parts: Iterable[Mapping[str, np.ndarray]]) -> Stats:
    """Exact statistics of the union of the parts (each with min/max/mean/std/count)."""
    parts = list(parts)
    if not parts:
        raise ValueError("no statistics to aggregate")
    counts = np.array([float(p["count"][0]) for p in parts])
    total = counts.sum()
    weights = (counts / total).reshape(-1, *([1] * np.ndim(parts[0]["mean"])))
    means = np.stack([np.asarray(p["mean"], dtype=np.float64) for p in parts])
    mean = (weights * means).sum(0)
    second = (weights * (np.stack([np.asarray(p["std"], np.float64) for p in parts]) ** 2
                         + (means - mean) ** 2)).sum(0)
    return {"min": np.min(np.stack([p["min"] for p in parts]), 0),
            "max": np.max(np.stack([p["max"] for p in parts]), 0),
            "mean": mean, "std": np.sqrt(np.maximum(second, 0.0)),
            "count": np.array([int(total)])}


def to_json(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict:
    """Statistics as JSON-ready nested lists."""
    return {key: {name: np.asarray(v).tolist() for name, v in s.items()}
            for key, s in stats.items()}


def from_json(data: Mapping[str, Mapping[str, list]]) -> dict[str, Stats]:
    """Statistics read from ``stats.json`` as numpy arrays."""
    return {key: {name: np.asarray(v) for name, v in s.items()} for key, s in data.items()}
