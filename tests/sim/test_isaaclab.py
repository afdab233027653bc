"""sim=isaaclab: the worker boundary, the missing-environment error, and parity with C MuJoCo.

The parity test runs Isaac Lab 3 (kit-less, Newton physics with the MuJoCo-Warp
solver, on the CPU) in its worker process; it needs ``.venv-isaaclab``
(``scripts/isaaclab_env.sh``) and skips, saying so, without it.
"""

from __future__ import annotations

import pytest
import torch

from sim import BackendUnavailable, DomainRandomization, TaskNotSupported, make_env
from sim.backends import isaaclab as isaaclab_backend
from sim.backends.isaaclab_wire import decode, encode
from sim.experts import make_expert

NUM_ENVS, STEPS, PUSH_STEPS = 4, 50, 90

needs_isaaclab = pytest.mark.skipif(
    not (isaaclab_backend.VENV / "bin" / "python").exists()
    or not any(isaaclab_backend.VENV.glob(".installed-*")),
    reason="Isaac Lab environment .venv-isaaclab not installed (scripts/isaaclab_env.sh)")


def test_wire_round_trip_keeps_tensors_and_nesting():
    message = ("step", {"obs": torch.randn(3, 5), "ids": torch.tensor([0, 2]),
                        "done": torch.tensor([True, False]), "frames": torch.zeros(
                            1, 2, 4, 4, 3, dtype=torch.uint8),
                        "terms": {"distance": 0.5}, "names": ["a", "b"], "none": None})
    cmd, back = decode(encode(message))
    assert cmd == "step"
    for key in ("obs", "ids", "done", "frames"):
        assert back[key].dtype == message[1][key].dtype
        assert torch.equal(back[key], message[1][key])
    assert back["terms"] == {"distance": 0.5} and back["names"] == ["a", "b"]
    assert back["none"] is None


def test_missing_environment_names_the_install_command(tmp_path):
    with pytest.raises(BackendUnavailable, match=r"scripts/isaaclab_env\.sh"):
        isaaclab_backend.IsaacLabEnv("panda_reach", 2, venv=tmp_path / ".venv-isaaclab")


def smooth_actions(steps: int, num_envs: int, action_dim: int, seed: int) -> torch.Tensor:
    """A seeded random walk of actions (0.01 per step): joint targets move slowly enough
    that no actuator reaches its effort limit (see the saturation note in the README)."""
    gen = torch.Generator().manual_seed(seed)
    return (0.01 * torch.randn(steps, num_envs, action_dim, generator=gen)).cumsum(0).clamp(-1, 1)


