"""Online refresh of the PRM during RL: what it learns from, when it swaps, what it relabels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied.config import ConfigError
from embodied.reward import RewardMixer, make_reward_model
from embodied.reward.prm.checkpoint import save_prm
from embodied.reward.prm.data import FrameDataset, save_frames
from embodied.reward.prm.network import MultiViewPRM, PRMConfig
from embodied.reward.prm.refresh import LoopBuffer, PRMRefresher, RefreshConfig
from embodied.reward.rl_wrapper import DistillConfig, RewardEnv, wrap_reward
from sim import make_env

INSTRUCTION = "move the gripper to the red ball"


def new_prm(folder, data: str | None = None):
    """A real (untrained) 32x32 PRM checkpoint; ``data``: its training data folder."""
    torch.manual_seed(0)
    net = MultiViewPRM(PRMConfig(image_size=32, text="learned", dim=32))
    info = {"instruction": INSTRUCTION} | ({"data": data} if data else {})
    path = save_prm(folder / "prm.pt", net, info)
    return make_reward_model({"name": "prm", "checkpoint": str(path)})


def random_frames(n: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, 32, 32, 3), generator=gen, dtype=torch.uint8)


def filled(prm, cfg: RefreshConfig, n: int = 32, progress: float = 1.0,
           cameras: tuple[str, ...] = ("front", "side", "wrist")) -> PRMRefresher:
    """A refresher whose buffer holds ``n`` random states labelled ``progress``.

    ``cameras``: the loop's camera order (the frames are the same views in that order).
    """
    ref = PRMRefresher(prm, cfg, obs_dim=4, cameras=list(cameras), instruction=INSTRUCTION)
    order = [["front", "side", "wrist"].index(c) for c in cameras]
    ref.add(torch.randn(n, 4, generator=torch.Generator().manual_seed(n)),
            random_frames(n)[:, order], torch.full((n,), progress),
            torch.zeros(n, dtype=torch.bool), torch.zeros(n), torch.arange(n) % 4)
    return ref


def replay_data(folder, train_episodes: tuple[int, ...] = (0, 1)) -> str:
    """A saved 12-state dataset (two episodes of 6, progress 0) for the refresh's replay."""
    n = 12
    data = FrameDataset(random_frames(n, 1).numpy(), np.repeat([0, 1], 6).astype(np.int32),
                        np.tile(np.arange(6), 2).astype(np.int32), np.zeros(n, np.float32),
                        np.zeros(n, bool),
                        {"instruction": INSTRUCTION, "cameras": ["front", "side", "wrist"],
                         "counterfactual_instructions": ["open the top drawer"],
                         "episodes": [{"index": i, "split": "train" if i in train_episodes
                                       else "val", "kind": "expert", "start": 6 * i,
                                       "length": 6} for i in range(2)]})
    data.meta |= {"format": "embodied-prm-frames", "version": 1}
    return str(save_frames(data, folder))


def mean_score(prm, frames: torch.Tensor) -> float:
    return float(prm.score(frames, INSTRUCTION, cameras=["front", "side", "wrist"])
                 .progress.mean())


def test_loop_buffer_keeps_the_newest_and_records_outcomes():
    buf = LoopBuffer(4, obs_dim=1)
    for i in range(3):  # 6 states of envs 0 and 1, two per add
        buf.add(torch.tensor([[2.0 * i], [2.0 * i + 1]]), random_frames(2, i)[:, :1],
                torch.zeros(2), torch.zeros(2, dtype=torch.bool), torch.zeros(2),
                torch.tensor([0, 1]))
    assert len(buf) == 4 and buf.obs[buf.rows()].flatten().tolist() == [2, 3, 4, 5]
    buf.end_episodes(torch.tensor([1]), torch.tensor([True]))
    assert buf.outcome[buf.rows()].tolist() == [-1, 1, -1, 1]
    buf.add(torch.tensor([[6.0]]), random_frames(1)[:, :1], torch.zeros(1),
            torch.zeros(1, dtype=torch.bool), torch.zeros(1), torch.tensor([1]))
    buf.end_episodes(torch.tensor([0, 1]), torch.tensor([False, False]))
    # env 1's earlier episode keeps its outcome; its new one and env 0's are failures
    assert buf.outcome[buf.rows()].tolist() == [1, 0, 1, 0]


