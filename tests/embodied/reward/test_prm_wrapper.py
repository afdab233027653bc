"""Reward in the RL loop: RewardEnv's rewards match direct scoring; terminal frames; modes."""

from __future__ import annotations

import itertools

import pytest
import torch

from embodied.reward import RewardMixer, make_reward_model
from embodied.reward.prm.checkpoint import save_prm
from embodied.reward.prm.metrics import pearson
from embodied.reward.prm.network import MultiViewPRM, PRMConfig
from embodied.reward.rl_wrapper import (
    DELTA_WINDOW_ROLLOUTS,
    DistillConfig,
    RewardEnv,
    RunningPearson,
    wrap_reward,
)
from sim import make_env

GAMMA = 0.9


@pytest.fixture(scope="module")
def prm(tmp_path_factory):
    """A real (untrained, randomly initialised) PRM checkpoint at 32x32."""
    torch.manual_seed(0)
    net = MultiViewPRM(PRMConfig(image_size=32, text="learned", dim=32))
    path = tmp_path_factory.mktemp("prm") / "prm.pt"
    save_prm(path, net, {"instruction": "move the gripper to the red ball"})
    return make_reward_model({"name": "prm", "checkpoint": str(path)})


def short_env(num_envs: int = 3):
    # 0.1 s episodes: 5 control steps, so episode boundaries happen within the test
    return make_env("panda_reach", num_envs=num_envs, seed=0, episode_length_s=0.1)


def test_final_frames_are_the_terminal_states():
    env = short_env(2)
    try:
        env.reset()
        _, _, _, _, info = env.step(torch.zeros(2, env.action_dim))
        assert "final_frames" not in info
        env.request_final_frames(["front", "wrist"], width=24, height=24)
        for _ in range(4):  # steps 2..5: the episode ends on the 5th
            before = env.render(["front", "wrist"], width=24, height=24)
            _, _, _, _, info = env.step(torch.zeros(2, env.action_dim))
        after = env.render(["front", "wrist"], width=24, height=24)
        assert info["done_ids"].tolist() == [0, 1]
        final = info["final_frames"]
        assert final.shape == (2, 2, 24, 24, 3) and final.dtype == torch.uint8
        # the terminal state is one small step from the last pre-step frames and far from
        # the reset state the env is in now
        near = (final.float() - before.float()).abs().mean()
        far = (final.float() - after.float()).abs().mean()
        assert near < far
        env.request_final_frames(enabled=False)
        for _ in range(5):
            _, _, _, _, info = env.step(torch.zeros(2, env.action_dim))
        assert "done_ids" in info and "final_frames" not in info
    finally:
        env.close()


def test_direct_rewards_match_scoring_by_hand(prm):
    env = short_env()
    mixer = RewardMixer("prm+sparse", gamma=GAMMA)
    wrapped = RewardEnv(env, mixer, prm, scoring="direct", width=32, height=32)
    cams = list(env.camera_names)

    def phi(frames):
        return prm.score(frames, env.instruction, cameras=cams).progress

    try:
        wrapped.reset(seed=3)
        phi_s = phi(env.render(cams, width=32, height=32))
        torch.manual_seed(0)
        seen_done = False
        for _ in range(7):
            actions = 0.3 * torch.randn(3, env.action_dim)
            _, reward, _, _, info = wrapped.step(actions)
            phi_obs = phi(env.render(cams, width=32, height=32))
            phi_next = phi_obs.clone()
            if "done_ids" in info:
                seen_done = True
                ids = info["done_ids"]
                phi_next[ids] = phi(info["final_frames"])
            expected = info["success"].float() + GAMMA * phi_next - phi_s
            assert torch.allclose(reward, expected, atol=1e-5)
            assert torch.allclose(info["progress_model"], phi_obs, atol=1e-6)
            phi_s = phi_obs
        assert seen_done
        t = wrapped.timing_summary()
        assert t["frames_scored"] > 0 and t["scoring"] == "direct"
        assert set(t["seconds"]) == {"physics", "render", "model", "distill", "refresh"}
    finally:
        wrapped.close()


@pytest.fixture(scope="module")
def context_prm(tmp_path_factory):
    """A random PRM with temporal context: it reads each env's first views too."""
    torch.manual_seed(1)
    net = MultiViewPRM(PRMConfig(image_size=32, text="learned", dim=32, context="start"))
    with torch.no_grad():  # sharper than the near-uniform output of a fresh head
        for layer in net.head:
            if isinstance(layer, torch.nn.Linear):
                layer.weight.mul_(8.0)
    path = tmp_path_factory.mktemp("prm_ctx") / "prm.pt"
    save_prm(path, net, {"instruction": "move the gripper to the red ball"})
    return make_reward_model({"name": "prm", "checkpoint": str(path)})