@needs_isaaclab
def test_panda_reach_matches_c_mujoco():
    settings = {"seed": 0, "obs_noise": False,
                "randomization": DomainRandomization(enabled=False)}
    ref = make_env("panda_reach", NUM_ENVS, **settings)
    isaac = make_env("panda_reach", NUM_ENVS, backend="isaaclab", device="cpu", **settings)
    try:
        assert isaac.obs_dim == ref.obs_dim and isaac.action_dim == ref.action_dim
        assert torch.equal(ref.reset(seed=0), isaac.reset(seed=0))
        actions = smooth_actions(STEPS, NUM_ENVS, ref.action_dim, seed=1)
        limit = torch.from_numpy(ref.model.actuator_forcerange[:, 1])
        worst = {"qpos": 0.0, "ee": 0.0, "obs": 0.0, "reward": 0.0, "force": 0.0}
        for t in range(STEPS):
            obs_r, rew_r, *_ = ref.step(actions[t])
            obs_i, rew_i, *_ = isaac.step(actions[t])
            state = isaac.state("qpos", "site_xpos")
            worst["qpos"] = max(worst["qpos"], float((ref.state.qpos - state["qpos"]).abs().max()))
            worst["ee"] = max(worst["ee"], float((ref.state.site_xpos - state["site_xpos"]
                                                  ).norm(dim=-1).max()))
            worst["obs"] = max(worst["obs"], float((obs_r - obs_i).abs().max()))
            worst["reward"] = max(worst["reward"], float((rew_r - rew_i).abs().max()))
            force = torch.from_numpy(ref.batch.bind("actuator_force").copy()).abs()
            worst["force"] = max(worst["force"], float((force / limit).max()))
        # The regime the tolerances are for: no actuator at its effort limit.
        assert worst["force"] < 0.99, worst
        # Isaac Lab/Newton computes in float32, C MuJoCo in float64 (seen: qpos 5e-6 rad,
        # ee 3e-7 m, reward 2e-7).
        assert worst["qpos"] < 1e-4, worst
        assert worst["ee"] < 1e-4, worst
        assert worst["obs"] < 1e-3, worst
        assert worst["reward"] < 1e-3, worst
        assert isaac.task.success().shape == (NUM_ENVS,)
        # Camera frames come from the worker's CPU renderer of the same MJCF.
        ids = torch.tensor([0, 3])
        frames_r = ref.render(["front", "wrist"], env_ids=ids, width=32, height=32)
        frames_i = isaac.render(["front", "wrist"], env_ids=ids, width=32, height=32)
        assert frames_i.shape == frames_r.shape == (2, 2, 32, 32, 3)
        assert (frames_i.float() - frames_r.float()).abs().mean() < 2.0
    finally:
        ref.close()
        isaac.close()
    assert isaac._proc.poll() is not None  # the worker process has exited
    with pytest.raises(isaaclab_backend.IsaacLabWorkerError, match="closed"):
        isaac.step(actions[0])


@needs_isaaclab
def test_panda_push_expert_moves_the_cube_as_in_c_mujoco():
    """Contacts: the scripted expert (computed on the C MuJoCo env) pushes the cube; the
    same actions go to Isaac Lab. The free cube is an Isaac Lab rigid object."""
    settings = {"seed": 0, "obs_noise": False,
                "randomization": DomainRandomization(enabled=False)}
    ref = make_env("panda_push", NUM_ENVS, **settings)
    isaac = make_env("panda_push", NUM_ENVS, backend="isaaclab", device="cpu", **settings)
    try:
        ref.reset(seed=0)
        isaac.reset(seed=0)
        expert = make_expert(ref)
        cube = ref.state.joint_qpos_slice("cube_joint")
        worst_cube, worst_progress, pushed = 0.0, 0.0, 0.0
        for _ in range(PUSH_STEPS):
            actions = expert()
            _, _, _, _, info_r = ref.step(actions)
            _, _, _, _, info_i = isaac.step(actions)
            qpos = isaac.state("qpos")["qpos"]
            worst_cube = max(worst_cube, float((ref.state.qpos[:, cube][:, :3]
                                                - qpos[:, cube][:, :3]).norm(dim=1).max()))
            worst_progress = max(worst_progress, float(
                (info_r["progress"] - info_i["progress"]).abs().max()))
            pushed = max(pushed, float(info_r["progress"].max()))
        assert pushed > 0.3  # the expert did push the cube within the horizon
        # Contacts (cube on the table, fingers on the cube); seen: 3 mm, 0.01.
        assert worst_cube < 0.01, (worst_cube, worst_progress)
        assert worst_progress < 0.05, (worst_cube, worst_progress)
    finally:
        ref.close()
        isaac.close()


@needs_isaaclab
def test_unsupported_task_says_what_is_missing(capsys):
    with pytest.raises(TaskNotSupported, match="floating bases"):  # before a worker starts
        make_env("go2_walk", 2, backend="isaaclab", device="cpu")
    from embodied.cli import main

    assert main(["train", "sim=isaaclab", "task=go2_walk", "max_iterations=1"]) == 2
    err = capsys.readouterr().err
    assert "floating bases" in err and "Traceback" not in err
