"""The Panda tasks (reach, push, pick-and-place) and their scripted experts.

One batched env of 20 envs per task, default domain randomisation; each
expert runs one full episode (clean) and one with large noise, shared by the
tests through a module-level cache.
"""

from __future__ import annotations

import pytest
import torch

from sim import make_env
from sim.experts import expert_names, make_expert
from sim.tasks import panda_pick_place, panda_push, panda_reach

TASKS = ["panda_reach", "panda_push", "panda_pick_place"]
NUM_ENVS = 20
NOISY = 0.6


@pytest.fixture(scope="module")
def envs():
    # The experts run many tiny torch ops per step; on 2 shared cores, intra-op threads
    # next to MuJoCo's physics threads only add synchronisation (about 5x slower).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    built = {name: make_env(name, num_envs=NUM_ENVS, seed=0) for name in TASKS}
    yield built
    for env in built.values():
        env.close()
    torch.set_num_threads(threads)


_ROLLOUTS: dict[tuple[str, float], dict[str, torch.Tensor]] = {}


def rollout(env, noise: float) -> dict[str, torch.Tensor]:
    """One episode of every env with the expert: success at its end, progress per step.

    ``success[i]`` is ``info["final_success"]`` of env i's first episode end
    (the last step before auto-reset); ``end[i]`` the step index of that end.
    """
    key = (env.task.name, noise)
    if key not in _ROLLOUTS:
        n = env.num_envs
        env.reset(seed=0)
        expert = make_expert(env, noise=noise, seed=0)
        success = torch.zeros(n, dtype=torch.bool)
        end = torch.full((n,), -1, dtype=torch.long)
        progress = []
        for step in range(env.max_episode_steps):
            obs, reward, _, _, info = env.step(expert())
            assert torch.isfinite(obs).all() and torch.isfinite(reward).all()
            progress.append(info["progress"].clone())
            if "done_ids" in info:
                ids = info["done_ids"]
                ids = ids[end[ids] < 0]
                success[ids] = info["final_success"][ids]
                end[ids] = step
        assert (end >= 0).all()
        _ROLLOUTS[key] = {"success": success, "end": end, "progress": torch.stack(progress)}
    return _ROLLOUTS[key]


def spearman_with_time(x: torch.Tensor) -> float:
    """Spearman rank correlation of a sequence with time (average ranks for ties)."""
    n = len(x)
    if n < 3 or torch.all(x == x[0]):
        return 1.0
    ranks = torch.empty(n, dtype=torch.float64)
    ranks[x.argsort()] = torch.arange(n, dtype=torch.float64)
    _, inverse = torch.unique(x, return_inverse=True)
    sums = torch.zeros(int(inverse.max()) + 1, dtype=torch.float64).index_add_(0, inverse, ranks)
    counts = torch.bincount(inverse).to(torch.float64)
    ranks = (sums / counts)[inverse] - (n - 1) / 2
    t = torch.arange(n, dtype=torch.float64) - (n - 1) / 2
    return float((ranks * t).sum() / (ranks.norm() * t.norm()))


@pytest.mark.parametrize("name", TASKS)
def test_env_builds_with_finite_obs_of_stable_size(envs, name):
    env = envs[name]
    assert env.task.name == name and env.instruction
    obs = env.reset(seed=1)
    assert obs.shape == (NUM_ENVS, env.obs_dim) and torch.isfinite(obs).all()
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        obs, reward, *_ = env.step(torch.rand(NUM_ENVS, env.action_dim, generator=gen) * 2 - 1)
        assert obs.shape == (NUM_ENVS, env.obs_dim)
        assert torch.isfinite(obs).all() and torch.isfinite(reward).all()
    assert env.reset(seed=2).shape == (NUM_ENVS, env.obs_dim)


@pytest.mark.parametrize("name", TASKS)
def test_resets_stay_within_bounds(envs, name):
    env = envs[name]
    task = env.task
    for seed in range(3):
        env.reset(seed=seed)
        assert (task.joint_pos - task.default_q).abs().max() <= 0.05 + 1e-9
        assert (task.gripper_opening > 0.99).all()
        if name == "panda_reach":
            low = torch.tensor(panda_reach.TARGET_LOW, dtype=torch.float64)
            high = torch.tensor(panda_reach.TARGET_HIGH, dtype=torch.float64)
            assert ((task.target >= low) & (task.target <= high)).all()
            continue
        cube, goal = task.cube_pos, task.goal
        assert ((cube[:, :2] >= torch.tensor(task.cube_low) - 1e-9)
                & (cube[:, :2] <= torch.tensor(task.cube_high) + 1e-9)).all()
        assert torch.allclose(cube[:, 2], torch.full((NUM_ENVS,), task.cube_half,
                                                      dtype=torch.float64))
        assert ((goal[:, :2] >= torch.tensor(task.goal_low) - 1e-9)
                & (goal[:, :2] <= torch.tensor(task.goal_high) + 1e-9)).all()
        dist = task.cube_goal_dist
        assert ((dist >= task.goal_distance[0] - 1e-6)
                & (dist <= task.goal_distance[1] + 1e-6)).all()
        assert not task.success().any() and not task.terminated().any()
        # The goal marker is drawn where the goal is.
        torch.testing.assert_close(env.state.mocap_pos[:, task.goal_mocap], goal)


@pytest.mark.parametrize("name", ["panda_push", "panda_pick_place"])
def test_cube_tasks_have_a_sparse_success_term(envs, name):
    terms = {t.name: t.weight for t in envs[name].task.reward_terms()}
    assert len(terms) > 2
    assert terms["success"] > 0 and terms["success"] == max(terms.values())


@pytest.mark.parametrize("name", TASKS)
def test_expert_succeeds(envs, name):
    result = rollout(envs[name], 0.0)
    assert result["success"].float().mean() >= 0.9, result["success"]


@pytest.mark.parametrize("name", TASKS)
def test_progress_is_staged_and_monotone_for_the_expert(envs, name):
    result = rollout(envs[name], 0.0)
    progress, success, end = result["progress"], result["success"], result["end"]
    assert ((progress >= 0.0) & (progress <= 1.0)).all()
    assert progress[0].max() < 0.1
    final = progress[end, torch.arange(NUM_ENVS)]  # the last step of each first episode
    assert (final[success] > 0.95).all()
    # Monotone while the expert works: up to its first success (then it stays at 1 on success).
    done = progress.eq(1.0)
    first = torch.where(done.any(0), done.float().argmax(0), end)
    rho = [spearman_with_time(progress[: int(first[i]) + 1, i]) for i in range(NUM_ENVS)]
    assert sum(rho) / len(rho) > 0.8, rho


@pytest.mark.parametrize("name", TASKS)
def test_noisy_expert_succeeds_clearly_less_often(envs, name):
    clean = rollout(envs[name], 0.0)["success"].float().mean()
    noisy = rollout(envs[name], NOISY)["success"].float().mean()
    assert noisy <= clean - 0.4, (float(clean), float(noisy))


def test_expert_registry(envs):
    assert set(expert_names()) == set(TASKS)
    expert = make_expert(envs["panda_push"], noise=0.1, seed=3)
    assert isinstance(expert, panda_push.PushExpert) and expert.noise == 0.1
    assert isinstance(make_expert(envs["panda_pick_place"]), panda_pick_place.PickPlaceExpert)
    assert isinstance(make_expert(envs["panda_reach"]), panda_reach.ReachExpert)
    envs["panda_push"].reset(seed=0)
    actions = expert()
    assert actions.shape == (NUM_ENVS, 8) and (actions.abs() <= 1.0).all()