def test_context_prm_reads_each_episodes_first_views(context_prm):
    env = short_env()
    wrapped = RewardEnv(env, RewardMixer("prm+sparse", gamma=GAMMA), context_prm,
                        scoring="direct", width=32, height=32)
    cams = list(env.camera_names)
    both = [*cams, *(f"{c}@start" for c in cams)]

    def phi(frames, start):
        return context_prm.score(torch.cat([frames, start], 1), env.instruction,
                                 cameras=both).progress

    try:
        wrapped.reset(seed=3)
        start = env.render(cams, width=32, height=32)
        phi_s = phi(start, start)
        torch.manual_seed(0)
        boundaries = 0
        for _ in range(7):
            _, reward, _, _, info = wrapped.step(0.3 * torch.randn(3, env.action_dim))
            now = env.render(cams, width=32, height=32)
            phi_next = None
            if "done_ids" in info:
                boundaries += 1
                ids = info["done_ids"]
                phi_final = phi(info["final_frames"], start[ids])  # its own episode's start
                start = start.clone()
                start[ids] = now[ids]
            phi_obs = phi(now, start)
            phi_next = phi_obs.clone()
            if "done_ids" in info:
                phi_next[ids] = phi_final
            expected = info["success"].float() + GAMMA * phi_next - phi_s
            assert torch.allclose(reward, expected, atol=1e-5)
            phi_s = phi_obs
        assert boundaries == 1 and phi_s.std() > 1e-3
        # without its start views the model scores the state alone, and differently
        alone = context_prm.score(now, env.instruction, cameras=cams).progress
        assert not torch.allclose(alone, phi_s, atol=1e-4)
    finally:
        wrapped.close()


def test_context_prm_without_start_views_scores_the_state_alone(context_prm):
    env = make_env("panda_reach", num_envs=2, seed=0)  # no episode ends in 3 steps
    wrapped = RewardEnv(env, RewardMixer("prm", gamma=1.0), context_prm, scoring="direct",
                        width=32, height=32, start_views=False, plane_extent=40.0)
    cams = list(env.camera_names)
    try:
        assert env.cfg.render_plane_extent == 40.0  # the labels' frames: the nearer floor
        wrapped.reset(seed=3)
        phi_s = context_prm.score(env.render(cams, width=32, height=32), env.instruction,
                                  cameras=cams).progress
        for _ in range(3):
            _, reward, _, _, _ = wrapped.step(0.3 * torch.ones(2, env.action_dim))
            phi = context_prm.score(env.render(cams, width=32, height=32), env.instruction,
                                    cameras=cams).progress
            assert torch.allclose(reward, phi - phi_s, atol=1e-5)
            phi_s = phi
        assert wrapped.start_frames is None  # no start views rendered
        assert wrapped.frames_scored == 4 * 2 * 3  # reset + 3 steps, 2 envs x 3 views
    finally:
        wrapped.close()


def test_direct_every_k_holds_scores(prm):
    env = make_env("panda_reach", num_envs=2, seed=0)  # no episode ends in 4 steps
    wrapped = RewardEnv(env, RewardMixer("prm", gamma=1.0), prm, every=4, width=32, height=32)
    try:
        wrapped.reset()
        rewards = [wrapped.step(torch.full((2, env.action_dim), 0.5))[1] for _ in range(4)]
        # phi is held for 3 steps (shaping 0 with gamma 1), updated on the 4th
        assert all(torch.equal(r, torch.zeros(2)) for r in rewards[:3])
        assert wrapped.frames_scored == 2 * 3 * 2  # reset + step 4, 2 envs x 3 views
    finally:
        wrapped.close()


def test_distilled_mode_labels_a_subset(prm):
    env = short_env(4)
    cfg = DistillConfig(label_envs=2, label_every=2, hidden=[16], updates=2, batch_size=8,
                        buffer_size=64)
    wrapped = RewardEnv(env, RewardMixer("prm+sparse", gamma=GAMMA), prm, scoring="distilled",
                        width=32, height=32, distill=cfg)
    try:
        prev = wrapped.reset()
        for _ in range(8):
            obs, reward, _, _, info = wrapped.step(torch.zeros(4, env.action_dim))
            # phi(s) and phi(s') come from the same (current) MLP
            mlp = wrapped.distiller
            phi_next = mlp(obs)
            if "done_ids" in info:
                phi_next[info["done_ids"]] = mlp(info["final_obs"][info["done_ids"]])
            expected = info["success"].float() + GAMMA * phi_next - mlp(prev)
            assert torch.allclose(reward, expected, atol=1e-5)
            prev = obs
        # reset + steps 2, 4, 6, 8 labelled 2 envs each, 3 views
        assert wrapped.frames_scored == 5 * 2 * 3
        assert wrapped.distiller.size == 10
        assert torch.isfinite(torch.tensor(wrapped.distiller.last_loss))
        phi = wrapped.distiller(obs)
        assert ((phi >= 0) & (phi <= 1)).all()
        assert "final_frames" not in wrapped.step(torch.zeros(4, env.action_dim))[4]
        quality = wrapped.timing_summary()["potential_vs_sim_pearson"]
        assert set(quality) == {"model", "distilled"}
    finally:
        wrapped.close()


