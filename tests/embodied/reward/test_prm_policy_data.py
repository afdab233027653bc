"""PRM training data from given policies: PPO checkpoints at several stages and random actions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied.export import load_checkpoint_policy
from embodied.reward.prm.data import (
    COVERAGE,
    DataConfig,
    _kinds,
    all_policies,
    policy_sources,
    rollout_policy,
    simulate,
)
from sim import make_env


@pytest.fixture(scope="module")
def run(tiny_ppo_run):
    """The tiny PPO run (tests/embodied/conftest.py): 3 iterations, a checkpoint after each."""
    return tiny_ppo_run


def test_run_folder_gives_checkpoints_of_several_stages(run):
    files = sorted(str(p) for p in (run / "checkpoints").glob("model_*.pt"))
    assert len(files) == 3
    sources = policy_sources([{"checkpoint": str(run), "stages": 2, "episodes": 4,
                               "noise": 0.1}, {"checkpoint": "random", "episodes": 8}])
    assert [s.checkpoint for s in sources] == [files[0], files[2], "random"]
    assert [s.episodes for s in sources] == [4, 4, 8] and sources[0].noise == 0.1
    # one stage is the trained policy: the last checkpoint, not the first
    assert [s.checkpoint for s in policy_sources([{"checkpoint": str(run), "stages": 1}])] \
        == [files[2]]
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        policy_sources([{"checkpoint": str(run / "nothing.pt"), "episodes": 4}])
    with pytest.raises(ValueError, match="give checkpoint"):
        policy_sources([{"path": str(run)}])


def test_first_gives_the_earliest_checkpoints(run):
    files = sorted(str(p) for p in (run / "checkpoints").glob("model_*.pt"))
    sources = policy_sources([{"checkpoint": str(run), "first": 2, "episodes": 4}])
    assert [s.checkpoint for s in sources] == files[:2]
    assert [s.checkpoint for s in policy_sources([{"checkpoint": str(run), "first": 9}])] == files
    with pytest.raises(ValueError, match="first must be >= 1"):
        policy_sources([{"checkpoint": str(run), "first": 0}])


def test_policy_run_adds_the_coverage_recipe(run):
    files = sorted(str(p) for p in (run / "checkpoints").glob("model_*.pt"))
    cfg = DataConfig(policies=[{"checkpoint": "random", "episodes": 8}], policy_run=str(run))
    entries = all_policies(cfg)
    assert entries[0] == {"checkpoint": "random", "episodes": 8}
    assert entries[1:] == [{"checkpoint": str(run)} | e if "checkpoint" not in e else e
                           for e in COVERAGE]
    batches = [b for b in _kinds(cfg) if b[0] == "policy"]
    stages, first, random = COVERAGE
    # random: 8 + the recipe's; stages over 3 files give all 3, first 3 give all 3
    per = {e: max(1, round(e / cfg.batch_envs)) for e in (8, stages["episodes"],
                                                          first["episodes"], random["episodes"])}
    assert [c for _, _, c in batches] == (
        ["random"] * per[8] + [f for f in files for _ in range(per[stages["episodes"]])]
        + [f for f in files for _ in range(per[first["episodes"]])]
        + ["random"] * per[random["episodes"]])
    assert {n for _, n, c in batches if c != "random"} == {stages["noise"], first["noise"]}
    assert [c for _, _, c in _kinds(DataConfig(policy_run=None)) if c] == []


def test_policy_rollouts_act_as_the_checkpoint(run):
    ckpt = sorted((run / "checkpoints").glob("model_*.pt"))[-1]
    env = make_env("panda_reach", num_envs=3, seed=0)
    try:
        obs = env.reset(seed=0)
        act = rollout_policy(env, "policy", 0.0, str(ckpt), seed=0)
        net = load_checkpoint_policy(ckpt)[0]
        with torch.no_grad():
            assert torch.allclose(act(obs), net(obs))
        noisy = rollout_policy(env, "policy", 0.5, str(ckpt), seed=0)(obs)
        assert not torch.allclose(noisy, net(obs).detach())
        rand = rollout_policy(env, "policy", 0.0, "random", seed=0)(obs)
        assert rand.shape == (3, env.action_dim) and rand.abs().max() <= 1
    finally:
        env.close()


def test_simulated_dataset_holds_policy_episodes(run):
    cfg = DataConfig(task="panda_reach", episodes=4, batch_envs=4, stride=10, width=24,
                     height=24, expert_fraction=1.0, noisy_fraction=0.0, seed=3,
                     policies=[{"checkpoint": str(run), "stages": 2, "episodes": 4},
                               {"checkpoint": "random", "episodes": 4}])
    data = simulate(cfg)
    kinds = [e["kind"] for e in data.episodes]
    assert kinds == ["expert"] * 4 + ["policy"] * 12
    policies = [e["policy"] for e in data.episodes if e["kind"] == "policy"]
    assert policies[-4:] == ["random"] * 4 and len(set(policies[:8])) == 2
    assert {e["split"] for e in data.episodes if e["kind"] == "policy"} == {"train", "val"}
    rows = data.rows(kinds=("policy",))
    assert len(rows) and ((data.progress[rows] >= 0) & (data.progress[rows] <= 1)).all()
    assert not np.array_equal(data.frames[data.rows(kinds=("expert",))][:4],
                              data.frames[rows][:4])


def test_wander_episodes_leave_the_goal_after_success():
    cfg = DataConfig(task="panda_reach", episodes=4, batch_envs=4, stride=1, width=16,
                     height=16, expert_fraction=1.0, noisy_fraction=0.0, seed=1,
                     wander_episodes=4)
    assert [k for k, _, _ in _kinds(cfg)] == ["expert", "wander"]
    data = simulate(cfg)
    assert [e["kind"] for e in data.episodes] == ["expert"] * 4 + ["wander"] * 4

    def held_after_success(kind: str) -> float:
        """Share of the recorded states after an episode's first success where it holds."""
        held = []
        for rows in data.episode_rows(kinds=(kind,)):
            hit = np.flatnonzero(data.success[rows])
            assert len(hit), f"a {kind} episode never succeeded"
            held.append(data.success[rows[hit[0]:]].mean())
        return float(np.mean(held))

    # the expert stays at its target; the same expert wandering off after success does not
    assert held_after_success("expert") > 0.9
    assert held_after_success("wander") < 0.5


