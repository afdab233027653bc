"""Dataset video codecs: encode frames/s and bytes per frame of each, on rendered frames.

One ``panda_push`` scripted-expert episode is rendered from every camera at each size;
each camera's frames are then encoded as one file with every codec the installed
FFmpeg has (the settings of :mod:`sim.video`), timed by the wall clock (the encoders
run their own threads), and decoded back for the mean absolute pixel error (of 255).
Prints a Markdown table and the JSON; the numbers are kept in the dated experiment
note, not in ``bench/results`` (no report table).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from embodied.datasets.video import decode
from sim import make_env
from sim.experts import make_expert
from sim.video import CODECS, Mp4Encoder, pick_encoder


def render_episode(size: int, steps: int) -> np.ndarray:
    """Frames uint8 [V, T, H, W, 3] of one expert episode, every camera."""
    env = make_env("panda_push", num_envs=1)
    env.reset(seed=0)
    expert = make_expert(env, seed=0)
    frames = []
    for _ in range(steps):
        frames.append(env.render(width=size, height=size)[0].numpy())
        env.step(expert())
    env.close()
    return np.stack(frames, 1)


def encode(frames: np.ndarray, codec: str, path: Path) -> tuple[float, int]:
    """(frames/s, bytes) of encoding ``frames`` [T, H, W, 3] at 50 fps with ``codec``."""
    start = time.perf_counter()
    encoder = Mp4Encoder(path, 50, frames.shape[2], frames.shape[1], [codec])
    for frame in frames:
        encoder.write(frame)
    encoder.close()
    return len(frames) / (time.perf_counter() - start), path.stat().st_size


def main() -> None:
    """Measure every codec at every size; print the table and the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (< 1 minute)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes, steps = ((64,), 50) if args.quick else ((64, 96, 128, 224), 250)
    codecs = [c for c in CODECS if pick_encoder([c, "mpeg4"])[0] == c]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            views = render_episode(size, steps)
            for codec in codecs:
                speeds, sizes_b, errors = [], [], []
                for v, frames in enumerate(views):
                    path = Path(tmp) / f"{codec}_{size}_{v}.mp4"
                    speed, nbytes = encode(frames, codec, path)
                    speeds.append(speed)
                    sizes_b.append(nbytes)
                    errors.append(np.abs(decode(path).astype(int) - frames).mean())
                rows.append({"size": size, "codec": codec, "frames": int(views.shape[1]),
                             "views": len(views), "encode_frames_per_s": round(np.mean(speeds)),
                             "bytes_per_frame": round(sum(sizes_b) / views[:, :, 0, 0, 0].size),
                             "mean_abs_error": round(float(np.mean(errors)), 2)})
                print(f"| {size}x{size} | {codec} | {rows[-1]['encode_frames_per_s']} | "
                      f"{rows[-1]['bytes_per_frame']} | {rows[-1]['mean_abs_error']} |",
                      flush=True)
    print(json.dumps({"benchmark": "video_codecs", "quick": args.quick, "rows": rows}))


if __name__ == "__main__":
    main()
