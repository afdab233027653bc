"""Task term settings as Hydra overrides: `task.rewards.<term>.weight=...` reaches the env;
the task YAMLs list every term with its default; a bad term name is one error line."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from embodied.cli import main
from embodied.config import load_config
from embodied.envs import env_kwargs
from sim import make_env
from sim.tasks import get_task, task_names


@pytest.mark.parametrize("task", task_names())
def test_task_yaml_lists_every_term_with_its_default(task):
    cfg = load_config("demo", [f"task={task}"])  # the task yaml, no learner's task variant
    listed = OmegaConf.to_container(cfg.task)
    default = dataclasses.asdict(get_task(task).default_config())
    assert listed["rewards"] == default["rewards"]
    assert list(listed["rewards"]) == list(default["rewards"])  # the summation order
    assert listed["observations"] == default["observations"]
    assert set(listed.get("settings") or {}) == set(default["settings"])


def test_a_reward_override_reaches_the_env_and_the_resolved_config():
    cfg = load_config("train", ["task=panda_push", "task.rewards.push_pose.weight=2.5",
                                "task.rewards.push_pose.params.std=0.1",
                                "task.observations.cube_pos.noise=0"])
    assert "std: 0.1" in OmegaConf.to_yaml(cfg.task.rewards.push_pose)
    env = make_env(cfg.task.name, num_envs=1, nthread=1, **env_kwargs(cfg.task))
    terms = env.task.cfg
    env.close()
    assert terms.rewards["push_pose"].weight == 2.5
    assert terms.rewards["push_pose"].params == {"std": 0.1}
    assert terms.observations["cube_pos"].noise == 0.0
    assert terms.rewards["push_cube"].weight == 0.4  # the rest keep their defaults


@pytest.mark.parametrize(("override", "message"), [
    ("task.rewards.nope.weight=2",
     "error: task 'panda_push' has no reward term 'nope'; its reward terms: ['push_approach', "),
    ("+task.observations.nope.noise=0.1",
     "error: task 'panda_push' has no observation term 'nope'; its observation terms: "),
    ("task.rewards.push_pose.params.sd=1",
     "error: reward term 'push_pose' of task 'panda_push' has no parameter 'sd'; its "
     "parameters: ['std']"),
])
def test_an_unknown_term_is_one_error_line(override, message, capsys, tmp_path):
    assert main(["train", "task=panda_push", override, f"run_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_ppo_on_panda_push_selects_the_pusher_task_variant():
    cfg = load_config("train", ["task=panda_push"])
    assert cfg.task.name == "panda_push" and cfg.task.action == "ee_delta_yaw_closed"
    assert cfg.task.decimation == 10 and cfg.task.episode_length_s == 4.0
    rewards = cfg.task.rewards
    assert rewards.goal_rest.weight == 1.0 and rewards.push_progress.params.taper == 0.1
    assert cfg.algo.init_noise_std == 0.5 and cfg.num_envs == 512
    assert load_config("train", ["task=panda_push", "task.action=joint_position"]
                       ).task.action == "joint_position"
    for command in ("demo", "collect"):
        assert load_config(command, ["task=panda_push"]).task.action is None
