"""Name -> index lookups of a compiled MJCF, shared by every backend's SimState."""

from __future__ import annotations

import mujoco


class ModelLookup:
    """The name-resolving part of :class:`sim.protocol.SimState` over ``self.model``."""

    model: mujoco.MjModel

    def _id(self, kind: mujoco.mjtObj, name: str) -> int:
        i = mujoco.mj_name2id(self.model, kind, name)
        if i < 0:
            raise KeyError(f"no {kind.name[6:].lower()} named '{name}' in the model")
        return i

    def body_id(self, name: str) -> int:
        """Id of body ``name``; raises ``KeyError`` if the model has none."""
        return self._id(mujoco.mjtObj.mjOBJ_BODY, name)

    def site_id(self, name: str) -> int:
        """Id of site ``name``; raises ``KeyError`` if the model has none."""
        return self._id(mujoco.mjtObj.mjOBJ_SITE, name)

    def sensor_slice(self, name: str) -> slice:
        """Columns of sensor ``name`` in ``sensordata``; raises ``KeyError`` if missing."""
        i = self._id(mujoco.mjtObj.mjOBJ_SENSOR, name)
        adr = int(self.model.sensor_adr[i])
        return slice(adr, adr + int(self.model.sensor_dim[i]))

    def joint_qpos_slice(self, name: str) -> slice:
        """Columns of joint ``name`` in ``qpos``; raises ``KeyError`` if missing.

        7 for a free joint, 4 for a ball joint, else 1.
        """
        j = self._id(mujoco.mjtObj.mjOBJ_JOINT, name)
        adr = int(self.model.jnt_qposadr[j])
        return slice(adr, adr + {0: 7, 1: 4}.get(int(self.model.jnt_type[j]), 1))

    def joint_dof_slice(self, name: str) -> slice:
        """Columns of joint ``name`` in ``qvel``; raises ``KeyError`` if missing.

        6 for a free joint, 3 for a ball joint, else 1.
        """
        j = self._id(mujoco.mjtObj.mjOBJ_JOINT, name)
        adr = int(self.model.jnt_dofadr[j])
        return slice(adr, adr + {0: 6, 1: 3}.get(int(self.model.jnt_type[j]), 1))
