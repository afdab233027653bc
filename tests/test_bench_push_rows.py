"""bench/ppo.py's panda_push section: a run of some action spaces keeps the rows of the
others in the result file (another space's table is not lost by a partial rerun)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import common
import ppo


def test_push_section_keeps_the_rows_of_the_spaces_it_does_not_rerun(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(ppo, "RESULTS", tmp_path)
    earlier = {"mean_final_success": 0.5, "seeds": [0]}
    path = tmp_path / "ppo.quick.json"
    path.write_text(json.dumps({"panda_push": {"action_spaces": {"joint_delta": earlier}}}))
    settings = {**ppo.QUICK, "push_action_spaces": ["ee_delta"]}  # one second of training
    section = ppo.panda_push(True, settings)
    assert section["action_spaces"]["joint_delta"] == earlier
    assert section["action_spaces"]["ee_delta"]["seeds"] == [0]
    on_disk = json.loads(path.read_text())["panda_push"]["action_spaces"]
    assert on_disk["joint_delta"] == earlier and "ee_delta" in on_disk
