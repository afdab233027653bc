"""A regular (non-editable) install runs: configs and robot files ship inside the package.

The package is built from a copy of the source and installed with
``pip install --no-deps --target``; `embodied train` then runs from a folder
outside the source tree with only the installed copy of embodied, sim and robots
importable (``python -S``: no site-packages path hooks such as an editable install).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "embodied", "sim", "robots")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A folder holding the installed packages (and bin/embodied)."""
    pytest.importorskip("setuptools", reason="the build backend (no build isolation: offline)")
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:  # a copy: the build writes build/ and *.egg-info next to the sources
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, src / name)
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "--target", str(target), str(src)],
                   check=True, capture_output=True, timeout=300)
    return target


def test_installed_train_leaves_a_run_folder(installed, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(installed), sysconfig.get_paths()["purelib"]]),
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    env.pop("EMBODIED_CONFIGS", None)
    where = subprocess.run(
        [sys.executable, "-S", "-c", "import embodied, robots, sim; print(embodied.__file__, "
         "robots.__file__, sim.__file__)"], env=env, cwd=tmp_path, capture_output=True,
        text=True, check=True).stdout.split()
    assert all(Path(p).is_relative_to(installed) for p in where), where
    assert (installed / "bin" / "embodied").is_file()
    out = subprocess.run(
        [sys.executable, "-S", "-m", "embodied.cli", "train", "task=panda_reach",
         "max_iterations=2", "num_envs=16", "eval.num_envs=2", "eval.video_envs=0",
         "progress=false"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    runs = list((tmp_path / "runs" / "train" / "panda_reach").iterdir())
    assert len(runs) == 1
    for name in ("config.yaml", "metrics.csv", "summary.json", "checkpoints/model_000002.pt"):
        assert (runs[0] / name).is_file(), name
    assert f"run folder          {runs[0].relative_to(tmp_path)}" in out.stdout