def test_sim_labels_pull_the_prm_to_the_simulators_progress(tmp_path):
    prm = new_prm(tmp_path)
    probe = random_frames(32)
    before = mean_score(prm, probe)
    ref = filled(prm, RefreshConfig(enabled=True, steps=40, batch_size=16, replay_fraction=0,
                                    learning_rate=1e-3), progress=1.0)
    entry = ref.update()
    assert entry["refresh"] == 1 and entry["loop_states"] == 32
    after = mean_score(prm, probe)
    assert before < 0.7 and after > before + 0.25
    # the scoring path reads the new weights: the same numbers as the network itself
    direct = prm.net.predict(probe, [INSTRUCTION] * 32)[0]
    scored = prm.score(probe, INSTRUCTION, cameras=["front", "side", "wrist"]).progress
    assert torch.allclose(direct, scored, atol=1e-4)
    obs, relabelled = ref.relabel()
    assert torch.equal(obs, ref.buffer.obs[:32])
    assert torch.allclose(relabelled, scored, atol=1e-4)


def test_pushdown_reads_no_progress_label(tmp_path):
    prm = new_prm(tmp_path)
    probe = random_frames(32)
    before = mean_score(prm, probe)
    cfg = RefreshConfig(enabled=True, steps=40, batch_size=16, replay_fraction=0,
                        learning_rate=1e-3, labels="pushdown", push=0.8)
    ref = filled(prm, cfg, progress=1.0)  # a progress label it must not read
    assert ref.update() is None  # no episode has ended yet: nothing to push down
    ref.end_episodes(torch.arange(4), torch.zeros(4, dtype=torch.bool))
    ref.update()
    assert mean_score(prm, probe) < before - 0.1


def test_replay_mixes_the_prms_own_training_data(tmp_path):
    prm = new_prm(tmp_path, data=replay_data(tmp_path / "data"))
    probe = random_frames(32)
    # loop states labelled 1, replayed states labelled 0: half of each batch pulls down
    cfg = RefreshConfig(enabled=True, steps=40, batch_size=16, learning_rate=1e-3)
    only_loop = filled(new_prm(tmp_path / "b"), RefreshConfig(
        enabled=True, steps=40, batch_size=16, learning_rate=1e-3, replay_fraction=0))
    only_loop.update()
    mixed = filled(prm, cfg)
    mixed.update()
    assert mean_score(prm, probe) < mean_score(only_loop.model, probe) - 0.1
    missing = new_prm(tmp_path / "c", data=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="replay_fraction=0"):
        PRMRefresher(missing, cfg, 4, ["front", "side", "wrist"], INSTRUCTION)


@pytest.mark.parametrize("labels", ["sim", "pushdown"])
def test_top_refresh_is_the_whole_network_with_its_trunk_fixed(tmp_path, labels):
    """train=top on cached trunk features takes the steps the frame path takes with the
    trunk frozen (loop and replay rows, another camera order), and rescoring the kept
    features gives what the refreshed PRM gives on the frames themselves."""
    data = replay_data(tmp_path / "data", train_episodes=(1,))  # replay rows 6..11
    cams = ("wrist", "front", "side")
    cfg = {"enabled": True, "steps": 12, "batch_size": 16, "learning_rate": 3e-3,
           "labels": labels, "push": 0.8}
    frozen = new_prm(tmp_path / "a", data=data)
    frozen.net.encoder.conv.requires_grad_(False)
    want = filled(frozen, RefreshConfig(**cfg), progress=0.9, cameras=cams)
    top = new_prm(tmp_path / "b", data=data)
    trunk = {k: v.clone() for k, v in top.net.state_dict().items() if k.startswith("encoder.conv")}
    got = filled(top, RefreshConfig(**cfg, train="top"), progress=0.9, cameras=cams)
    before = top.score(random_frames(32), INSTRUCTION, cameras=["front", "side", "wrist"]).progress
    assert got.buffer.frames.dtype == torch.float32  # features, not frames
    for ref in (want, got):
        ref.end_episodes(torch.arange(4), torch.zeros(4, dtype=torch.bool))
        assert ref.update()["loop_states"] == 32
    assert got.log[0]["loss"] == pytest.approx(want.log[0]["loss"], abs=1e-4)
    for name, value in top.net.state_dict().items():
        torch.testing.assert_close(value, frozen.net.state_dict()[name], atol=2e-4, rtol=0)
        if name in trunk:
            assert torch.equal(value, trunk[name])
    frames = random_frames(32)
    scored = top.score(frames, INSTRUCTION, cameras=["front", "side", "wrist"]).progress
    assert (scored - before).abs().max() > 0.01  # the refresh moved the scores
    with torch.no_grad():  # the kept features: the trunk's, views in the PRM's order
        trunk_of = top.net.encoder.conv(top.net.prepare(frames) - 0.5).flatten(1)
    torch.testing.assert_close(got.buffer.frames[:32], trunk_of.view(32, 3, -1), atol=1e-4,
                               rtol=1e-4)
    torch.testing.assert_close(got.relabel()[1], scored, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.relabel()[1], want.relabel()[1], atol=1e-3, rtol=0)
    # labelling: the score of the frames, and their features kept for the next refresh
    obs = torch.zeros(2, 4)
    fresh = random_frames(2, 9)
    score = got.score_and_add(obs, fresh, torch.zeros(2), torch.zeros(2, dtype=torch.bool),
                              torch.arange(2))
    torch.testing.assert_close(score, top.score(fresh, INSTRUCTION, cameras=list(cams)).progress,
                               atol=1e-5, rtol=0)
    torch.testing.assert_close(got.relabel()[1][-2:], score, atol=1e-5, rtol=0)


