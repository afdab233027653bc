"""bench/reward_rl.py --reuse-runs reads back only runs trained with the settings asked for."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.reward_model import same_settings
from embodied.config import load_config

ARGS = ["task=panda_reach", "reward=prm", "algo.value_clip=0.2", "seed=1"]


def saved_run(folder: Path, args: list[str]) -> Path:
    """A run folder whose config.yaml is that of `embodied train` with ``args``."""
    folder.mkdir(parents=True)
    OmegaConf.save(load_config("train", [*args, f"run_dir={folder}"]), folder / "config.yaml")
    return folder


def test_only_runs_of_the_same_settings_are_reused(tmp_path, capsys):
    run = saved_run(tmp_path / "prm_shaped_seed1", ARGS)
    # the run folder differs (a screen copied into the benchmark's folder): still the same run
    assert same_settings(run, load_config("train", [*ARGS, "run_dir=elsewhere"]))
    for other in ("algo.value_clip=null", "reward.shaping_target=advantage",
                  "reward.loop.refresh.every=4", "seed=2"):
        assert not same_settings(run, load_config("train", [*ARGS, other])), other
    assert "training it again" in capsys.readouterr().out


def test_shift_arms_not_rerun_are_kept_with_the_date_they_ran(tmp_path, monkeypatch):
    import json

    import bench.reward_model as rm

    monkeypatch.setattr(rm, "RESULTS", tmp_path)
    old = {"visual_shift_panda_push": {"date": "d0", "policy_data": {"run": "r"},
                                       "randomised": {"shift": 1}, "plain": {"shift": 2},
                                       "randomised_policies": {"shift": 3, "ran": "d-1"}},
           "policy_states_panda_push": {"date": "d0", "policy": "run_a",
                                        "arms": {"plain": {"pearson": 0.8}}}}
    (tmp_path / "reward_model.json").write_text(json.dumps(old))
    shift = rm.with_kept_arms("visual_shift_panda_push", {"coverage": {"shift": 4},
                                                          "plain": {"shift": 5}}, quick=False)
    assert shift == {"coverage": {"shift": 4}, "plain": {"shift": 5},  # rerun: the new one
                     "randomised": {"shift": 1, "ran": "d0"},
                     "randomised_policies": {"shift": 3, "ran": "d-1"},
                     "policy_data": {"run": "r"}}
    states = rm.with_kept_arms("policy_states_panda_push",
                               {"policy": "run_a", "arms": {"coverage": {}}}, False)
    assert states["arms"] == {"coverage": {}, "plain": {"pearson": 0.8, "ran": "d0"}}
    # rollouts of another policy: the file's arms scored other states, none is kept
    other = rm.with_kept_arms("policy_states_panda_push",
                              {"policy": "run_b", "arms": {"coverage": {}}}, False)
    assert other["arms"] == {"coverage": {}}
    assert rm.with_kept_arms("visual_shift_panda_reach", {"plain": {}}, False) == {"plain": {}}


def test_a_merged_file_says_where_each_section_ran(tmp_path, monkeypatch):
    import json

    import bench.common as common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    amd = {"cores": 2, "cpu": "AMD EPYC"}
    old = {"benchmark": "reward_rl", "machine": amd, "command": "python bench/reward_rl.py",
           "date": "d1", "panda_push": {"date": "d0", "arms": {}},
           "panda_reach": {"date": "d1", "arms": {"sparse": {}}},
           "moved": {"date": "d0", "machine": {"cpu": "other"}}, "targets": {"a": True}}
    (tmp_path / "reward_rl.json").write_text(json.dumps(old))
    monkeypatch.setattr(common, "machine", lambda: {"cores": 2, "cpu": "Intel Xeon"})
    monkeypatch.setattr(sys, "argv", ["bench/reward_rl.py", "--task", "panda_reach"])
    merged = common.merge_sections("reward_rl", False, {"panda_reach": {"date": "d2"}},
                                   ["panda_reach"])
    assert merged["panda_reach"] == {"date": "d2", "machine": {"cores": 2, "cpu": "Intel Xeon"},
                                     "command": f"{Path(sys.executable).name} "
                                                "bench/reward_rl.py --task panda_reach"}
    # kept: the machine of the file it came from, never a command it may not have run with
    assert merged["panda_push"] == {"date": "d0", "arms": {}, "machine": amd}
    assert merged["moved"] == {"date": "d0", "machine": {"cpu": "other"}}  # its own stays
    assert merged["targets"] == {"a": True}  # not a dated section: untouched
    assert "machine" not in merged and "command" not in merged  # the file's: write_result's


def test_a_cached_prm_built_with_other_settings_is_built_again(tmp_path, monkeypatch, capsys):
    import bench.reward_model as rm

    run_dir = tmp_path / "prm_coverage" / "panda_reach"
    built = rm.prm_overrides("panda_reach", False, run_dir, ("data.policy_run=dense",))
    run_dir.mkdir(parents=True)
    OmegaConf.save(load_config("reward_train", [*built, "data.path=somewhere"]),
                   run_dir / "config.yaml")
    (run_dir / "metrics.json").write_text("{}")
    (run_dir / "data").mkdir()
    (run_dir / "data" / "meta.json").write_text("{}")
    calls = []
    monkeypatch.setattr("embodied.commands.reward_train.run_reward_train",
                        lambda cfg: calls.append(cfg))
    monkeypatch.setattr(rm, "reused_prm", lambda folder: {"run_dir": str(folder)})

    def build(*extra: str) -> list:
        calls.clear()
        rm.train_prm("panda_reach", False, reuse=True, run_dir=run_dir,
                     extra=("data.policy_run=dense", *extra))
        return calls

    assert rm.changed_settings(run_dir, built) == []  # where its frames were read from: no
    assert build() == []  # today's settings: read back
    # another model: trained again on the frames it kept
    (cfg,) = build("model.dim=64")
    assert cfg.model.dim == 64 and cfg.data.path == str(run_dir / "data")
    assert "built with other model settings" in capsys.readouterr().out
    # other data: simulated again
    (cfg,) = build("data.episodes=80")
    assert cfg.data.path is None and cfg.data.episodes == 80
    assert rm.changed_settings(run_dir, rm.prm_overrides(
        "panda_reach", False, run_dir, ("data.policy_run=dense", "train.epochs=9"))) == ["train"]
    # a setting added since the PRM was built: at its default, the copy still holds
    saved = OmegaConf.load(run_dir / "config.yaml")
    del saved.train["brightness"]
    OmegaConf.save(saved, run_dir / "config.yaml")
    assert rm.changed_settings(run_dir, built) == []
    assert rm.changed_settings(run_dir, rm.prm_overrides(
        "panda_reach", False, run_dir, ("data.policy_run=dense", "train.brightness=[0.5,2]"))
    ) == ["train"]
