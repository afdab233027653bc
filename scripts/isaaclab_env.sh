#!/usr/bin/env bash
# Creates .venv-isaaclab, the Python 3.12 environment of the Isaac Lab 3 backend (sim=isaaclab).
# Isaac Lab 3.0 requires Python >= 3.12 and pins its own torch (2.11), warp, newton and mujoco,
# so it never shares the project's .venv: the backend runs in a worker process started from
# .venv-isaaclab/bin/python and talks to the main process over a socket pair (sim/backends/isaaclab.py).
# Installs: isaaclab==3.0.0 (kit-less: Newton physics, no Isaac Sim), mujoco-usd-converter (MJCF -> USD,
# offline), pyyaml, and the project's robots/sim packages on the path (a .pth file, no copy).
# Idempotent: a stamp file records what was installed; a second run only checks. Log: .venv-isaaclab/install.log
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-isaaclab
packages=("isaaclab==3.0.0" "mujoco-usd-converter" "pyyaml")
stamp="$venv/.installed-$(printf '%s\n' "${packages[@]}" "$(cat "$0")" | sha1sum | cut -c1-12)"

if [ -f "$stamp" ]; then
    echo "[isaaclab_env] up to date: $venv/bin/python"
    exit 0
fi

# Python 3.12: $PYTHON, python3.12 on PATH, or a pyenv-installed 3.12.
find_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    if python3.12 --version >/dev/null 2>&1; then command -v python3.12; return; fi
    if command -v pyenv >/dev/null 2>&1; then
        local p
        for p in "$(pyenv root)"/versions/3.12*/bin/python3.12; do
            [ -x "$p" ] && { echo "$p"; return; }
        done
    fi
    return 1
}
PY=$(find_python) || {
    echo "[isaaclab_env] Python 3.12 not found: install it (e.g. 'pyenv install 3.12') or set PYTHON=/path/to/python3.12" >&2
    exit 1
}

[ -x "$venv/bin/python" ] || { echo "[isaaclab_env] creating $venv with $PY"; "$PY" -m venv "$venv"; }
log=$venv/install.log
echo "[isaaclab_env] installing ${packages[*]} into $venv (several minutes, ~8 GB; log: $log)"
start=$(date +%s)
{
    "$venv/bin/python" -m pip install --upgrade pip &&
    "$venv/bin/python" -m pip install "${packages[@]}"
} >"$log" 2>&1 || { tail -n 30 "$log"; echo "[isaaclab_env] pip failed: see $log" >&2; exit 1; }

# The project's packages (robots, sim) import from the source tree, like an editable install without
# the project's own dependencies (those of .venv would pull a second torch).
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$(pwd)" >"$site/embodied_project.pth"
"$venv/bin/python" -c 'import isaaclab, mujoco_usd_converter, torch, mujoco, robots, sim; print("[isaaclab_env] isaaclab", isaaclab.__version__ if hasattr(isaaclab, "__version__") else "?", "torch", torch.__version__, "mujoco", mujoco.__version__)' \
    || { echo "[isaaclab_env] the environment does not import: see above" >&2; exit 1; }
rm -f "$venv"/.installed-*
touch "$stamp"
echo "[isaaclab_env] ready in $(( $(date +%s) - start )) s: $venv/bin/python"
