"""The `visual` config group reaches the env, and bad settings get one clear error line."""

from __future__ import annotations

from embodied.cli import main
from embodied.config import load_config
from embodied.envs import visual_kwargs


def test_visual_group_defaults_per_command():
    assert visual_kwargs(load_config("reward_train", []))["visual"].enabled
    assert not visual_kwargs(load_config("collect", []))["visual"].enabled
    on = visual_kwargs(load_config("collect", ["visual.enabled=true"]))["visual"]
    assert on.enabled and on.light_intensity == (0.5, 1.5)
    assert load_config("reward_train", ["visual=none"]).data.visual["enabled"] is False


def test_bad_visual_settings_are_one_error_line(tmp_path, capsys):
    assert main(["collect", "task=panda_reach", "episodes=1", "visual.light_intensity=[2,1]",
                 f"out={tmp_path / 'd'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: visual.light_intensity") and "Traceback" not in err