def test_distilled_potential_is_frozen_within_a_rollout(prm):
    env = short_env(4)
    cfg = DistillConfig(label_envs=2, label_every=1, hidden=[16], updates=2, batch_size=8,
                        buffer_size=64, refresh_every=3)
    wrapped = RewardEnv(env, RewardMixer("prm+sparse", gamma=GAMMA), prm, scoring="distilled",
                        width=32, height=32, distill=cfg)
    try:
        probe = wrapped.reset()
        seen, learning = [wrapped.distiller(probe)], [wrapped.distiller.mlp(probe).detach()]
        for _ in range(9):
            wrapped.step(torch.zeros(4, env.action_dim))
            seen.append(wrapped.distiller(probe))
            learning.append(wrapped.distiller.mlp(probe).detach())
        # the MLP learns at every step; the potential changes only at the first step of
        # rollouts 2 and 3 (env steps 4 and 7)
        assert all(not torch.equal(a, b) for a, b in itertools.pairwise(learning))
        changed = [t for t in range(1, 10) if not torch.equal(seen[t], seen[t - 1])]
        assert changed == [4, 7]
        settings = wrapped.timing_summary()["shaping"]
        assert settings["potential_refresh_every"] == 3 and settings["prm_weight"] == 1.0
    finally:
        wrapped.close()


def test_simulator_progress_through_the_same_distillation():
    env = short_env(4)
    cfg = {"mode": "prm+sparse", "model": {"name": "sim_progress"}, "prm_weight": 2.0,
           "loop": {"scoring": "distilled", "distill": {"label_envs": 2, "label_every": 1,
                                                         "hidden": [16], "batch_size": 8}}}
    wrapped = wrap_reward(env, cfg, gamma=GAMMA)
    try:
        prev = wrapped.reset()
        for _ in range(6):
            obs, reward, _, _, info = wrapped.step(0.3 * torch.randn(4, env.action_dim))
            mlp = wrapped.distiller
            phi_next = mlp(obs)
            if "done_ids" in info:
                phi_next[info["done_ids"]] = mlp(info["final_obs"][info["done_ids"]])
            expected = info["success"].float() + 2.0 * (GAMMA * phi_next - mlp(prev))
            assert torch.allclose(reward, expected, atol=1e-5)
            prev = obs
        summary = wrapped.timing_summary()
        assert summary["scoring"] == "state-distilled" and summary["frames_scored"] == 0
        # the labels are the simulator's progress of the labelled states
        pairs = torch.cat(wrapped._pairs["model"])
        assert len(pairs) == 7 * 2 and torch.equal(pairs[:, 0], pairs[:, 1])
        assert torch.equal(wrapped.distiller.target[:14], pairs[:, 0])
        assert wrapped.distiller.size == 7 * 2
        assert summary["shaping"]["prm_weight"] == 2.0
    finally:
        wrapped.close()


def distilled_sim_progress(env, **distill):
    """``env`` with the simulator's progress shaped through the distillation ``distill``."""
    cfg = {"mode": "prm+sparse", "model": {"name": "sim_progress"},
           "loop": {"scoring": "distilled", "distill": {"batch_size": 8, **distill}}}
    return wrap_reward(env, cfg, gamma=GAMMA)


def test_step_delta_correlation_is_of_the_paid_potential():
    env = short_env(4)
    wrapped = distilled_sim_progress(env, label_envs=2, label_every=1, hidden=[16],
                                     refresh_every=3)
    dphi, dsim = [], []
    try:
        prev, sim_prev = wrapped.reset(), env.task.progress().float().clone()
        for _ in range(12):
            obs, _, _, _, info = wrapped.step(0.5 * torch.randn(4, env.action_dim))
            sim = env.task.progress().float().clone()
            # the potential of this step's transition (the MLP copied at rollout starts)
            change = wrapped.distiller(obs) - wrapped.distiller(prev)
            keep = torch.ones(4, dtype=torch.bool)
            if "done_ids" in info:
                keep[info["done_ids"]] = False
            dphi.append(change[keep])
            dsim.append((sim - sim_prev)[keep])
            prev, sim_prev = obs, sim
        tracked = wrapped.timing_summary()["potential_step_delta"]
        x, y = torch.cat(dphi).double(), torch.cat(dsim).double()
        assert tracked["transitions"] == len(x) < 12 * 4  # episode ends left out
        expected = pearson(x.numpy(), y.numpy())
        assert tracked["pearson"] == pytest.approx(expected, abs=1e-3)
        assert sum(w["transitions"] for w in tracked["windows"]) == len(x)
    finally:
        wrapped.close()


