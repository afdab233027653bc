"""sim=isaaclab: the worker boundary, the missing-environment error, and parity with C MuJoCo.

Parity: the Panda tasks, the Go2 standing and trotting under a trained policy, and the
randomised friction, masses and PD gains read back from Isaac Lab. The parity tests run
Isaac Lab 3 (kit-less, Newton physics with the MuJoCo-Warp
solver, on the CPU) in its worker process; it needs ``.venv-isaaclab``
(``scripts/isaaclab_env.sh``) and skips, saying so, without it.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import pytest
import torch

from robots.math import quat_rotate_inverse
from sim import BackendUnavailable, DomainRandomization, TaskNotSupported, make_env
from sim.backends import isaaclab as isaaclab_backend
from sim.backends.isaaclab_physics import check_supported
from sim.backends.isaaclab_wire import decode, encode
from sim.experts import make_expert

NUM_ENVS, STEPS, PUSH_STEPS = 4, 50, 90
STAND_STEPS, TROT_STEPS = 50, 100  # control steps of 0.02 s
GO2_POLICY = Path(__file__).resolve().parents[2] / "assets" / "policies" / "go2_walk" / "policy.pt"

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
        assert not hasattr(isaac.task, "set_command")  # no velocity-tracking evaluation
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
    same actions go to Isaac Lab. The free cube is an Isaac Lab rigid object. Domain
    randomisation is on: the same seed draws the same friction, masses, PD gains and
    action latencies on both."""
    settings = {"seed": 0, "obs_noise": False, "randomization": DomainRandomization()}
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
        # Contacts (cube on the table, fingers on the cube); seen: 2.2 mm, 0.002 (randomised;
        # 3.3 mm, 0.014 without randomisation).
        assert worst_cube < 0.01, (worst_cube, worst_progress)
        assert worst_progress < 0.05, (worst_cube, worst_progress)
    finally:
        ref.close()
        isaac.close()


def test_unsupported_model_says_what_is_missing():
    """A ball joint has no mapping: refused (in the project's environment, no worker)."""
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint type="ball"/><geom size="0.1"/></body>'
        '</worldbody></mujoco>')
    with pytest.raises(TaskNotSupported, match="ball joints"):
        check_supported(model, "ball_task")


def _angle(q1: torch.Tensor, q2: torch.Tensor) -> torch.Tensor:
    """Rotation angles [B] between unit quaternions (w, x, y, z); exact for small angles."""
    chord = torch.minimum((q1 - q2).norm(dim=-1), (q1 + q2).norm(dim=-1))
    return 4 * torch.asin((chord / 2).clamp(max=1.0))


def _go2_gaps(ref, isaac) -> dict[str, float]:
    """Base height, orientation and summed foot forces of C MuJoCo against Isaac Lab."""
    state = isaac.state("qpos", "sensordata")
    feet = ref.task.foot_touch
    return {"height": float((ref.state.qpos[:, 2] - state["qpos"][:, 2]).abs().max()),
            "orientation": float(_angle(ref.state.qpos[:, 3:7], state["qpos"][:, 3:7]).max()),
            "foot_force": float((ref.state.sensordata[:, feet].sum(1)
                                 - state["sensordata"][:, feet].sum(1)).abs().max())}


