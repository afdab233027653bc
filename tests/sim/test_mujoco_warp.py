"""MuJoCo Warp against C MuJoCo: same task code, same seeded actions, same trajectories.

Runs on Warp's CPU device (no GPU here). Warp computes in float32, C MuJoCo in float64;
the tolerances below are what that difference allows over the compared horizon.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the 'gpu' extra (mujoco-warp) is not installed")

from sim import BackendUnavailable, make_env

NUM_ENVS = 4


def rollout(backend: str, task: str, steps: int, seed: int = 3,
            action_scale: float = 1.0) -> dict[str, torch.Tensor]:
    """Seeded random actions; per step the joint state, observation, reward and progress."""
    env = make_env(task, num_envs=NUM_ENVS, backend=backend, seed=seed, device="cpu"
                   ) if backend != "mujoco" else make_env(task, num_envs=NUM_ENVS, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, list] = {"qpos": [], "obs": [], "reward": [], "progress": [], "sensors": []}
    try:
        for _ in range(steps):
            actions = action_scale * (2 * torch.rand(NUM_ENVS, env.action_dim, generator=gen) - 1)
            obs, reward, _, _, info = env.step(actions)
            out["qpos"].append(env.state.qpos.clone())
            out["obs"].append(obs)
            out["reward"].append(reward)
            out["progress"].append(info["progress"])
            out["sensors"].append(env.state.sensordata.clone())
    finally:
        env.close()
    return {k: torch.stack(v).double() for k, v in out.items()}


def max_diff(a: dict, b: dict, key: str) -> float:
    return float((a[key] - b[key]).abs().max())


@pytest.mark.parametrize("task, steps, tol_qpos", [
    ("panda_reach", 40, 1e-4),  # no contacts: float32 rounding only (seen: 2e-6)
    ("panda_push", 25, 1e-3),  # cube-table contacts (seen: 1e-5)
])
def test_arm_tasks_match_c_mujoco(task, steps, tol_qpos):
    c, w = rollout("mujoco", task, steps), rollout("mujoco_warp", task, steps)
    assert max_diff(c, w, "qpos") < tol_qpos
    assert max_diff(c, w, "obs") < 10 * tol_qpos
    assert max_diff(c, w, "reward") < 10 * tol_qpos
    assert max_diff(c, w, "progress") < 10 * tol_qpos


def test_legged_task_matches_c_mujoco_with_contacts_and_touch_sensors():
    # Small actions: the robot lands and stands on its four feet. (Under full random
    # actions the two engines' float32/float64 contact solutions drift apart by ~7 cm
    # in 25 steps: a legged robot kicking at random is chaotic.)
    c = rollout("mujoco", "go2_walk", 25, action_scale=0.1)
    w = rollout("mujoco_warp", "go2_walk", 25, action_scale=0.1)
    assert c["sensors"].abs().max() > 1.0  # the feet touch the floor: touch sensors read force
    assert max_diff(c, w, "qpos") < 1e-2  # seen: 4e-3
    # The feet carry the same load: summed touch force over the last 10 steps (single
    # contact impulses differ more, seen up to 23 N, as the solvers split them differently).
    load_c, load_w = (r["sensors"][-10:].sum(-1).mean(0) for r in (c, w))
    assert load_c.min() > 50.0  # standing: about the robot's weight (~150 N)
    torch.testing.assert_close(load_w, load_c, rtol=0.1, atol=0.0)


def test_site_jacobian_matches_c_mujoco():
    c = make_env("panda_reach", num_envs=2, seed=1)
    w = make_env("panda_reach", num_envs=2, seed=1, backend="mujoco_warp", device="cpu")
    try:
        for env in (c, w):
            env.step(torch.full((2, env.action_dim), 0.5))
        jc, jw = c.state.site_jacobian(c.task.ee), w.state.site_jacobian(w.task.ee)
        assert jw.shape == jc.shape and jw.dtype == torch.float64
        torch.testing.assert_close(jw, jc, atol=1e-4, rtol=0)
    finally:
        c.close()
        w.close()


def test_ray_tracer_frames_look_like_the_opengl_frames():
    env = make_env("panda_push", num_envs=3, seed=0, backend="mujoco_warp", device="cpu")
    try:
        env.step(torch.zeros(3, env.action_dim))
        ids = torch.tensor([2, 0])
        env.cfg.renderer = "gl"
        gl = env.render(env_ids=ids, width=48, height=40)
        env.cfg.renderer = "engine"
        traced = env.render(env_ids=ids, width=48, height=40)
        assert traced.shape == gl.shape == (2, len(env.camera_names), 40, 48, 3)
        assert traced.dtype == torch.uint8
        # Two different renderers (ray tracer vs rasteriser, other lighting): the same scene
        # from the same cameras, not the same pixels. Mean absolute difference seen: ~10/255.
        assert (traced.float() - gl.float()).abs().mean() < 30
        other_env = traced[[1, 0]]  # the frames belong to their own env
        assert (traced.float() - gl.float()).abs().mean() < (other_env.float()
                                                             - gl.float()).abs().mean() + 5
    finally:
        env.close()


def test_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match="mujoco_warp"):
        make_env("panda_reach", num_envs=1, backend="physx")


def test_missing_engine_names_the_install_command(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "mujoco_warp", None)  # as if not installed
    with pytest.raises(BackendUnavailable, match=r"\.\[gpu\]"):
        make_env("panda_reach", num_envs=1, backend="mujoco_warp", device="cpu")


def test_train_command_selects_the_backend(tmp_path, capsys):
    from embodied.cli import main

    run_dir = tmp_path / "run"
    assert main(["train", "sim=mujoco_warp", "sim.device=cpu", "task=panda_reach",
                 "num_envs=4", "max_iterations=1", "eval.num_envs=2", "eval.video_envs=0",
                 "progress=false", f"run_dir={run_dir}"]) == 0
    assert "PPO on mujoco_warp" in capsys.readouterr().out
    assert (run_dir / "checkpoints").is_dir()
    # a policy carries over between backends: evaluate it on C MuJoCo and on Warp
    for sim in ("mujoco", "mujoco_warp"):
        assert main(["eval", f"run={run_dir}", f"sim={sim}", "sim.device=cpu" if sim != "mujoco"
                     else "sim.device=null", "episodes=2", "video=false", "progress=false"]) == 0
        assert f"sim={sim})" in capsys.readouterr().out


def test_unknown_backend_from_the_command_line_is_a_clear_error(capsys):
    from embodied.cli import main

    assert main(["train", "sim=physx"]) == 2
    err = capsys.readouterr().err
    assert "physx" in err and "Traceback" not in err
