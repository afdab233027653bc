"""A goal image for the GRM: the task's scripted expert run to success, its cameras rendered.

The Robo-Dopamine GRM anchors every judgement on a completed-task image (``reward.goal``).
For a simulated task, ``render_goal`` steps the task's expert in ``num_envs`` envs until
one succeeds and saves that env's views as uint8 [V, H, W, 3] in a ``.npy`` file (all
views: the GRM's backward estimate uses them as the BEFORE state).

    python -m embodied.reward.vlm.goal panda_push runs/goals/panda_push.npy --size 64
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def render_goal(task: str, path: str | Path, *, cameras: Sequence[str] | None = None,
                size: int = 64, num_envs: int = 8, max_steps: int = 1000,
                seed: int = 0) -> Path:
    """Write the views of the first env the expert brings to success (module docstring).

    Raises RuntimeError if no env succeeds within ``max_steps`` env steps.
    """
    import sim
    from sim.experts import make_expert

    env = sim.make_env(task, num_envs=num_envs, seed=seed)
    try:
        env.reset(seed=seed)
        expert = make_expert(env)
        for _ in range(max_steps):
            env.step(expert())
            done = env.task.success().nonzero().flatten()
            if len(done):
                env_id = done[:1]
                frames = env.render(cameras, env_ids=env_id, width=size, height=size)
                break
        else:
            raise RuntimeError(f"the {task} expert did not succeed in {num_envs} envs within "
                               f"{max_steps} steps; pass a goal image of your own")
    finally:
        env.close()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.asarray(frames[0].cpu().numpy(), np.uint8))
    return path


def main(argv: list[str] | None = None) -> None:
    """Command line: render ``task``'s goal image into ``out`` and print its path."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="a registered task, e.g. panda_push")
    parser.add_argument("out", type=Path, help="the .npy file to write")
    parser.add_argument("--size", type=int, default=64, help="image height and width")
    parser.add_argument("--cameras", nargs="*", default=None, help="views (default: all)")
    args = parser.parse_args(argv)
    print(render_goal(args.task, args.out, cameras=args.cameras, size=args.size))


if __name__ == "__main__":
    main()


__all__ = ["main", "render_goal"]
