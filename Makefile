# The two commands of the README. Both (re)create .venv as needed.
.PHONY: demo test lint bench-quick

demo:
	@scripts/bootstrap.sh
	@.venv/bin/embodied demo

test:
	@scripts/bootstrap.sh
	@.venv/bin/python -m ruff check .
	@MUJOCO_GL=$${MUJOCO_GL:-egl} .venv/bin/python -m pytest -q

bench-quick:
	@scripts/bootstrap.sh
	@for b in bench/*.py; do .venv/bin/python $$b --quick || exit 1; done
