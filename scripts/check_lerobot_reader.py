"""Open a dataset with LeRobot's own reader and compare its frames with ours.

Run it with the Python of an environment where ``lerobot`` (>= 0.4, the v3.0 format)
is installed; it pins its own torch, so keep it apart from the project's venv. From
the repository root::

    <lerobot env>/bin/python scripts/check_lerobot_reader.py DATASET [--stride 25]

Every ``stride``-th frame is read by both readers: every numeric column must be
equal and every camera view must decode to the same pixels. Exit status 1 on any
difference. Video decoding uses PyAV (``video_backend="pyav"``): torchcodec needs
FFmpeg's shared libraries on the system.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--stride", type=int, default=25)
    args = parser.parse_args()

    from lerobot.datasets.lerobot_dataset import LeRobotDataset as TheirDataset

    from embodied.datasets import LeRobotDataset

    theirs = TheirDataset("local/check", root=args.dataset, video_backend="pyav")
    ours = LeRobotDataset(args.dataset)
    assert theirs.num_frames == ours.num_frames and theirs.num_episodes == ours.num_episodes
    worst, checked = 0.0, 0
    for ep in range(ours.num_episodes):
        data, views = ours.episode_data(ep), ours.episode_views(ep)
        start = int(data["index"][0])
        for t in range(0, len(data["index"]), args.stride):
            item = theirs[start + t]
            for key, value in data.items():
                if key in item and not np.allclose(np.asarray(item[key]), value[t]):
                    print(f"episode {ep} frame {t}: '{key}' differs: {item[key]} vs {value[t]}")
                    return 1
            for j, camera in enumerate(ours.cameras):
                image = np.asarray(item[f"observation.images.{camera}"])  # [3, H, W] in [0, 1]
                diff = np.abs(np.round(image.transpose(1, 2, 0) * 255) - views[t, j]).max()
                worst = max(worst, float(diff))
            checked += 1
    print(f"{checked} frames of {ours.num_episodes} episodes read by lerobot "
          f"{__import__('lerobot').__version__} and by embodied.datasets: columns equal, "
          f"largest pixel difference {worst:g} (of 255)")
    return 0 if worst <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
