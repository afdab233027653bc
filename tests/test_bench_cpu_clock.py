"""bench/ppo.py's CPU clock: it counts only the wrapped calls, and a contender's CPU
seconds to 95% are those at its first evaluation at or above 95%."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from ppo import CpuClock


def _burn(n: int) -> int:
    return sum(i * i for i in range(n))


def test_cpu_clock_counts_the_wrapped_calls_and_picks_the_first_success():
    clock = CpuClock()
    timed = clock.timed(_burn)
    _burn(300_000)  # not wrapped: not counted
    assert clock.seconds == 0.0
    curve = []
    for i, success in enumerate((0.5, 0.96, 0.97)):
        assert timed(200_000) == _burn(200_000)
        clock.mark()
        curve.append((float(i), 1000 * (i + 1), success))
    assert clock.seconds > 0 and clock.curve == sorted(clock.curve)
    assert len(set(clock.curve)) == 3  # every evaluation saw more CPU time
    result = clock.result(curve)
    assert result["cpu_s_to_95"] == pytest.approx(round(clock.curve[1], 2))
    assert result["train_cpu_s"] == pytest.approx(round(clock.seconds, 2))
    assert len(clock.loads) == 3 and result["load_avg_mean"] is not None
    assert clock.result([(0.0, 1000, 0.5), (1.0, 2000, 0.9), (2.0, 3000, 0.94)])[
        "cpu_s_to_95"] is None
