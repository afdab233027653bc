"""Gymnasium and Stable-Baselines3 adapters over the batched env."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

from sim import BatchedEnv, make_env, task_names
from sim.adapters import GymnasiumEnv, GymnasiumVectorEnv, SB3VecEnv, gym_id

EPISODE_S = 0.2  # 10 control steps at 50 Hz


class FakeBatchedEnv:
    """A tiny BatchedEnv with known episode ends: obs = [env id, step in episode, episode].

    Env ``i`` terminates after ``terminate_at[i]`` steps and every env truncates after
    ``max_steps``; reward 1 per step, so an episode's return is its length.
    """

    def __init__(self, terminate_at: list[int], max_steps: int = 4):
        self.num_envs, self.obs_dim, self.action_dim = len(terminate_at), 3, 2
        self.device = torch.device("cpu")
        self.instruction, self.camera_names = "fake", ()
        self.terminate_at = torch.tensor(terminate_at)
        self.max_steps = self.max_episode_steps = max_steps
        self.control_dt = 0.02
        self.step_count = torch.zeros(self.num_envs, dtype=torch.long)
        self.episode = torch.zeros(self.num_envs, dtype=torch.long)
        self.closed = False

    def _obs(self) -> torch.Tensor:
        ids = torch.arange(self.num_envs)
        return torch.stack([ids, self.step_count, self.episode], 1).to(torch.float32)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        self.step_count.zero_()
        self.episode.zero_()
        return self._obs()

    def observe(self, noise: bool = True) -> torch.Tensor:
        return self._obs()

    def step(self, actions: torch.Tensor):
        assert actions.shape == (self.num_envs, self.action_dim)
        self.step_count += 1
        obs = self._obs()
        reward = torch.ones(self.num_envs)
        terminated = self.step_count == self.terminate_at
        truncated = self.step_count >= self.max_steps
        success = terminated.clone()
        info: dict[str, Any] = {"success": success, "progress": success.float(),
                                "reward_terms": {"alive": torch.ones(self.num_envs)},
                                "diverged": torch.zeros(self.num_envs, dtype=torch.bool),
                                "time_outs": truncated}
        done = terminated | truncated
        if done.any():
            ids = done.nonzero().flatten()
            info.update(final_obs=obs.clone(), final_success=success.clone(), done_ids=ids,
                        episode_return=self.step_count[ids].double(),
                        episode_length=self.step_count[ids].clone())
            self.step_count[ids] = 0
            self.episode[ids] += 1
            obs[ids] = self._obs()[ids]
        return obs, reward, terminated, truncated, info

    def render(self, cameras=None, env_ids=None, width=None, height=None) -> torch.Tensor:
        raise RuntimeError("the fake env has no cameras")

    def close(self) -> None:
        self.closed = True


# ---------------------------------------------------------------- gymnasium
def test_every_task_is_registered():
    for task in task_names():
        assert gym_id(task) in gymnasium.registry
    assert gym_id("panda_pick_place") == "embodied/PandaPickPlace-v0"


def test_check_env_single(can_render):
    env = gymnasium.make(gym_id("panda_reach"), render_mode="rgb_array" if can_render else None)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*")  # unbounded observations
        check_env(env.unwrapped, skip_render_check=not can_render)
    if can_render:
        env.reset(seed=0)
        frame = env.render()
        assert frame.dtype == np.uint8 and frame.ndim == 3
        assert frame.shape[1] == 3 * frame.shape[0]  # front | side | wrist, square views
    env.close()


def test_single_env_seeding_reproduces_noise_and_randomisation():
    env = GymnasiumEnv("panda_reach", episode_length_s=EPISODE_S)
    actions = np.random.default_rng(0).uniform(-1, 1, (6, env.action_space.shape[0]))

    def rollout(seed: int) -> np.ndarray:
        obs = [env.reset(seed=seed)[0]]
        obs += [env.step(a.astype(np.float32))[0] for a in actions]
        return np.stack(obs)

    a, b, c = rollout(7), rollout(7), rollout(8)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[0], c[0])  # other target, joint noise and obs noise
    env.close()


def test_single_env_episode_end_matches_batched_env():
    """Done step returns the final obs; the next reset() returns the auto-reset obs."""
    cfg = dict(seed=4, episode_length_s=EPISODE_S)
    env, ref = GymnasiumEnv("panda_reach", **cfg), make_env("panda_reach", num_envs=1, **cfg)
    obs, _ = env.reset(seed=11)
    np.testing.assert_array_equal(obs, ref.reset(seed=11)[0].numpy())
    action = np.full(env.action_space.shape, 0.2, dtype=np.float32)
    for _ in range(ref.max_episode_steps):
        obs, reward, terminated, truncated, info = env.step(action)
        r_obs, r_reward, _, r_truncated, r_info = ref.step(torch.from_numpy(action)[None])
        assert reward == pytest.approx(float(r_reward[0]))
    assert truncated and not terminated and bool(r_truncated[0])
    np.testing.assert_array_equal(obs, r_info["final_obs"][0].numpy())
    assert info["episode_length"] == ref.max_episode_steps
    assert isinstance(info["is_success"], bool)
    next_obs, _ = env.reset()
    np.testing.assert_array_equal(next_obs, r_obs[0].numpy())
    assert not np.array_equal(next_obs, obs)
    # The episode started by the auto-reset continues in lockstep with the reference.
    obs, *_ = env.step(action)
    np.testing.assert_array_equal(obs, ref.step(torch.from_numpy(action)[None])[0][0].numpy())
    env.close()
    ref.close()


def test_single_env_over_fake_terminates():
    env = GymnasiumEnv(FakeBatchedEnv([2]))
    env.reset(seed=0)
    env.step(np.zeros(2, np.float32))
    obs, _, terminated, truncated, info = env.step(np.zeros(2, np.float32))
    assert terminated and not truncated and info["is_success"]
    np.testing.assert_array_equal(obs, [0, 2, 0])  # the final obs, not the reset one
    np.testing.assert_array_equal(env.reset()[0], [0, 0, 1])  # no second reset
    np.testing.assert_array_equal(env.reset()[0], [0, 0, 0])  # a real reset
    with pytest.raises(ValueError):
        GymnasiumEnv(FakeBatchedEnv([2, 3]))


def test_vector_env_steps_and_final_obs(can_render):
    envs = gymnasium.make_vec(gym_id("panda_reach"), num_envs=4, episode_length_s=EPISODE_S,
                              render_mode="rgb_array" if can_render else None)
    assert isinstance(envs, GymnasiumVectorEnv)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert envs.single_observation_space.dtype == np.float32
    assert envs.action_space.shape == (4, 8)
    assert (envs.single_action_space.low == -1).all() and (envs.single_action_space.high == 1).all()
    stats = gymnasium.wrappers.vector.RecordEpisodeStatistics(envs)
    obs, _ = stats.reset(seed=3)
    np.testing.assert_array_equal(obs, envs.reset(seed=3)[0])  # the seed reproduces the batch
    stats.action_space.seed(0)
    assert obs.shape == (4, envs.single_observation_space.shape[0]) and obs.dtype == np.float32
    for _ in range(10):
        obs, reward, terminated, truncated, infos = stats.step(stats.action_space.sample())
        assert obs.dtype == np.float32 and reward.shape == (4,)
        assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
    assert truncated.all() and not terminated.any()
    assert infos["_final_obs"].all() and infos["final_obs"].dtype == object
    for final, new in zip(infos["final_obs"], obs, strict=True):
        assert final.shape == new.shape and not np.array_equal(final, new)
    final_info = infos["final_info"]
    np.testing.assert_array_equal(final_info["episode_length"], 10)
    np.testing.assert_allclose(final_info["episode_return"], infos["episode"]["r"], rtol=1e-5)
    np.testing.assert_array_equal(infos["episode"]["l"], 10)
    assert not infos["_success"].any() and final_info["_success"].all()
    if can_render:
        frames = envs.render()  # one frame per sub-env (gymnasium's vector contract)
        assert isinstance(frames, tuple) and len(frames) == 4
        for frame in frames:
            assert frame.dtype == np.uint8 and frame.shape[1] == 3 * frame.shape[0]
    stats.close()


def test_vector_env_infos_over_fake():
    envs = GymnasiumVectorEnv(FakeBatchedEnv([2, 9, 4]))
    envs.reset(seed=0)
    envs.step(np.zeros((3, 2), np.float32))
    obs, _, terminated, _, infos = envs.step(np.zeros((3, 2), np.float32))
    np.testing.assert_array_equal(terminated, [True, False, False])
    np.testing.assert_array_equal(infos["_final_obs"], [True, False, False])
    np.testing.assert_array_equal(infos["final_obs"][0], [0, 2, 0])
    assert infos["final_obs"][1] is None
    np.testing.assert_array_equal(obs[0], [0, 0, 1])
    assert infos["final_info"]["success"][0] and infos["final_info"]["episode_length"][0] == 2
    np.testing.assert_array_equal(infos["_success"], [False, True, True])
    envs.close()
    assert envs.batched.closed


# ---------------------------------------------------------------------- SB3
def test_sb3_ppo_learns_with_wrappers():
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

    venv = SB3VecEnv(make_env("panda_reach", num_envs=8, seed=0, episode_length_s=EPISODE_S))
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(256)
    assert len(model.ep_info_buffer) == 8 * 3  # 32 steps = three 10-step episodes per env
    assert {"r", "l"} <= set(model.ep_info_buffer[0]) and model.ep_info_buffer[0]["l"] == 10
    assert len(model.ep_success_buffer) == 8 * 3

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*already wrapped with a `Monitor`.*")
        wrapped = VecNormalize(VecMonitor(venv))
    obs = wrapped.reset()
    for _ in range(10):
        obs, reward, dones, infos = wrapped.step(np.zeros((8, 8), np.float32))
    assert obs.shape == (8, venv.observation_space.shape[0]) and reward.shape == (8,)
    assert dones.all() and infos[0]["episode"]["l"] == 10
    assert infos[0]["terminal_observation"].shape == obs[0].shape
    venv.close()


def test_sb3_truncation_infos():
    venv = SB3VecEnv(make_env("panda_reach", num_envs=3, seed=1, episode_length_s=EPISODE_S))
    venv.seed(5)
    venv.reset()
    zeros = np.zeros((3, 8), np.float32)
    for _ in range(9):
        _, _, dones, infos = venv.step(zeros)
        assert not dones.any() and infos == [{}, {}, {}]
    obs, rewards, dones, infos = venv.step(zeros)
    assert dones.all() and rewards.dtype == np.float32
    for o, info in zip(obs, infos, strict=True):
        assert info["TimeLimit.truncated"] is True
        term = info["terminal_observation"]
        assert term.dtype == np.float32 and not np.array_equal(term, o)
        assert info["episode"]["l"] == 10 and isinstance(info["is_success"], bool)
    venv.close()


def test_sb3_termination_is_not_time_limit():
    venv = SB3VecEnv(FakeBatchedEnv([2, 9, 4]))
    venv.reset()
    zeros = np.zeros((3, 2), np.float32)
    _, _, dones, _ = venv.step(zeros)
    assert not dones.any()
    obs, _, dones, infos = venv.step(zeros)
    np.testing.assert_array_equal(dones, [True, False, False])
    assert infos[0]["TimeLimit.truncated"] is False and infos[0]["is_success"] is True
    np.testing.assert_array_equal(infos[0]["terminal_observation"], [0, 2, 0])
    np.testing.assert_array_equal(obs[0], [0, 0, 1])
    assert infos[0]["episode"]["r"] == 2.0 and infos[1] == {}
    venv.step(zeros)
    _, _, dones, infos = venv.step(zeros)  # env 0: terminated; 1: truncated; 2: both
    assert dones.all()
    assert [i["TimeLimit.truncated"] for i in infos] == [False, True, False]


def test_sb3_sub_env_access():
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import VecNormalize

    fake = FakeBatchedEnv([2, 9, 4])
    venv = SB3VecEnv(fake)
    assert isinstance(fake, BatchedEnv)
    assert venv.get_attr("max_steps") == [4, 4, 4] and venv.get_attr("obs_dim", 1) == [3]
    assert venv.get_attr("render_mode") == [None, None, None]
    venv.set_attr("max_steps", 5)
    assert fake.max_steps == 5
    with pytest.raises(ValueError):
        venv.set_attr("max_steps", 6, indices=[0])
    assert venv.env_method("reset", indices=[0, 2])[0].shape == (3, 3)
    assert venv.env_is_wrapped(Monitor) == [True] * 3
    assert venv.env_is_wrapped(VecNormalize) == [False] * 3  # type: ignore[arg-type]
    assert venv.seed(9) == [9, 10, 11]
    with pytest.raises(RuntimeError):
        venv.step_wait()
    venv.close()
    venv.close()
    assert fake.closed


def test_sb3_render(can_render):
    if not can_render:
        pytest.skip("no OpenGL backend for camera rendering")
    venv = SB3VecEnv(make_env("panda_reach", num_envs=3, seed=0), render_mode="rgb_array",
                     render_envs=2, width=32, height=24)
    venv.reset()
    image = venv.render()
    assert image.dtype == np.uint8 and image.shape == (2 * 24, 3 * 32, 3)
    assert len(venv.get_images()) == 3
    venv.close()
