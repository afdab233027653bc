"""VLM reward models through a real OpenAI-compatible server: ``transformers serve`` (with
processors loaded without video) started by the test on 127.0.0.1 in a child process,
serving tiny random models, and stopped at the end. Covers answers equal to local
scoring, ``embodied label`` with RoboReward through the server and its answer cache,
``embodied train`` with the GRM (locally and through the server), the SARM-style
backend, concurrency, and the one-line error of an unreachable server.
"""

from __future__ import annotations

import json
import os
import socket
import time

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers/huggingface_hub are imported

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("openai")
pytest.importorskip("uvicorn")
pytest.importorskip("num2words")  # the SmolVLM processor imports it

from embodied.cli import main
from embodied.datasets import LeRobotDataset
from embodied.reward import make_reward_model
from embodied.reward.vlm.chat import VlmChat
from embodied.reward.vlm.remote import ServerChat, ServerError
from embodied.reward.vlm.serve import ServedModel, free_port


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One ``transformers serve`` process; each request names its (tiny_models) model."""
    log = tmp_path_factory.mktemp("server") / "serve.log"
    served = ServedModel(None, log_path=log, timeout=180)
    served.start()
    try:
        yield served
    finally:
        served.stop()
    assert served.process.returncode is not None  # stopped


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Two rendered panda_reach episodes of 10 frames, three 32x32 views."""
    out = tmp_path_factory.mktemp("collect") / "reach"
    assert main(["collect", "task=panda_reach", "task.episode_length_s=0.2", "episodes=2",
                 "num_envs=2", "width=32", "height=32", "progress=false", f"out={out}"]) == 0
    return out


def rows(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), {"type": "text", "text": "a:"},
             rng.integers(0, 256, (32, 32, 3), dtype=np.uint8),
             {"type": "text", "text": f"How much of the task is done? {i}"}] for i in range(n)]


@pytest.mark.parametrize("family", ["qwen3_vl", "smolvlm"])
def test_server_answers_equal_local_answers(server, tiny_models, family):
    chat = ServerChat(server.url, tiny_models[family], max_in_flight=3)
    answers = chat.generate(rows(), 8)
    local = VlmChat(tiny_models[family], batch_size=1, local_files_only=True)
    assert answers == local.generate(rows(), 8)
    assert chat.in_flight.requests == 6 and chat.in_flight.peak == 3  # bounded, and kept full
    assert chat.in_flight.mean > 1.5
    chat.close()


def test_unreachable_server_fails_with_one_line_naming_it():
    url = f"http://127.0.0.1:{free_port()}/v1"
    chat = ServerChat(url, "some/model", retries=1, timeout=2.0)
    with pytest.raises(ServerError) as err:
        chat.generate(rows(1))
    message = str(err.value)
    assert "\n" not in message and url in message and "'some/model'" in message
    assert "Connection" in message


def test_a_silent_server_times_out_after_the_retries():
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        chat = ServerChat(url, "m", retries=1, timeout=0.5)
        start = time.perf_counter()
        with pytest.raises(ServerError, match=r"APITimeoutError") as err:
            chat.generate(rows(1))
        elapsed = time.perf_counter() - start
    assert "\n" not in str(err.value) and url in str(err.value)
    assert 1.0 <= elapsed < 10.0  # two attempts of 0.5 s each, with a backoff between


