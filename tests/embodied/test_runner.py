"""The runner: bitwise resume, atomic checkpoints, clear errors, Ctrl-C checkpoint."""

from __future__ import annotations

import pytest
import torch

from embodied.cli import main
from embodied.rl import CheckpointError, OnPolicyRunner, PPOConfig
from embodied.rl.checkpoint import find_checkpoint, load_checkpoint
from sim import make_env

SMALL = PPOConfig(num_steps=8, num_epochs=2, num_mini_batches=2, actor_hidden=[32, 32],
                  critic_hidden=[32, 32])


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _runner(run_dir, seed=0, num_envs=8) -> OnPolicyRunner:
    env = make_env("panda_reach", num_envs=num_envs, seed=seed, nthread=1)
    return OnPolicyRunner(env, SMALL, run_dir, seed=seed, save_interval=2, progress=False)


def test_resume_continues_bitwise(tmp_path):
    straight = _runner(tmp_path / "a")
    straight.learn(4)

    first = _runner(tmp_path / "b")
    first.learn(2)
    resumed = _runner(tmp_path / "b", seed=123)  # a different init: everything must be restored
    path = resumed.load(tmp_path / "b")
    assert path.name == "model_000002.pt"
    assert (resumed.iteration, resumed.global_step) == (2, 2 * 8 * 8)
    resumed.learn(4)

    assert resumed.global_step == straight.global_step
    assert resumed.alg.learning_rate == straight.alg.learning_rate
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(resumed.policy.state_dict()[key], value), key
    opt_a = straight.alg.optimizer.state_dict()["state"]
    opt_b = resumed.alg.optimizer.state_dict()["state"]
    for i in opt_a:
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(opt_a[i][key], opt_b[i][key])
    assert list(resumed.episodes) == list(straight.episodes)


def test_checkpoint_holds_everything_and_is_written_atomically(tmp_path):
    runner = _runner(tmp_path)
    runner.learn(1)
    path = find_checkpoint(tmp_path)
    assert path == tmp_path / "checkpoints" / "model_000001.pt"
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == [path.name]  # no tmp file
    state = load_checkpoint(path)
    assert {"policy", "ppo", "iteration", "global_step", "rng", "episodes", "config"} <= set(state)
    assert "obs_normalizer.count" in state["policy"] and state["rng"]["env"] is not None
    assert state["policy"]["obs_normalizer.count"].item() == 8 * 8


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_checkpoint_is_a_clear_error(tmp_path, damage, capsys):
    runner = _runner(tmp_path / "run")
    path = runner.save()
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"not a checkpoint" * 10,
                      "empty": b""}[damage])
    with pytest.raises(CheckpointError, match=str(path)):
        _runner(tmp_path / "other").load(path)
    # and from the command line: an error naming the file, no traceback
    code = main(["train", f"resume={path}", "num_envs=2", "progress=false"])
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "Traceback" not in err


def test_missing_checkpoint_and_wrong_env(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        find_checkpoint(tmp_path)
    runner = _runner(tmp_path / "run")
    path = runner.save()
    other = OnPolicyRunner(make_env("panda_push", num_envs=2, nthread=1), SMALL, tmp_path / "p",
                           progress=False)
    if other.env.obs_dim != runner.env.obs_dim:
        with pytest.raises(CheckpointError, match="obs/action dims"):
            other.load(path)


def test_ctrl_c_writes_a_checkpoint(tmp_path):
    runner = _runner(tmp_path)
    update = runner.alg.update
    calls = []

    def interrupted(storage):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return update(storage)

    runner.alg.update = interrupted
    with pytest.raises(KeyboardInterrupt):
        runner.learn(10)
    state = load_checkpoint(find_checkpoint(tmp_path))
    assert state["iteration"] == 1


def test_ctrl_c_keeps_the_exact_periodic_checkpoint(tmp_path):
    runner = _runner(tmp_path)  # save_interval=2
    update = runner.alg.update
    calls, saved = [], {}

    def interrupted(storage):
        calls.append(1)
        if len(calls) == 3:  # iteration 2's checkpoint exists; iteration 3 is half done
            saved["bytes"] = (tmp_path / "checkpoints" / "model_000002.pt").read_bytes()
            raise KeyboardInterrupt
        return update(storage)

    runner.alg.update = interrupted
    with pytest.raises(KeyboardInterrupt):
        runner.learn(10)
    assert (tmp_path / "checkpoints" / "model_000002.pt").read_bytes() == saved["bytes"]
    assert find_checkpoint(tmp_path).name == "model_000002.pt"


def test_foreign_checkpoint_gets_no_unsafe_advice(tmp_path):
    """A pickle of objects torch refuses to load safely is 'not a valid checkpoint'; the
    message never suggests weights_only=False."""
    path = tmp_path / "model_000001.pt"
    torch.save({"policy": SMALL}, path)  # a dataclass: not loadable with weights_only=True
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert str(path) in message and "not a valid" in message
    assert "weights_only" not in message and "unsafe" not in message.lower()
