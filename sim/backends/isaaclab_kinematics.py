"""Batched forward kinematics of a compiled MJCF in torch, in MuJoCo's layout.

An engine that keeps its own body order (Isaac Lab / Newton) gives back the
joint state; the positions and orientations of bodies and sites that task code
reads (``xpos``, ``xquat``, ``site_xpos``, ``site_xmat``) and the site Jacobian
are derived from it here, with MuJoCo's conventions (``mj_kinematics``:
hinge and slide joints relative to ``qpos0``, free and ball joints as
quaternions, mocap bodies at their mocap pose), on any torch device.
"""

from __future__ import annotations

import mujoco
import numpy as np
import numpy.typing as npt
import torch

from robots.math import quat_rotate, quat_to_matrix

_J = mujoco.mjtJoint
_FREE, _BALL, _SLIDE, _HINGE = (int(t) for t in (_J.mjJNT_FREE, _J.mjJNT_BALL, _J.mjJNT_SLIDE,
                                                 _J.mjJNT_HINGE))


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton products [..., 4] of quaternions (w, x, y, z)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([aw * bw - ax * bx - ay * by - az * bz,
                        aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx,
                        aw * bz + ax * by - ay * bx + az * bw], dim=-1)


class Kinematics:
    """Forward kinematics and site Jacobians of ``model`` for a batch of joint states."""

    def __init__(self, model: mujoco.MjModel, device: torch.device | str = "cpu"):
        self.model = model
        dev = torch.device(device)

        def t(a: npt.ArrayLike) -> torch.Tensor:
            return torch.as_tensor(np.asarray(a, dtype=np.float64), device=dev)

        self.body_pos, self.body_quat = t(model.body_pos), t(model.body_quat)
        self.jnt_pos, self.jnt_axis = t(model.jnt_pos), t(model.jnt_axis)
        self.qpos0 = t(model.qpos0)
        self.site_pos, self.site_quat = t(model.site_pos), t(model.site_quat)
        self.site_body = torch.as_tensor(model.site_bodyid, dtype=torch.long, device=dev)
        # Per body: its joints, in order (MuJoCo composes them from the parent frame on).
        self.body_joints = [[j for j in range(model.njnt) if model.jnt_bodyid[j] == b]
                            for b in range(model.nbody)]
        # ancestors[b, d]: dof d moves body b (d belongs to b or to one of its ancestors).
        chain = np.zeros((model.nbody, model.nv), dtype=bool)
        for b in range(1, model.nbody):
            a = b
            while a > 0:
                chain[b, model.dof_bodyid == a] = True
                a = int(model.body_parentid[a])
        self.chain = torch.as_tensor(chain, device=dev)
        self.dof_jnt = torch.as_tensor(model.dof_jntid, dtype=torch.long, device=dev)
        self._xaxis: torch.Tensor | None = None
        self._xanchor: torch.Tensor | None = None
        self._xmat: torch.Tensor | None = None

    def forward(self, qpos: torch.Tensor, mocap_pos: torch.Tensor,
                mocap_quat: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Forward kinematics of ``qpos`` [B, nq] and mocap positions [B, nmocap, 3].

        Returns ``(xpos [B, nbody, 3], xquat [B, nbody, 4], site_xpos [B, nsite, 3], site_xmat [B,
        nsite, 9])``; mocap orientations are the model's unless given. Also keeps the joint axes and
        anchors for :meth:`site_jacobian`.
        """
        m, n = self.model, qpos.shape[0]
        dtype, dev = qpos.dtype, qpos.device
        xpos = torch.zeros(n, m.nbody, 3, dtype=dtype, device=dev)
        xquat = torch.zeros(n, m.nbody, 4, dtype=dtype, device=dev)
        xquat[:, 0, 0] = 1.0
        xaxis = torch.zeros(n, m.njnt, 3, dtype=dtype, device=dev)
        xanchor = torch.zeros(n, m.njnt, 3, dtype=dtype, device=dev)
        for b in range(1, m.nbody):
            mocap = int(m.body_mocapid[b])
            if mocap >= 0:
                xpos[:, b] = mocap_pos[:, mocap]
                xquat[:, b] = (mocap_quat[:, mocap] if mocap_quat is not None else
                               torch.as_tensor(m.body_quat[b], dtype=dtype, device=dev))
                continue
            joints = self.body_joints[b]
            if joints and int(m.jnt_type[joints[0]]) == _FREE:
                adr = int(m.jnt_qposadr[joints[0]])
                pos, quat = qpos[:, adr:adr + 3], qpos[:, adr + 3:adr + 7]
                quat = quat / quat.norm(dim=1, keepdim=True)
                xpos[:, b], xquat[:, b] = pos, quat
                xanchor[:, joints[0]] = pos
                xaxis[:, joints[0], 2] = 1.0
                continue
            p = int(m.body_parentid[b])
            pquat = xquat[:, p]
            pos = xpos[:, p] + quat_rotate(pquat, self.body_pos[b].expand(n, 3))
            quat = quat_mul(pquat, self.body_quat[b].expand(n, 4))
            for j in joints:
                kind, adr = int(m.jnt_type[j]), int(m.jnt_qposadr[j])
                anchor = quat_rotate(quat, self.jnt_pos[j].expand(n, 3)) + pos
                axis = quat_rotate(quat, self.jnt_axis[j].expand(n, 3))
                xanchor[:, j], xaxis[:, j] = anchor, axis
                if kind == _SLIDE:
                    pos = pos + axis * (qpos[:, adr] - self.qpos0[adr])[:, None]
                    continue
                if kind == _HINGE:
                    half = 0.5 * (qpos[:, adr] - self.qpos0[adr])[:, None]
                    local = torch.cat([torch.cos(half), torch.sin(half) * self.jnt_axis[j]], 1)
                else:  # ball: a quaternion in the body frame
                    local = qpos[:, adr:adr + 4] / qpos[:, adr:adr + 4].norm(dim=1, keepdim=True)
                quat = quat_mul(quat, local)
                pos = anchor - quat_rotate(quat, self.jnt_pos[j].expand(n, 3))
            xpos[:, b] = pos
            xquat[:, b] = quat / quat.norm(dim=1, keepdim=True)
        xmat = quat_to_matrix(xquat)
        sb = self.site_body
        site_xpos = xpos[:, sb] + (xmat[:, sb] @ self.site_pos[None, :, :, None]).squeeze(-1)
        site_xmat = xmat[:, sb] @ quat_to_matrix(self.site_quat)[None]
        self._xaxis, self._xanchor, self._xmat = xaxis, xanchor, xmat
        return xpos, xquat, site_xpos, site_xmat.reshape(n, m.nsite, 9)

    def jacobian(self, point: torch.Tensor, body: int) -> torch.Tensor:
        """Translational Jacobian [B, 3, nv] of world points ``point`` [B, 3] fixed to ``body``.

        Evaluated at the state of the last :meth:`forward`.
        """
        xaxis, xanchor, xmat = self._xaxis, self._xanchor, self._xmat
        if xaxis is None or xanchor is None or xmat is None:
            raise RuntimeError("Kinematics.jacobian needs a forward() first")
        m, n = self.model, point.shape[0]
        jac = torch.zeros(n, 3, m.nv, dtype=point.dtype, device=point.device)
        for d in torch.nonzero(self.chain[body]).flatten().tolist():
            j = int(m.dof_jntid[d])
            kind, k = int(m.jnt_type[j]), d - int(m.jnt_dofadr[j])
            if kind == _SLIDE:
                jac[:, :, d] = xaxis[:, j]
            elif kind == _HINGE:
                jac[:, :, d] = torch.linalg.cross(xaxis[:, j], point - xanchor[:, j])
            elif kind == _FREE and k < 3:
                jac[:, k, d] = 1.0
            else:  # rotational dofs of free and ball joints: about the body's own axes
                jb = int(m.jnt_bodyid[j])
                axis = xmat[:, jb, :, k - 3 if kind == _FREE else k]
                jac[:, :, d] = torch.linalg.cross(axis, point - xanchor[:, j])
        return jac