def test_wander_box_sends_the_tcp_to_waypoints_after_success():
    low, high = [0.35, -0.15, 0.45], [0.55, 0.15, 0.6]
    env = make_env("panda_push", num_envs=8, seed=3, action="ee_delta_yaw_closed")
    obs = env.reset(seed=3)
    policy = rollout_policy(env, "wander", 0.0, None, seed=3, wander_box=[low, high])
    first = torch.full((env.num_envs,), -1)
    yaws = []
    for t in range(env.max_episode_steps - 1):
        hit = env.task.success().bool().cpu() & (first < 0)
        first[hit] = t
        obs, *_ = env.step(policy(obs))
        yaws.append(env.task.ee_yaw.cpu().clone())
    late = (first >= 0) & (first < env.max_episode_steps - 60)
    assert late.sum() >= 4, first  # most envs succeed with time left to wander
    ee = env.task.ee_pos.cpu()[late]
    outside = (torch.tensor(low) - ee).clamp_min(0) + (ee - torch.tensor(high)).clamp_min(0)
    assert (outside.norm(dim=1) < 0.05).float().mean() >= 0.75, ee  # at a waypoint, or near
    step = torch.stack(yaws)[-50:, late].diff(dim=0)
    turned = (torch.remainder(step + torch.pi, 2 * torch.pi) - torch.pi).abs().sum(dim=0)
    assert turned.mean() > 0.5, turned  # the hand turns to each waypoint's yaw too
    env.close()


@pytest.mark.parametrize("box", [[[0.3, 0.0, 0.1]], [[0.3, 0.0], [0.5, 0.1]],
                                 [[0.5, 0.0, 0.1], [0.3, 0.1, 0.2]], "high"])
def test_a_bad_wander_box_names_the_fix(box):
    with pytest.raises(ValueError, match=r"data\.wander_box.*e\.g\. \[\[0\.25"):
        DataConfig(task="panda_push", wander_episodes=16, wander_box=box)
