"""Forward kinematics of a fixed-base robot in torch, from its MJCF body tree.

The chain from the world to one site (bodies' ``pos`` / ``quat``, hinge and slide
joints) is read once with :func:`robots.mjcf.read_mjcf`; positions are then batched
torch operations, the same as MuJoCo's ``site_xpos`` after ``mj_kinematics`` for a
robot whose base is welded to the world.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

import torch

from robots.math import quat_to_matrix
from robots.mjcf import Mjcf, read_mjcf
from robots.spec import RobotSpec


def _axis_angle_matrix(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotation matrices [B, 3, 3] by ``angle`` [B] about the unit ``axis`` [3]."""
    half = 0.5 * angle
    xyz = torch.sin(half)[:, None] * axis
    return quat_to_matrix(torch.cat([torch.cos(half)[:, None], xyz], dim=1))


class SiteKinematics:
    """Position of one site as a function of the joint positions, for a batch of poses.

    ``joint_names`` is the column order of ``q``; every joint on the chain from the
    world to the site must be among them (a floating base is not a fixed chain).
    """

    def __init__(self, mjcf: Mjcf, site: str, joint_names: Sequence[str],
                 dtype: torch.dtype = torch.float64):
        if site not in mjcf.sites:
            raise KeyError(f"{mjcf.path.name} has no site '{site}'")
        self.site, self.dtype = site, dtype
        chain = []
        body = mjcf.bodies[mjcf.sites[site].body]
        while body.parent is not None:
            chain.append(body)
            body = mjcf.bodies[body.parent]
        columns = {name: i for i, name in enumerate(joint_names)}
        # per body: (pos [3], rotation [3, 3], [(kind, column, anchor [3], unit axis [3])])
        self.links = []
        for body in reversed(chain):
            if body.orientation != "quat":
                raise ValueError(f"{mjcf.path.name}: body '{body.name}' is oriented by "
                                 f"'{body.orientation}'; torch kinematics reads 'quat' only")
            quat = torch.tensor(body.quat, dtype=dtype)
            rot = quat_to_matrix((quat / quat.norm())[None])[0]
            joints = []
            for joint in body.joints:
                if joint.type not in ("hinge", "slide") or joint.name not in columns:
                    raise ValueError(f"{mjcf.path.name}: joint '{joint.name or '?'}' "
                                     f"({joint.type}) on the chain to site '{site}' is not one "
                                     f"of the given hinge/slide joints {list(joint_names)}")
                axis = torch.tensor(joint.axis, dtype=dtype)
                anchor = torch.tensor(joint.pos, dtype=dtype)
                joints.append((joint.type, columns[joint.name], anchor, axis / axis.norm()))
            self.links.append((torch.tensor(body.pos, dtype=dtype), rot, joints))
        if mjcf.sites[site].in_frame:
            raise ValueError(f"{mjcf.path.name}: site '{site}' sits in a <frame> element; "
                             f"torch kinematics reads sites placed directly in a body")
        self.offset = torch.tensor(mjcf.sites[site].pos, dtype=dtype)

    @classmethod
    def from_robot(cls, robot: RobotSpec, site_key: str = "ee") -> SiteKinematics:
        """Kinematics of the site robot.yaml names under ``sites.<site_key>``, over its joints."""
        return cls(read_mjcf(robot.mjcf_path), str(robot.sites[site_key]), robot.joint_names)

    def position(self, q: torch.Tensor) -> torch.Tensor:
        """World positions [B, 3] of the site at joint positions ``q`` [B, n_joints]."""
        return self.pose(q)[0]

    def pose(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """World positions [B, 3] and orientations [B, 3, 3] of the site at ``q``."""
        pos, rot, _ = self._chain(q, jacobian=False)
        return pos, rot

    def jacobian(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Site position [B, 3], orientation [B, 3, 3] and Jacobian [B, 6, n_joints] at ``q``.

        Jacobian rows 0-2: the site's linear velocity, rows 3-5: its angular velocity
        (world frame), per unit joint velocity (MuJoCo's ``mj_jacSite``).
        """
        return self._chain(q, jacobian=True)

    @overload
    def _chain(self, q: torch.Tensor, jacobian: Literal[False]
               ) -> tuple[torch.Tensor, torch.Tensor, None]: ...

    @overload
    def _chain(self, q: torch.Tensor, jacobian: Literal[True]
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...

    def _chain(self, q: torch.Tensor, jacobian: bool
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        q = q.to(self.dtype)
        batch = q.shape[0]
        pos = torch.zeros(batch, 3, dtype=self.dtype)
        rot = torch.eye(3, dtype=self.dtype).expand(batch, 3, 3)
        axes = []  # (kind, column, world anchor [B, 3], world axis [B, 3])
        for offset, body_rot, joints in self.links:
            pos = pos + rot @ offset
            rot = rot @ body_rot
            for kind, column, anchor, axis in joints:
                world_axis = rot @ axis
                if kind == "hinge":
                    pos = pos + rot @ anchor
                    if jacobian:
                        axes.append((kind, column, pos, world_axis))
                    rot = rot @ _axis_angle_matrix(axis, q[:, column])
                    pos = pos - rot @ anchor
                else:
                    if jacobian:
                        axes.append((kind, column, pos, world_axis))
                    pos = pos + world_axis * q[:, column:column + 1]
        site = pos + rot @ self.offset
        if not jacobian:
            return site, rot, None
        jac = torch.zeros(batch, 6, q.shape[1], dtype=self.dtype)
        for kind, column, anchor, axis in axes:
            if kind == "hinge":
                jac[:, :3, column] += torch.linalg.cross(axis, site - anchor, dim=1)
                jac[:, 3:, column] += axis
            else:
                jac[:, :3, column] += axis
        return site, rot, jac
