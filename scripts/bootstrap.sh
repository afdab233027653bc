#!/usr/bin/env bash
# Creates or refreshes .venv and the system libraries rendering needs.
# Idempotent: a second run with an unchanged pyproject.toml does nothing but checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
for pkg in libegl1 libosmesa6 libgl1; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if ((${#need_pkgs[@]})); then
    echo "[bootstrap] installing system packages: ${need_pkgs[*]}"
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

PY=${PYTHON:-python3.11}
if [ ! -x .venv/bin/python ]; then
    echo "[bootstrap] creating .venv with $PY"
    "$PY" -m venv .venv
fi

extras=${EMBODIED_EXTRAS:-dev,vlm,ros,gpu}
# The ROS 2 bridge (ament_python package, ros_ws/src/embodied_ros) goes into the venv too
# when the ros extra (the rclpy wheels) is installed.
ros_pkg=ros_ws/src/embodied_ros
stamp=.venv/.installed-$(cat pyproject.toml "$ros_pkg/setup.py" | sha1sum | cut -c1-12)-${extras//,/_}
if [ ! -f "$stamp" ]; then
    echo "[bootstrap] installing the project into .venv (extras: $extras; log: .venv/install.log)"
    log=.venv/install.log
    {
        .venv/bin/python -m pip install --upgrade pip &&
        # torch first and pinned, so no dependency can pull a CUDA build.
        .venv/bin/python -m pip install "torch==2.13.0" &&
        .venv/bin/python -m pip install -e ".[$extras]" &&
        if [[ ",$extras," == *",ros,"* ]]; then
            .venv/bin/python -m pip install --no-deps -e "$ros_pkg"
        fi
    } >"$log" 2>&1 || { tail -n 40 "$log"; echo "[bootstrap] pip failed: see $log" >&2; exit 1; }
    rm -f .venv/.installed-*
    touch "$stamp"
fi
