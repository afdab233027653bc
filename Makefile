# The two commands of the README. Both (re)create .venv as needed.
.PHONY: train demo test bench-quick isaaclab-env

# The main job: PPO on panda_reach on the CPU (C MuJoCo), ~2 min on 2 cores.
train:
	@scripts/bootstrap.sh
	@.venv/bin/embodied train task=panda_reach

# Scripted-expert rollouts of panda_pick_place to an MP4 (all camera views).
demo:
	@scripts/bootstrap.sh
	@.venv/bin/embodied demo

# Also sets up .venv-isaaclab (sim=isaaclab, Python 3.12): without it the Isaac Lab tests skip.
test:
	@scripts/bootstrap.sh
	@scripts/isaaclab_env.sh || echo "[test] no Isaac Lab environment (see above): its tests skip"
	@.venv/bin/python -m ruff check .
	@.venv/bin/python -m mypy
	@MUJOCO_GL=$${MUJOCO_GL:-egl} .venv/bin/python -m pytest -q

bench-quick:
	@scripts/bootstrap.sh
	@for b in bench/*.py; do .venv/bin/python $$b --quick || exit 1; done

# The Isaac Lab 3 environment of sim=isaaclab (.venv-isaaclab: Python 3.12, ~8 GB, a few minutes).
isaaclab-env:
	@scripts/isaaclab_env.sh