@pytest.mark.parametrize("train", ["all", "top"])
def test_overlapped_refresh_is_the_same_refresh_one_rollout_later(tmp_path, train):
    """overlap: the weights of the refresh trained on the buffer as it was at start(); the
    PRM keeps its weights until finish(); states labelled in between scored by the new PRM."""
    data = replay_data(tmp_path / "data")
    cfg = {"enabled": True, "steps": 6, "batch_size": 16, "learning_rate": 3e-3,
           "buffer_size": 40, "train": train}
    now = filled(new_prm(tmp_path / "a", data=data), RefreshConfig(**cfg))
    later = filled(new_prm(tmp_path / "b", data=data), RefreshConfig(**cfg, overlap=True))
    probe = random_frames(8, 3)
    before = mean_score(later.model, probe)
    now.update()
    with torch.inference_mode():  # as PPO's collection runs
        later.start()
        new = random_frames(12, 4)  # labelled while it runs: 4 of the 32 copied drop out
        later.score_and_add(torch.zeros(12, 4), new, torch.zeros(12),
                            torch.zeros(12, dtype=torch.bool), torch.arange(12) % 4)
        assert mean_score(later.model, probe) == before  # not swapped before finish()
        obs, progress = later.finish()
    assert later.finish() is None and len(later.log) == 1
    assert later.log[0]["loss"] == now.log[0]["loss"]
    for name, value in later.net.state_dict().items():
        torch.testing.assert_close(value, now.net.state_dict()[name], atol=1e-6, rtol=0)
    assert mean_score(later.model, probe) != before
    assert torch.equal(obs, later.buffer.obs[later.buffer.rows()]) and len(progress) == 40
    torch.testing.assert_close(progress[:28], now.relabel()[1][4:], atol=1e-5, rtol=0)
    torch.testing.assert_close(progress[28:], now.model.score(
        new, INSTRUCTION, cameras=["front", "side", "wrist"]).progress, atol=1e-5, rtol=0)
    with pytest.raises(RuntimeError, match="start"):
        later.update()
    later.close()


@pytest.mark.parametrize(("train", "overlap"), [("all", False), ("top", False), ("all", True)])
def test_refresh_in_the_loop_swaps_the_prm_between_rollouts_only(tmp_path, train, overlap):
    prm = new_prm(tmp_path)
    env = make_env("panda_reach", num_envs=4, seed=0, episode_length_s=0.1)
    distill = DistillConfig(label_envs=2, label_every=1, hidden=[16], updates=2, batch_size=8,
                            buffer_size=64, refresh_every=3)
    refresh = RefreshConfig(enabled=True, every=1, steps=2, batch_size=4, replay_fraction=0,
                            learning_rate=1e-2, train=train, overlap=overlap)
    wrapped = RewardEnv(env, RewardMixer("prm+sparse", gamma=0.9), prm, scoring="distilled",
                        width=32, height=32, distill=distill, refresh=refresh,
                        start_views=False)
    probe = random_frames(2, 7)
    try:
        obs = wrapped.reset()
        seen = [mean_score(prm, probe)]
        potential = [wrapped.distiller(obs)]
        for _ in range(7):
            with torch.inference_mode():  # as PPO's collection runs
                wrapped.step(torch.zeros(4, env.action_dim))
            seen.append(mean_score(prm, probe))
            potential.append(wrapped.distiller(obs))
        # rollouts of 3 env steps: the PRM and the potential change at steps 4 and 7 only
        # (overlap: the refresh begun at step 4 is taken at 7, the one of step 7 still runs)
        assert [t for t in range(1, 8) if seen[t] != seen[t - 1]] == ([7] if overlap else [4, 7])
        assert [t for t in range(1, 8) if not torch.equal(potential[t], potential[t - 1])] \
            == [4, 7]
        # after a refresh the MLP's buffer is the kept states, relabelled by the new PRM
        ref = wrapped.refresher
        kept_obs, labels = ref.relabel()
        d = wrapped.distiller
        # 2 envs labelled at the reset and at each of the 7 steps; the last refresh came
        # before step 7's labels, which the new PRM gave
        assert len(ref.buffer) == 2 * 8 and d.size == 2 * 8
        assert torch.equal(d.obs[:d.size], kept_obs)
        assert torch.allclose(d.target[:d.size], labels, atol=1e-5)
        log = wrapped.timing_summary()["shaping"]["prm_refresh"]["log"]
        assert [e["refresh"] for e in log] == ([1] if overlap else [1, 2])
        assert log[0]["loop_states"] == 2 * 4
        # the run's copy of the PRM is the refreshed one, not the checkpoint it started from
        saved = make_reward_model({"name": "prm", "checkpoint": str(
            wrapped.save_reward_model(tmp_path / "run"))})
        assert saved.info["refreshed"]["refreshes"] == (1 if overlap else 2)
        assert mean_score(saved, probe) == seen[-1] != seen[0]
    finally:
        wrapped.close()