def test_label_with_an_unreachable_server_exits_with_one_line(tiny_models, dataset, tmp_path,
                                                              capsys):
    url = f"http://127.0.0.1:{free_port()}/v1"
    code = main(["label", f"dataset={dataset}", f"out={tmp_path / 'out'}", "progress=false",
                 "reward=roboreward", f"reward.model.model={tiny_models['qwen3_vl']}",
                 "reward.model.local_files_only=true", f"reward.server.url={url}",
                 "reward.server.retries=0", "reward.server.timeout=2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith(f"error: reward model server {url} (model ")


def test_label_roboreward_through_the_server_equals_local_and_is_cached(
        server, tiny_models, dataset, tmp_path):
    common = [f"dataset={dataset}", "progress=false", "reward=roboreward",
              f"reward.model.model={tiny_models['qwen3_vl']}", "reward.model.local_files_only=true",
              "reward.model.clip_frames=3", "reward.model.stride=3",
              "reward.model.max_new_tokens=6"]
    cache = tmp_path / "answers.sqlite"
    served = [*common, f"reward.server.url={server.url}", f"reward.server.cache={cache}",
              "reward.server.max_in_flight=4"]
    assert main(["label", *served, f"out={tmp_path / 'served'}"]) == 0
    assert main(["label", *common, f"out={tmp_path / 'local'}"]) == 0
    src = LeRobotDataset(dataset)
    served_ds, local_ds = LeRobotDataset(tmp_path / "served"), LeRobotDataset(tmp_path / "local")
    for i in range(src.num_episodes):
        progress = served_ds.episode_data(i)["progress"]
        assert progress.shape == (src.episodes[i].length,)
        assert ((progress >= 0) & (progress <= 1)).all()
        np.testing.assert_array_equal(progress, local_ds.episode_data(i)["progress"])
    # relabelling pays nothing: every answer comes from the cache, the server is not asked
    dead = f"http://127.0.0.1:{free_port()}/v1"
    again = [*common, f"reward.server.url={dead}", f"reward.server.cache={cache}",
             "reward.server.retries=0"]
    assert main(["label", *again, f"out={tmp_path / 'again'}"]) == 0
    for i in range(src.num_episodes):
        again_ds = LeRobotDataset(tmp_path / "again")
        np.testing.assert_array_equal(again_ds.episode_data(i)["progress"],
                                      served_ds.episode_data(i)["progress"])


@pytest.mark.parametrize(("reward", "family", "where"), [
    ("grm", "qwen2_5_vl", "local"), ("grm", "qwen2_5_vl", "server"),
    ("sarm", "smolvlm", "server")])
def test_train_with_episode_models(server, tiny_models, goal_image, tmp_path, reward, family,
                                   where):
    goal = [f"reward.goal={goal_image}"] if reward == "grm" else []
    args = ["train", "task=panda_reach", f"reward={reward}",
            f"reward.model.model={tiny_models[family]}",
            "reward.model.local_files_only=true", *goal,
            "reward.model.max_new_tokens=4", "reward.loop.width=32", "reward.loop.height=32",
            "num_envs=2", "algo.num_steps=4", "max_iterations=1", "eval.num_envs=0",
            "progress=false", f"run_dir={tmp_path / 'run'}"]
    if where == "server":
        args.append(f"reward.server.url={server.url}")
    threads = torch.get_num_threads()
    try:
        assert main(args) == 0
    finally:
        torch.set_num_threads(threads)
    timing = json.loads((tmp_path / "run" / "summary.json").read_text())["reward_timing"]
    assert timing["scoring"] == "direct" and timing["env_steps"] == 2 * 4
    assert timing["frames_scored"] >= 2 * 3 * (4 + 1)  # 3 views of 2 envs, reset and 4 steps


def test_sarm_through_the_server(server, tiny_models, render_frames):
    frames, cameras, instruction = render_frames("panda_push", num_envs=2, steps=2, size=32)
    model = make_reward_model({"name": "sarm", "model": tiny_models["smolvlm"], "window": 2,
                               "stages": ["reach the cube", "push it to the goal"],
                               "server": {"url": server.url, "max_in_flight": 2}})
    views = frames[0].unsqueeze(0).expand(4, -1, -1, -1, -1).contiguous()
    out = model.score_episode(views, instruction, cameras=cameras)
    assert out.progress.shape == (4,) and ((out.progress >= 0) & (out.progress <= 1)).all()
    assert model.num_answers == 4 and model.chat.in_flight.requests == 4


def test_generic_vlm_reward_through_the_server(server, tiny_models, render_frames):
    frames, cameras, instruction = render_frames("panda_push", num_envs=3, steps=2, size=32)
    kw = {"name": "vlm", "model": tiny_models["smolvlm"], "local_files_only": True,
          "success_prompt": "Is the task done: {instruction}? Yes or no."}
    served = make_reward_model({**kw, "server": {"url": server.url}})
    out = served.score(frames, instruction, cameras=cameras)
    local = make_reward_model({**kw, "batch_size": 1})
    torch.testing.assert_close(out.progress,
                               local.score(frames, instruction, cameras=cameras).progress)
    assert served.last_answers == local.last_answers
    # no logits from a server: the success question is answered in text and parsed
    assert out.success_prob is not None and out.success_prob.shape == (3,)
    assert served.chat.in_flight.requests == 2 * 3
