#!/usr/bin/env bash
# Creates the side environment a peer comparison needs, beside the project's .venv:
#   scripts/peer_env.sh d3rlpy    -> .venv-d3rlpy  (bench/offline.py --d3rlpy-python .venv-d3rlpy/bin/python)
#   scripts/peer_env.sh lerobot   -> .venv-lerobot (.venv-lerobot/bin/python scripts/check_lerobot_reader.py DATASET)
# Peers pin their own torch/numpy versions, so they never share the project's environment.
set -euo pipefail
cd "$(dirname "$0")/.."

name=${1:-}
case "$name" in
    d3rlpy) packages=("torch==2.13.0" "d3rlpy==2.8.1") ;;
    lerobot) packages=("lerobot>=0.4" "av") ;;  # LeRobot pins its own torch (2.10)
    *) echo "usage: scripts/peer_env.sh d3rlpy|lerobot" >&2; exit 2 ;;
esac
PY=${PYTHON:-python3.11}
venv=.venv-$name
[ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
echo "[peer_env] installing ${packages[*]} into $venv (log: $venv/install.log)"
{
    "$venv/bin/python" -m pip install --upgrade pip &&
    "$venv/bin/python" -m pip install "${packages[@]}"
} >"$venv/install.log" 2>&1 || { tail -n 30 "$venv/install.log"; exit 1; }
echo "[peer_env] ready: $venv/bin/python"
