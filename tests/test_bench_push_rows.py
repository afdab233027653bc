"""bench/ppo.py's panda_push rows are independent: a run starts from the rows of the last
result file (so it replaces only the action spaces it trains), and a row written before
rows carried their own date gets its section's date."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import ppo


def test_previous_push_rows_keeps_every_row_and_its_own_date(tmp_path, monkeypatch):
    section = {"date": "2026-01-02 03:04:05", "action_spaces": {
        "ee_delta": {"seeds": [0, 1, 2], "mean_final_success": 0.47},
        "joint_delta": {"seeds": [0], "mean_final_success": 0.1,
                        "date": "2026-02-03 04:05:06"}}}
    (tmp_path / "ppo.json").write_text(json.dumps({"panda_push": section, "other": {}}))
    monkeypatch.setattr(ppo, "RESULTS", tmp_path)
    rows = ppo._previous_push_rows(quick=False)
    assert rows == {
        "ee_delta": {"seeds": [0, 1, 2], "mean_final_success": 0.47,
                     "date": "2026-01-02 03:04:05"},
        "joint_delta": {"seeds": [0], "mean_final_success": 0.1,
                        "date": "2026-02-03 04:05:06"}}
    assert ppo._previous_push_rows(quick=True) == {}  # no quick result file: no rows
