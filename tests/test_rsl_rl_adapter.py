"""bench/peers/rsl_rl_adapter.py meets rsl_rl's VecEnv contract and trains with our settings.

The checks run inside ``.venv-rsl_rl`` (``scripts/peer_env.sh rsl_rl``), where rsl-rl-lib
is installed; without that venv the test skips, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv-rsl_rl" / "bin" / "python"

CHECK = r'''
import json, sys
sys.path[:0] = ["bench", "bench/peers"]
import torch
from omegaconf import OmegaConf
from rsl_rl.env import VecEnv
from tensordict import TensorDict
from embodied.envs import make_train_env
from ppo import train_cfg
from rsl_rl_adapter import RslRlVecEnv, make_runner, rsl_rl_config

out = {}
cfg = train_cfg("panda_reach", "num_envs=4", "algo.num_steps=8")
env = make_train_env(cfg, 4, 0)
vec = RslRlVecEnv(env)
out["is_vec_env"] = isinstance(vec, VecEnv)
obs = vec.get_observations()
out["obs"] = [type(obs).__name__, list(obs["policy"].shape), list(obs.batch_size)]
out["obs_stable"] = bool(torch.equal(obs["policy"], vec.get_observations()["policy"]))
out["dims"] = [vec.num_envs, vec.num_actions, env.obs_dim, env.action_dim]
out["max_episode_length"] = [vec.max_episode_length, env.max_episode_steps]
ended = None
for t in range(env.max_episode_steps):
    obs, rewards, dones, extras = vec.step(torch.zeros(4, vec.num_actions))
    if t == 0:
        out["step"] = [list(obs["policy"].shape), list(rewards.shape), str(rewards.dtype),
                       list(dones.shape), str(dones.dtype), list(extras["time_outs"].shape)]
        out["length_after_one"] = vec.episode_length_buf.tolist()
    if bool(dones.any()):
        ended = (t, dones.tolist(), extras["time_outs"].tolist(), sorted(extras["episode"]))
        break
out["ended"] = ended
out["obs_after_step"] = bool(torch.equal(obs["policy"], vec.get_observations()["policy"]))

train = rsl_rl_config(cfg.algo)
out["config"] = [train["num_steps_per_env"], train["actor"]["hidden_dims"],
                 train["critic"]["hidden_dims"], train["actor"]["activation"],
                 train["actor"]["distribution_cfg"]["init_std"],
                 train["actor"]["obs_normalization"], train["algorithm"]["learning_rate"],
                 train["algorithm"]["schedule"], train["algorithm"]["num_mini_batches"],
                 train["algorithm"]["num_learning_epochs"],
                 train["algorithm"]["use_clipped_value_loss"]]
clipped = rsl_rl_config(OmegaConf.merge(cfg.algo, {"value_clip": cfg.algo.clip}))
out["clipped"] = clipped["algorithm"]["use_clipped_value_loss"]
try:
    rsl_rl_config(OmegaConf.merge(cfg.algo, {"value_clip": 0.5}))
    out["other_clip"] = "accepted"
except ValueError:
    out["other_clip"] = "refused"
runner = make_runner(env, cfg.algo, 0)
actor = runner.alg.get_policy()
widths = [m.out_features for m in actor.mlp if isinstance(m, torch.nn.Linear)]
out["actor_widths"] = widths
before = [p.detach().clone() for p in actor.parameters()]
runner.learn(2)
out["trained"] = any(not torch.equal(a, b) for a, b in zip(before, actor.parameters()))
out["std"] = actor.output_std.flatten().tolist()
print(json.dumps(out))
'''


@pytest.mark.skipif(not PYTHON.exists(), reason="rsl_rl venv .venv-rsl_rl not installed "
                                                "(scripts/peer_env.sh rsl_rl)")
def test_adapter_meets_the_vec_env_contract_and_trains():
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    done = subprocess.run([str(PYTHON), "-c", CHECK], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["is_vec_env"]
    num_envs, num_actions, obs_dim, action_dim = out["dims"]
    assert (num_envs, num_actions) == (4, action_dim)
    assert out["obs"] == ["TensorDict", [4, obs_dim], [4]]
    assert out["obs_stable"] and out["obs_after_step"]  # get_observations does not step
    assert out["max_episode_length"][0] == out["max_episode_length"][1]
    assert out["step"] == [[4, obs_dim], [4], "torch.float32", [4], "torch.bool", [4]]
    assert out["length_after_one"] == [1, 1, 1, 1]
    # zero actions never reach the target: every env times out on the last step together
    last, dones, time_outs, episode = out["ended"]
    assert last == out["max_episode_length"][0] - 1
    assert dones == [True] * 4 and time_outs == [True] * 4
    assert episode == ["length", "return", "success"]
    # our shipped panda_reach settings (configs/algo/ppo/panda_reach.yaml over ppo.yaml)
    assert out["config"] == [8, [256, 128, 64], [256, 128, 64], "elu", 0.2, True, 5e-4,
                             "fixed", 4, 5, False]  # shipped: no value clipping
    # rsl_rl clips values with its policy clip range, or not at all
    assert out["clipped"] is True and out["other_clip"] == "refused"
    assert out["actor_widths"] == [256, 128, 64, action_dim]
    assert out["trained"]
    assert all(abs(s - 0.2) < 0.05 for s in out["std"])