def test_step_delta_windows_span_resets():
    env = short_env(2)
    wrapped = distilled_sim_progress(env, label_envs=1, label_every=4, hidden=[8],
                                     refresh_every=2)
    window = 2 * DELTA_WINDOW_ROLLOUTS  # env steps per window
    try:
        for _ in range(3):  # the PPO runner resets the envs at every checkpoint
            wrapped.reset()
            for _ in range(window // 2 + 1):
                wrapped.step(0.5 * torch.randn(2, env.action_dim))
        windows = wrapped.timing_summary()["potential_step_delta"]["windows"]
        # a window closed after `window` steps in all, though no episode ran that long
        assert [w["env_steps"] for w in windows] == [window * 2, 3 * (window // 2 + 1) * 2]
    finally:
        wrapped.close()


def test_running_pearson_matches_the_batch_formula():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, generator=gen)
    y = 0.5 * x + torch.randn(300, generator=gen)
    running = RunningPearson()
    for part in torch.split(torch.arange(300), 70):
        running.add(x[part], y[part])
    assert running.count == 300
    assert running.value() == pytest.approx(pearson(x.numpy(), y.numpy()), abs=1e-9)
    constant = RunningPearson()
    constant.add(torch.ones(5), x[:5])
    assert constant.value() is None


def test_shaping_target_advantage_reaches_the_ppo_advantages(tmp_path):
    from embodied.rl import OnPolicyRunner, PPOConfig

    env = short_env(4)
    cfg = {"mode": "prm+sparse", "model": {"name": "sim_progress"}, "prm_weight": 2.0,
           "shaping_target": "advantage"}
    wrapped = wrap_reward(env, cfg, gamma=GAMMA)
    small = PPOConfig(num_steps=6, num_epochs=1, num_mini_batches=2, actor_hidden=[8],
                      critic_hidden=[8], gamma=GAMMA)
    runner = OnPolicyRunner(wrapped, small, tmp_path, save_interval=0, progress=False)
    try:
        wrapped.reset()
        p0 = env.task.progress().float()
        _, reward, _, _, info = wrapped.step(0.3 * torch.randn(4, env.action_dim))
        assert torch.equal(reward, info["success"].float())  # no shaping in the reward
        torch.testing.assert_close(info["advantage_shaping"],
                                   2.0 * (GAMMA * info["progress"] - p0))
        assert wrapped.timing_summary()["shaping"]["shaping_target"] == "advantage"
        runner.obs = None
        runner.collect()
        storage = runner.storage
        assert storage.has_shaping and storage.shaping.abs().sum() > 0
        running = ~storage.dones  # (finished envs' rewards carry the time-out bootstrap)
        assert set(storage.rewards[running].unique().tolist()) <= {0.0, 1.0}
    finally:
        wrapped.close()


def test_sparse_and_state_modes():
    env = short_env()
    try:
        sparse = wrap_reward(env, {"mode": "sparse", "model": None}, gamma=0.99)
        sparse.reset()
        _, reward, _, _, info = sparse.step(torch.zeros(3, env.action_dim))
        assert torch.equal(reward, info["success"].float())
        assert torch.is_tensor(info["env_reward"])
        assert sparse.timing_summary()["frames_scored"] == 0
        assert wrap_reward(env, {"mode": "oracle", "model": None}, gamma=0.99) is env
        # oracle-shaped: phi = the simulator's progress, no pixels
        shaped = wrap_reward(env, {"mode": "prm", "model": {"name": "sim_progress"}},
                             gamma=1.0)
        shaped.reset()
        p0 = env.task.progress().float()
        _, reward, _, _, info = shaped.step(torch.zeros(3, env.action_dim))
        assert torch.allclose(reward, info["progress"] - p0, atol=1e-6)
        with pytest.raises(ValueError, match=r"needs reward\.model"):
            wrap_reward(env, {"mode": "prm", "model": None}, gamma=0.99)
    finally:
        env.close()


def test_missing_prm_checkpoint_names_the_fix(tmp_path):
    from embodied.reward.prm.checkpoint import newest_prm_checkpoint

    with pytest.raises(FileNotFoundError, match="embodied reward train task=panda_reach"):
        newest_prm_checkpoint("panda_reach", runs=tmp_path)
