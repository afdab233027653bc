"""The benchmark convention: --quick, JSON in bench/results/, the same JSON printed last."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def parser(description: str, sections: list[str] | None = None) -> argparse.ArgumentParser:
    """The standard benchmark arguments (see :func:`parse_args`), for a benchmark that adds
    its own before parsing."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="smoke run (< 1 minute)")
    if sections:
        p.add_argument("--only", action="append", choices=sections, default=None,
                       help="run only this section and merge it into the existing JSON")
    return p


def parse_args(description: str, sections: list[str] | None = None) -> argparse.Namespace:
    """Standard benchmark arguments: ``--quick`` for a smoke run under a minute.

    With ``sections``, ``--only NAME`` (repeatable) reruns just those sections; the
    benchmark then merges them into its existing result file (:func:`merge_sections`).
    """
    return parser(description, sections).parse_args()


def merge_sections(name: str, quick: bool, figures: dict, sections: list[str]) -> dict:
    """``figures`` of a partial run with the other sections kept from the last result file.

    Each section records its own ``date``, so a merged file says when each part ran. A
    section that does (a dict with a ``date``) also records where: ``sections`` this run's
    ``machine`` and ``command``, a kept section without its own the ``machine`` of the
    file it comes from (learning results differ between CPUs, so a merged file must say
    where each part ran).
    """
    path = RESULTS / f"{name}{'.quick' if quick else ''}.json"
    if not path.exists():
        return figures
    previous = json.loads(path.read_text())
    merged = {key: _where(value, {"machine": previous.get("machine")}) for key, value
              in previous.items()
              if key not in ("benchmark", "quick", "machine", "command", "date")}
    merged.update({key: value for key, value in figures.items() if key not in sections})
    here = {"machine": machine(), "command": command_line()}
    merged.update({key: _where(figures[key], here) for key in sections if key in figures})
    return merged


def _where(section: Any, run: dict) -> Any:
    """``section`` with ``run``'s machine and command if it is a dated section without them."""
    if not isinstance(section, dict) or "date" not in section or "machine" in section:
        return section
    return {**{k: v for k, v in run.items() if v is not None}, **section}


def kept_arms(earlier: dict, rerun: Iterable[str], date: str | None) -> dict:
    """The arms of ``earlier`` (name -> figures) not in ``rerun``, kept in a partial rerun.

    Each carries ``ran``: the date of the run that measured it (its own if it has one,
    else ``date``, the earlier section's).
    """
    return {name: {**arm, "ran": arm.get("ran", date)} for name, arm in earlier.items()
            if name not in rerun}


def machine() -> dict:
    """Cores, CPU model and library versions of this run."""
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for pkg in ("mujoco", "torch", "numpy", "gymnasium", "stable-baselines3"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[pkg] = metadata.version(pkg)
    return {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "versions": versions}


def command_line() -> str:
    """This run's command line, as the result files record it."""
    return " ".join([Path(sys.executable).name, *sys.argv])


def write_result(name: str, quick: bool, figures: dict, echo: bool = True) -> dict:
    """Write bench/results/<name>[.quick].json and (``echo``) print it as the last line."""
    result = {"benchmark": name, "quick": quick, **figures, "machine": machine(),
              "command": command_line(),
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}{'.quick' if quick else ''}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    if echo:
        print(json.dumps(result))
    return result


def rate(fn, units_per_call: int, min_seconds: float, warmup: int = 2) -> float:
    """Units per second of ``fn`` called repeatedly for at least ``min_seconds``."""
    for _ in range(warmup):
        fn()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return calls * units_per_call / elapsed
