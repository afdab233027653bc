"""The Isaac Lab backend's batched forward kinematics against C MuJoCo (runs in the main env)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from robots import load_robot
from sim.backends.isaaclab_kinematics import Kinematics
from sim.env import compile_task_model
from sim.tasks import get_task_class, task_names


def random_states(model: mujoco.MjModel, n: int, rng: np.random.Generator) -> list[mujoco.MjData]:
    """``n`` states with random joint positions (unit quaternions for free joints) and mocap
    positions, kinematics computed by MuJoCo."""
    datas = []
    for _ in range(n):
        data = mujoco.MjData(model)
        data.qpos[:] = model.qpos0 + rng.normal(0.0, 0.5, model.nq)
        for j in range(model.njnt):
            if model.jnt_type[j] in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL):
                adr = model.jnt_qposadr[j] + (3 if model.jnt_type[j] == 0 else 0)
                quat = rng.normal(size=4)
                data.qpos[adr:adr + 4] = quat / np.linalg.norm(quat)
        data.mocap_pos[:] = rng.normal(size=(model.nmocap, 3))
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        datas.append(data)
    return datas


@pytest.mark.parametrize("task", task_names())
def test_forward_kinematics_and_site_jacobians_match_mujoco(task):
    cls = get_task_class(task)
    model = compile_task_model(cls(load_robot(cls.robot_name)))
    datas = random_states(model, 3, np.random.default_rng(0))
    qpos = torch.tensor(np.stack([d.qpos for d in datas]))
    mocap = torch.tensor(np.stack([d.mocap_pos for d in datas]))
    kin = Kinematics(model)
    xpos, xquat, site_xpos, site_xmat = kin.forward(qpos, mocap)
    for b, data in enumerate(datas):
        np.testing.assert_allclose(xpos[b].numpy(), data.xpos, atol=1e-12)
        # q and -q are the same rotation
        sign = np.sign((xquat[b].numpy() * data.xquat).sum(1, keepdims=True))
        np.testing.assert_allclose(xquat[b].numpy() * sign, data.xquat, atol=1e-12)
        np.testing.assert_allclose(site_xpos[b].numpy(), data.site_xpos, atol=1e-12)
        np.testing.assert_allclose(site_xmat[b].numpy(), data.site_xmat, atol=1e-12)
    for site in range(model.nsite):
        jac = kin.jacobian(site_xpos[:, site], int(model.site_bodyid[site]))
        for b, data in enumerate(datas):
            ref = np.zeros((3, model.nv))
            mujoco.mj_jacSite(model, data, ref, None, site)
            np.testing.assert_allclose(jac[b].numpy(), ref, atol=1e-12)


def test_jacobian_needs_a_forward_first():
    cls = get_task_class("panda_reach")
    kin = Kinematics(compile_task_model(cls(load_robot(cls.robot_name))))
    with pytest.raises(RuntimeError, match="forward"):
        kin.jacobian(torch.zeros(1, 3, dtype=torch.float64), 1)