@pytest.mark.parametrize("keep", [False, True])
def test_a_refresh_drops_or_keeps_the_older_distillation_labels(tmp_path, keep):
    prm = new_prm(tmp_path)
    env = make_env("panda_reach", num_envs=4, seed=0, episode_length_s=0.1)
    distill = DistillConfig(label_envs=2, label_every=1, hidden=[16], updates=2, batch_size=8,
                            buffer_size=64, refresh_every=3, keep_older_labels=keep)
    refresh = RefreshConfig(enabled=True, every=1, steps=8, batch_size=4, replay_fraction=0,
                            learning_rate=1e-1, buffer_size=6)
    wrapped = RewardEnv(env, RewardMixer("prm+sparse", gamma=0.9), prm, scoring="distilled",
                        width=32, height=32, distill=distill, refresh=refresh,
                        start_views=False)
    try:
        wrapped.reset()
        d, ref = wrapped.distiller, wrapped.refresher
        with torch.inference_mode():  # as PPO's collection runs
            for _ in range(3):  # a rollout of 3 env steps: 8 states labelled with the reset's
                wrapped.step(torch.zeros(4, env.action_dim))
            obs, labels = d.obs[:8].clone(), d.target[:8].clone()
            wrapped.step(torch.zeros(4, env.action_dim))  # the refresh, then 2 labels more
        _, now = ref.relabel()  # the 6 newest states by the refreshed PRM
        if keep:  # all 8 states stay; the 6 the refresh kept carry the new PRM's labels
            assert d.size == 10 and torch.equal(d.obs[:8], obs)
            assert torch.equal(d.target[:2], labels[:2])  # the oldest two: their first labels
            assert torch.allclose(d.target[4:10], now, atol=1e-5)
        else:  # only the 6 rescored states stay
            assert d.size == 8 and torch.equal(d.obs[:6], obs[2:])
            assert torch.allclose(d.target[2:8], now, atol=1e-5)
        relabelled = d.target[2:6] if keep else d.target[:4]
        assert not torch.allclose(relabelled, labels[2:6], atol=1e-4)  # the refresh's labels
        settings = wrapped.timing_summary()["shaping"]
        assert settings["prm_refresh"]["keep_older_labels"] is keep
        assert settings["distill_buffer_size"] == 64
    finally:
        wrapped.close()


def test_refresh_settings_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="pushdown"):
        RefreshConfig(labels="none")
    with pytest.raises(ConfigError, match="top"):
        RefreshConfig(train="heads")
    env = make_env("panda_reach", num_envs=2, seed=0)
    try:
        prm = new_prm(tmp_path)
        cfg = {"mode": "prm+sparse", "model": {"name": "prm", "checkpoint": str(
            tmp_path / "prm.pt")}, "loop": {"scoring": "direct", "refresh": {"enabled": True}}}
        with pytest.raises(ConfigError, match="scoring=distilled"):
            wrap_reward(env, cfg, gamma=0.9)
        with pytest.raises(ConfigError, match="cameras=null"):
            PRMRefresher(prm, RefreshConfig(replay_fraction=0), 4, ["front"], INSTRUCTION)
        # the simulator's progress needs no refresh: the switch leaves it alone
        state = wrap_reward(env, {"mode": "prm+sparse", "model": {"name": "sim_progress"},
                                  "loop": {"scoring": "distilled",
                                           "refresh": {"enabled": True}}}, gamma=0.9)
        assert state.refresher is None
    finally:
        env.close()
