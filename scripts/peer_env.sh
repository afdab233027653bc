#!/usr/bin/env bash
# Creates the side environment a peer comparison needs, beside the project's .venv:
#   scripts/peer_env.sh d3rlpy    -> .venv-d3rlpy  (bench/offline.py --d3rlpy-python .venv-d3rlpy/bin/python)
#   scripts/peer_env.sh lerobot   -> .venv-lerobot (.venv-lerobot/bin/python scripts/check_lerobot_reader.py DATASET)
#   scripts/peer_env.sh rsl_rl    -> .venv-rsl_rl  (bench/ppo.py runs bench/peers/rsl_rl_adapter.py in it)
# Peers pin their own torch/numpy versions, so they never share the project's environment.
set -euo pipefail
cd "$(dirname "$0")/.."

name=${1:-}
case "$name" in
    d3rlpy) packages=("torch==2.13.0" "d3rlpy==2.8.1") ;;
    # LeRobot pins its own torch (2.10); our reader, which the check compares, needs MuJoCo
    # through sim (the video helpers)
    lerobot) packages=("lerobot>=0.4" "av" "mujoco>=4.0,<4.1") ;;
    # rsl_rl steps our batched env, so the project is installed there too (editable: this
    # source tree, with its torch pin, which rsl-rl-lib 5.5 and tensordict 0.15 accept).
    rsl_rl) packages=("torch==2.13.0" "-e" "." "rsl-rl-lib==5.5.1" "tensordict==0.15.3") ;;
    *) echo "usage: scripts/peer_env.sh d3rlpy|lerobot|rsl_rl" >&2; exit 2 ;;
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
