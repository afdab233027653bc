"""The deployment core (robot spec, action map, kinematics, observation terms, policy
loader) imports neither MuJoCo nor the simulator nor the training stack."""

from __future__ import annotations

import os
import subprocess
import sys

HEAVY = ("mujoco", "sim", "hydra", "omegaconf", "stable_baselines3", "transformers",
         "gymnasium", "embodied.rl", "embodied.reward", "embodied.datasets", "embodied.export")

PROBE = """
import sys
import embodied.policy_io, robots, robots.actions, robots.kinematics
import robots.go2.observation, robots.panda.observation
from robots import load_robot
from robots.kinematics import SiteKinematics
for name in ("panda", "go2"):
    load_robot(name)
SiteKinematics.from_robot(load_robot("panda"), "ee")
heavy = {heavy!r}
print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)))
"""


def test_deployment_core_imports_nothing_heavy():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"