@needs_isaaclab
def test_go2_randomised_stands_and_trots_as_in_c_mujoco():
    """The Go2 (floating base, foot touch sensors) with domain randomisation on.

    The friction, masses and PD gains read back from Isaac Lab equal C MuJoCo's draws for the
    same seed; standing (zero command, zero actions, one push) and then trotting under the
    shipped policy, each backend closing its own loop, keep base height, orientation and the
    summed foot forces together.
    """
    settings = {"seed": 0, "obs_noise": False, "randomization": DomainRandomization()}
    ref = make_env("go2_walk", NUM_ENVS, **settings)
    isaac = make_env("go2_walk", NUM_ENVS, backend="isaaclab", device="cpu", **settings)
    try:
        assert torch.equal(ref.reset(seed=0), isaac.reset(seed=0))
        # -- randomised parameters: Isaac Lab holds what C MuJoCo drew
        got = isaac.parameters()
        batch, m = ref.physics.batch, ref.model
        colliding = torch.from_numpy((m.geom_contype | m.geom_conaffinity) > 0)
        friction = got["geom_friction"][:, colliding]
        assert not friction.isnan().any()  # every colliding geom has its Isaac Lab shape
        torch.testing.assert_close(friction, torch.from_numpy(
            batch.expand("geom_friction")[:, colliding.numpy()]), rtol=1e-6, atol=0)
        torch.testing.assert_close(got["body_mass"][:, 1:], torch.from_numpy(
            batch.expand("body_mass")[:, 1:]), rtol=1e-6, atol=0)
        torch.testing.assert_close(got["actuator_kp"], torch.from_numpy(
            batch.expand("actuator_gainprm")[:, :, 0]), rtol=1e-6, atol=0)
        torch.testing.assert_close(got["actuator_kd"], torch.from_numpy(
            -batch.expand("actuator_biasprm")[:, :, 2]), rtol=1e-6, atol=0)
        assert got["actuator_kp"][:, 0].std() > 0.1  # the envs did get different gains

        # -- standing (pushes off, through the proxy's view of the task)
        for env in (ref, isaac):
            env.task.set_command(torch.arange(NUM_ENVS), (0.0, 0.0, 0.0))
            env.task.push_timer[:] = float("inf")
        assert torch.equal(isaac.call("task", method="push_timer"), ref.task.push_timer)
        zeros = torch.zeros(NUM_ENVS, 12)
        stand = {"height": 0.0, "orientation": 0.0, "foot_force": 0.0}
        pushed_gap = 0.0
        for step in range(STAND_STEPS):
            if step == STAND_STEPS // 2:  # a push (a base velocity kick the task writes) now
                for env in (ref, isaac):
                    env.task.push_timer[:] = 0.0
                before = ref.state.qpos[:, :2].clone()
            ref.step(zeros)
            isaac.step(zeros)
            stand = {k: max(v, _go2_gaps(ref, isaac)[k]) for k, v in stand.items()}
            if step >= STAND_STEPS // 2:  # Isaac Lab must have been given the kick
                pushed_gap = max(pushed_gap, float(
                    (ref.state.qpos[:, :2] - isaac.state("qpos")["qpos"][:, :2]).abs().max()))
        assert (ref.state.qpos[:, :2] - before).norm(dim=1).max() > 0.02  # the kicks moved it
        assert pushed_gap < 1e-4, pushed_gap
        weight = float(m.body_subtreemass[1] * 9.81)
        assert (ref.state.sensordata[:, ref.task.foot_touch].sum(1) > 0.5 * weight).all()

        # -- trotting: 0.5 m/s forward, the trained policy on each backend's own observations
        policy = torch.jit.load(str(GO2_POLICY))
        for env in (ref, isaac):
            env.task.set_command(torch.arange(NUM_ENVS), (0.5, 0.0, 0.0))
        obs_r, obs_i = ref.observe(noise=False), isaac.observe(noise=False)
        start = ref.state.qpos[:, :3].clone()
        trot = {"height": 0.0, "orientation": 0.0, "foot_force": 0.0}
        with torch.no_grad():
            for _ in range(TROT_STEPS):
                obs_r, _, term_r, _, _ = ref.step(policy(obs_r))
                obs_i, _, term_i, _, _ = isaac.step(policy(obs_i))
                assert not (term_r | term_i).any()
                trot = {k: max(v, _go2_gaps(ref, isaac)[k]) for k, v in trot.items()}
        torch.testing.assert_close(isaac.task.base_pos, isaac.state("qpos")["qpos"][:, :3])
        forward = quat_rotate_inverse(ref.state.qpos[:, 3:7], ref.state.qpos[:, :3] - start)[:, 0]
        assert (forward > 0.5).all(), forward  # it trotted forward (about 0.9 m in 2 s)
        # Isaac Lab in float32 against C MuJoCo in float64; seen standing 2.8e-7 m, 4.4e-6 rad,
        # 0.011 N; trotting 8.4e-7 m, 9.6e-6 rad, 0.017 N (summed foot forces about 150 N).
        for gaps in (stand, trot):
            assert gaps["height"] < 1e-4, (stand, trot)
            assert gaps["orientation"] < 1e-3, (stand, trot)
            assert gaps["foot_force"] < 1.0, (stand, trot)
    finally:
        ref.close()
        isaac.close()
