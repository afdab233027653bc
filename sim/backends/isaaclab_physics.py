"""Isaac Lab 3 (kit-less, Newton physics, MuJoCo-Warp solver) as a :class:`sim.physics.Physics`.

Runs inside the Isaac Lab environment (``scripts/isaaclab_env.sh``), normally in
the worker process of :mod:`sim.backends.isaaclab_worker`.

What comes from where:

* Dynamics: Isaac Lab's ``InteractiveScene`` with the task scene's USD
  (:mod:`sim.backends.isaaclab_usd`) as an ``Articulation``, stepped by
  Newton's MuJoCo-Warp solver with our time step, integrator, cone, impratio
  and solver iterations; ``decimation`` physics steps per control step.
* Actuators: Isaac Lab implicit PD actuators, one per actuated joint, with kp,
  kd, effort limits and target ranges read from the compiled model's position
  actuators (which ``robots/build.py`` made from robot.yaml).
* State in MuJoCo's layout: ``qpos``/``qvel`` are gathered by joint name from
  the articulation's joint state; bodies, sites and the site Jacobian follow
  from them by batched forward kinematics of the same MJCF
  (:mod:`sim.backends.isaaclab_kinematics`). That keeps one source of truth
  (the joint state) and works right after a reset, before any physics step.
  Mocap bodies (visual markers) live on this side only.
* Free joints: loose objects (free bodies without children, the cubes) are
  Isaac Lab rigid objects of the same USD; a floating base (a free body with
  children, the Go2's trunk) is the articulation's root. Either way the
  root link's pose and velocity map to the free joint's qpos (w, x, y, z
  quaternion; Isaac Lab's is x, y, z, w) and qvel (linear velocity of the
  body origin in the world frame, angular velocity in the body frame). State
  the task writes between steps (a push on the base velocity) is written back
  before the next physics step.
* Touch sensors: one Isaac Lab contact sensor on shape level, sensing the
  collision geoms of each touch site's body whose centre lies inside the
  site; a touch reading is the norm of the net normal contact force on those
  shapes in the last physics step (MuJoCo sums the normal forces of the
  contacts inside the site; on flat ground the two agree). Right after a
  reset, before any physics step, touch readings are 0.
* Randomisation (:meth:`IsaacLabPhysics.scale_parameters`): the factors the
  env drew (the same seeded draws as on every backend) go through Isaac Lab's
  setters: friction into the Newton model's shape materials of the env (all
  shapes, the floor included, as C MuJoCo scales every geom; then
  ``add_model_change(SHAPE_PROPERTIES)`` as Isaac Lab's
  ``randomize_rigid_body_material`` does), masses through ``set_masses_index``
  (inertia kept, as C MuJoCo scales ``body_mass`` only) and PD gains through
  ``write_joint_stiffness/damping_to_sim_index`` (``randomize_actuator_gains``'
  path for implicit actuators). :meth:`IsaacLabPhysics.parameters` reads them
  back in MuJoCo's layout.

Not supported (clear errors): ball joints, sensors other than touch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
import torch

from robots.math import quat_rotate, quat_rotate_inverse
from sim.backends import TaskNotSupported
from sim.backends.isaaclab_kinematics import Kinematics
from sim.backends.model_lookup import ModelLookup
from sim.env import EnvConfig
from sim.task import Task

_G = mujoco.mjtGeom
_TOUCH = int(mujoco.mjtSensor.mjSENS_TOUCH)
_FREE = int(mujoco.mjtJoint.mjJNT_FREE)
_BALL = int(mujoco.mjtJoint.mjJNT_BALL)
_INTEGRATORS = {int(mujoco.mjtIntegrator.mjINT_EULER): "euler",
                int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST): "implicitfast",
                int(mujoco.mjtIntegrator.mjINT_RK4): "rk4"}
_CONES = {int(mujoco.mjtCone.mjCONE_PYRAMIDAL): "pyramidal",
          int(mujoco.mjtCone.mjCONE_ELLIPTIC): "elliptic"}


def free_bodies(model: mujoco.MjModel) -> list[int]:
    """Bodies with a free joint: loose objects and floating bases."""
    return [int(model.jnt_bodyid[j]) for j in range(model.njnt)
            if int(model.jnt_type[j]) == _FREE]


def loose_bodies(model: mujoco.MjModel) -> list[int]:
    """Free bodies without child bodies (cubes), simulated as Isaac Lab rigid objects."""
    return [b for b in free_bodies(model) if not (model.body_parentid[1:] == b).any()]


def floating_bases(model: mujoco.MjModel) -> list[int]:
    """Free bodies with child bodies: roots of floating-base articulations (the Go2's base)."""
    return [b for b in free_bodies(model) if (model.body_parentid[1:] == b).any()]


def check_supported(model: mujoco.MjModel, task_name: str) -> None:
    """Raise :class:`TaskNotSupported` if ``model`` needs what this backend does not map yet."""
    ball = [model.joint(j).name for j in range(model.njnt) if int(model.jnt_type[j]) == _BALL]
    nested = [model.body(b).name for b in free_bodies(model) if int(model.body_parentid[b]) != 0]
    if ball or nested or len(floating_bases(model)) > 1:
        raise TaskNotSupported(
            f"task '{task_name}': ball joints {ball} / free joints below other bodies {nested} / "
            f"more than one floating base ({len(floating_bases(model))}) are not mapped to Isaac "
            "Lab; supported: one robot (fixed or floating base) with hinge/slide joints and loose "
            "rigid objects. Use sim=mujoco for this task.")
    other = [model.sensor(i).name for i in range(model.nsensor)
             if int(model.sensor_type[i]) != _TOUCH]
    if other:
        raise TaskNotSupported(
            f"task '{task_name}': MuJoCo sensors {other} have no Isaac Lab mapping (touch "
            "sensors do). Use sim=mujoco for this task.")


def _inside_site(model: mujoco.MjModel, site: int, point: np.ndarray) -> bool:
    """Whether ``point`` (in the site's body frame) lies inside the site's volume."""
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, model.site_quat[site])
    p = rot.reshape(3, 3).T @ (point - model.site_pos[site])
    size, kind = model.site_size[site], int(model.site_type[site])
    radial = float(np.hypot(p[0], p[1]))
    if kind == _G.mjGEOM_SPHERE:
        return float(np.linalg.norm(p)) <= size[0]
    if kind == _G.mjGEOM_CAPSULE:
        return float(np.linalg.norm([radial, max(abs(p[2]) - size[1], 0.0)])) <= size[0]
    if kind == _G.mjGEOM_CYLINDER:
        return radial <= size[0] and abs(p[2]) <= size[1]
    if kind == _G.mjGEOM_ELLIPSOID:
        return float(((p / size) ** 2).sum()) <= 1.0
    return bool((np.abs(p) <= size).all())  # box


def touch_geoms(model: mujoco.MjModel) -> dict[int, list[int]]:
    """Per touch sensor: the colliding geoms of its site's body with their centre in the site.

    These are the shapes whose contacts the sensor reads on Isaac Lab.

    Raises:
        TaskNotSupported: a touch site covers no colliding geom of its body.
    """
    out = {}
    for i in range(model.nsensor):
        if int(model.sensor_type[i]) != _TOUCH:
            continue
        site = int(model.sensor_objid[i])
        body = int(model.site_bodyid[site])
        geoms = [g for g in range(model.body_geomadr[body],
                                  model.body_geomadr[body] + model.body_geomnum[body])
                 if (model.geom_contype[g] or model.geom_conaffinity[g])
                 and _inside_site(model, site, model.geom_pos[g])]
        if not geoms:
            raise TaskNotSupported(f"touch sensor '{model.sensor(i).name}': no colliding geom of "
                                   f"body '{model.body(body).name}' has its centre inside site "
                                   f"'{model.site(site).name}'")
        out[i] = geoms
    return out


class IsaacLabState(ModelLookup):
    """:class:`sim.protocol.SimState` in MuJoCo's layout, filled from Isaac Lab."""

    def __init__(self, model: mujoco.MjModel, num_envs: int, decimation: int,
                 device: torch.device):
        self.model, self.num_envs, self.device = model, num_envs, device
        self.physics_dt = float(model.opt.timestep)
        self.control_dt = self.physics_dt * decimation

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros(num_envs, *shape, dtype=torch.float64, device=device)

        self.qpos, self.qvel, self.ctrl = zeros(model.nq), zeros(model.nv), zeros(model.nu)
        self.mocap_pos = zeros(model.nmocap, 3)
        self.xpos, self.xquat = zeros(model.nbody, 3), zeros(model.nbody, 4)
        self.site_xpos, self.site_xmat = zeros(model.nsite, 3), zeros(model.nsite, 9)
        self.sensordata = zeros(model.nsensordata)
        self.time = zeros()
        self.kinematics = Kinematics(model, device)

    def update_kinematics(self) -> None:
        """Bodies and sites from the current qpos and mocap poses."""
        xpos, xquat, site_xpos, site_xmat = self.kinematics.forward(self.qpos, self.mocap_pos)
        self.xpos.copy_(xpos)
        self.xquat.copy_(xquat)
        self.site_xpos.copy_(site_xpos)
        self.site_xmat.copy_(site_xmat)

    def site_jacobian(self, site: int) -> torch.Tensor:
        """Translational Jacobian [B, 3, nv] of a site's origin.

        Evaluated at the last kinematics update.
        """
        return self.kinematics.jacobian(self.site_xpos[:, site],
                                        int(self.model.site_bodyid[site]))


def solver_settings(model: mujoco.MjModel) -> dict:
    """MuJoCo-Warp solver settings equal to the compiled model's options."""
    opt = model.opt
    return {"integrator": _INTEGRATORS[int(opt.integrator)], "cone": _CONES[int(opt.cone)],
            "impratio": float(opt.impratio), "iterations": int(opt.iterations),
            "ls_iterations": int(opt.ls_iterations), "tolerance": float(opt.tolerance)}


def actuator_groups(model: mujoco.MjModel) -> dict[str, dict]:
    """Per actuated joint: kp, kd, effort limit and target range of its position actuator."""
    groups = {}
    for a in range(model.nu):
        kp, bias = float(model.actuator_gainprm[a, 0]), model.actuator_biasprm[a]
        if int(model.actuator_trntype[a]) != int(mujoco.mjtTrn.mjTRN_JOINT) or \
                abs(float(bias[1]) + kp) > 1e-9 * max(kp, 1.0):
            raise TaskNotSupported(f"actuator '{model.actuator(a).name}' is not a joint "
                                      "position actuator (kp, -kp, -kd); only those map to "
                                      "Isaac Lab's implicit PD actuators")
        joint = model.joint(int(model.actuator_trnid[a, 0])).name
        groups[joint] = {"actuator": a, "kp": kp, "kd": -float(bias[2]),
                         "effort": float(model.actuator_forcerange[a, 1]),
                         "range": tuple(float(v) for v in model.actuator_ctrlrange[a])}
    return groups


class IsaacLabPhysics:
    """A batch of ``num_envs`` copies of a task's scene in Isaac Lab (Newton, MuJoCo-Warp)."""

    name = "isaaclab"
    supports_parameter_randomization = True

    def __init__(self, task: Task, model: mujoco.MjModel, num_envs: int, decimation: int,
                 device: str = "cpu"):
        check_supported(model, task.name)
        t0 = time.perf_counter()
        import isaaclab.sim as sim_utils
        from isaaclab.actuators import ImplicitActuatorCfg
        from isaaclab.assets import ArticulationCfg, RigidObjectCfg
        from isaaclab.scene import InteractiveScene, InteractiveSceneCfg
        from isaaclab.sensors import ContactSensorCfg
        from isaaclab.sim import SimulationCfg, SimulationContext
        from isaaclab_newton.physics import MJWarpSolverCfg, NewtonCfg

        from sim.backends.isaaclab_usd import task_usd

        self.model, self.decimation = model, decimation
        self.device = torch.device(device)
        self.state = IsaacLabState(model, num_envs, decimation, self.device)
        usd = task_usd(task)
        self.groups = actuator_groups(model)
        actuators = {
            joint: ImplicitActuatorCfg(joint_names_expr=[joint], stiffness=g["kp"],
                                       damping=g["kd"], effort_limit_sim=g["effort"])
            for joint, g in self.groups.items()}
        # Isaac Lab checks its default joint positions against the limits (the env
        # writes every initial state itself): qpos0, clamped into the joint ranges.
        default = {model.joint(j).name: float(min(max(model.qpos0[model.jnt_qposadr[j]],
                                                      model.jnt_range[j, 0]),
                                                  model.jnt_range[j, 1]))
                   if model.jnt_limited[j] else float(model.qpos0[model.jnt_qposadr[j]])
                   for j in range(model.njnt) if int(model.jnt_type[j]) != _FREE}
        robot = ArticulationCfg(prim_path="{ENV_REGEX_NS}/Scene",
                                spawn=sim_utils.UsdFileCfg(usd_path=str(usd)),
                                init_state=ArticulationCfg.InitialStateCfg(joint_pos=default),
                                actuators=actuators)
        scene_cfg = InteractiveSceneCfg(num_envs=num_envs, env_spacing=2.0)
        scene_cfg.robot = robot
        # Loose objects: rigid bodies of the same USD (spawned with the scene), one asset each.
        self._objects = [(model.body(b).name, b) for b in loose_bodies(model)]
        for name, _ in self._objects:
            setattr(scene_cfg, f"object_{name}", RigidObjectCfg(
                prim_path=f"{{ENV_REGEX_NS}}/Scene/Geometry/{name}", spawn=None))
        # Touch sensors: one shape-level contact sensor over every sensed geom.
        self._touch = touch_geoms(model)
        sensed = sorted({self._geom_name(g) for geoms in self._touch.values() for g in geoms})
        if sensed:
            scene_cfg.touch = ContactSensorCfg(
                prim_path="{ENV_REGEX_NS}/Scene",
                sensor_shape_prim_expr=[f"{{ENV_REGEX_NS}}/Scene/Geometry/.*/{re.escape(n)}"
                                        for n in sensed])
        physics = NewtonCfg(solver_cfg=MJWarpSolverCfg(**solver_settings(model)),
                            use_cuda_graph=self.device.type == "cuda")
        self.sim = SimulationContext(SimulationCfg(dt=float(model.opt.timestep), device=device,
                                                   physics=physics))
        self.scene = InteractiveScene(scene_cfg)
        self.sim.reset()
        self.robot = self.scene["robot"]
        self._object_assets = [self.scene[f"object_{name}"] for name, _ in self._objects]
        # Free joints and the asset whose root link carries them: loose objects, floating base.
        self._free = list(zip([b for _, b in self._objects], self._object_assets, strict=True))
        self._free += [(b, self.robot) for b in floating_bases(model)]
        self._origins = self.scene.env_origins.to(self.device, torch.float64)
        self.startup_s = time.perf_counter() - t0
        # Isaac's joint order -> our qpos/qvel columns; actuator -> Isaac joint.
        names = list(self.robot.joint_names)
        missing = [model.joint(j).name for j in range(model.njnt)
                   if model.joint(j).name not in names and int(model.jnt_type[j]) != _FREE]
        if missing:
            raise RuntimeError(f"joints {missing} of the MJCF are not in the Isaac Lab "
                               f"articulation (it has {names})")
        idx = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
        dev = self.device
        self._qpos_cols = torch.tensor([int(model.jnt_qposadr[j]) for j in idx], device=dev)
        self._dof_cols = torch.tensor([int(model.jnt_dofadr[j]) for j in idx], device=dev)
        self._qpos0 = torch.as_tensor(model.qpos0, dtype=torch.float64, device=dev)
        self._act_joints = torch.tensor([names.index(j) for j in self.groups], device=dev)
        self._act_ids = torch.tensor([g["actuator"] for g in self.groups.values()], device=dev)
        lo, hi = zip(*(g["range"] for g in self.groups.values()), strict=True)
        self._lo = torch.tensor(lo, dtype=torch.float64, device=dev)
        self._hi = torch.tensor(hi, dtype=torch.float64, device=dev)
        self._target = torch.zeros(num_envs, len(names), dtype=torch.float32, device=dev)
        self._mocap0 = torch.as_tensor(model.body_pos[model.body_mocapid >= 0][
            model.body_mocapid[model.body_mocapid >= 0].argsort()], dtype=torch.float64,
            device=dev)
        self._map_touch_sensors()
        self._map_parameters()
        # The state as last exchanged with Isaac Lab: what a task changes after a step (a push)
        # is written back before the next one.
        self._synced_qpos = self.state.qpos.clone()
        self._synced_qvel = self.state.qvel.clone()
        self.reset(torch.arange(num_envs, device=dev))
        self.forward(torch.arange(num_envs, device=dev))

    def _geom_name(self, geom: int) -> str:
        from sim.backends.isaaclab_usd import geom_prim_name

        m = self.model
        body = int(m.geom_bodyid[geom])
        return geom_prim_name(m.geom(geom).name, m.body(body).name,
                              geom - int(m.body_geomadr[body]))

    def _map_touch_sensors(self) -> None:
        """Per touch sensor: its sensordata column and the contact sensor's rows of its shapes."""
        self._touch_cols: list[int] = []
        self._touch_rows: list[list[int]] = []
        if not self._touch:
            return
        names = list(self.scene["touch"].sensor_names)
        for sensor, geoms in self._touch.items():
            self._touch_cols.append(int(self.model.sensor_adr[sensor]))
            self._touch_rows.append([names.index(self._geom_name(g)) for g in geoms])

    def _map_parameters(self) -> None:
        """Isaac Lab indices of what randomisation scales, and the unscaled values."""
        from isaaclab_newton.physics import NewtonManager

        m, dev = self.model, self.device
        newton = NewtonManager.get_model()
        labels = list(newton.shape_label)
        worlds = torch.as_tensor(newton.shape_world.numpy(), device=dev)
        # Newton shape -> MJCF geom, by the shape's (unique) name, in every env's world
        geom_of = {self._geom_name(g): g for g in range(m.ngeom)}
        self._shape_geom = torch.tensor([geom_of.get(label.rsplit("/", 1)[-1], -1)
                                         for label in labels], device=dev)
        self._shape_world = worlds
        self._friction_fields = ("shape_material_mu", "shape_material_mu_torsional",
                                 "shape_material_mu_rolling")
        self._friction0 = {f: wp_to_torch(getattr(newton, f)).clone()
                           for f in self._friction_fields}
        # articulation bodies and loose objects -> MJCF body ids
        body_id = {m.body(b).name: b for b in range(m.nbody)}
        self._mass_assets = [(self.robot, [body_id[n] for n in self.robot.body_names])]
        self._mass_assets += [(asset, [b]) for (_, b), asset
                              in zip(self._objects, self._object_assets, strict=True)]
        self._mass0 = [asset.data.body_mass.torch.clone() for asset, _ in self._mass_assets]
        self._kp0 = self.robot.data.joint_stiffness.torch.clone()
        self._kd0 = self.robot.data.joint_damping.torch.clone()

    # Newton's hinge/slide coordinate is zero in the MJCF's body pose, where MuJoCo's is
    # qpos0 (the joint's ref; 0 in our robots): the two differ by qpos0.
    def _read_joint_state(self) -> None:
        data = self.robot.data
        s = self.state
        s.qpos[:, self._qpos_cols] = data.joint_pos.torch.to(torch.float64) + \
            self._qpos0[self._qpos_cols]
        s.qvel[:, self._dof_cols] = data.joint_vel.torch.to(torch.float64)
        for body, asset in self._free:
            q, d = self._free_cols(body)
            pose = asset.data.root_link_pose_w.torch.to(torch.float64)
            vel = asset.data.root_link_vel_w.torch.to(torch.float64)
            quat = pose[:, [6, 3, 4, 5]]  # Isaac Lab: (x, y, z, w); MuJoCo: (w, x, y, z)
            s.qpos[:, q:q + 3] = pose[:, :3] - self._origins
            s.qpos[:, q + 3:q + 7] = quat
            s.qvel[:, d:d + 3] = vel[:, :3]
            s.qvel[:, d + 3:d + 6] = quat_rotate_inverse(quat, vel[:, 3:])  # body frame
        self._synced_qpos.copy_(s.qpos)
        self._synced_qvel.copy_(s.qvel)

    def _read_touch(self) -> None:
        if not self._touch_rows:
            return
        force = self.scene["touch"].data.net_normal_forces_w.torch.to(torch.float64).norm(dim=-1)
        for col, rows in zip(self._touch_cols, self._touch_rows, strict=True):
            self.state.sensordata[:, col] = force[:, rows].sum(1)

    def _free_cols(self, body: int) -> tuple[int, int]:
        """qpos and qvel addresses of the free joint of ``body``."""
        j = int(self.model.body_jntadr[body])
        return int(self.model.jnt_qposadr[j]), int(self.model.jnt_dofadr[j])

    def reset(self, ids: torch.Tensor) -> None:
        """Put envs ``ids`` in the model's default state (no kinematics update)."""
        s = self.state
        s.qpos[ids] = self._qpos0
        s.qvel[ids] = 0.0
        s.ctrl[ids] = 0.0
        s.mocap_pos[ids] = self._mocap0
        s.time[ids] = 0.0

    def _write_state(self, ids: torch.Tensor) -> None:
        """Write the qpos and qvel of envs ``ids`` into Isaac Lab."""
        s = self.state
        pos = (s.qpos[ids][:, self._qpos_cols] - self._qpos0[self._qpos_cols]).float()
        vel = s.qvel[ids][:, self._dof_cols].float()
        self.robot.write_joint_state_to_sim_index(position=pos.contiguous(),
                                                  velocity=vel.contiguous(), env_ids=ids)
        for body, asset in self._free:
            q, d = self._free_cols(body)
            quat = s.qpos[ids, q + 3:q + 7]
            pose = torch.cat([s.qpos[ids, q:q + 3] + self._origins[ids], quat[:, [1, 2, 3, 0]]], 1)
            vel = torch.cat([s.qvel[ids, d:d + 3], quat_rotate(quat, s.qvel[ids, d + 3:d + 6])], 1)
            asset.write_root_link_pose_to_sim_index(root_pose=pose.float().contiguous(),
                                                    env_ids=ids)
            asset.write_root_link_velocity_to_sim_index(root_velocity=vel.float().contiguous(),
                                                        env_ids=ids)
        self._synced_qpos[ids] = s.qpos[ids]
        self._synced_qvel[ids] = s.qvel[ids]

    def forward(self, ids: torch.Tensor) -> None:
        """Write the state of ``ids`` into Isaac Lab, then update kinematics.

        Touch readings of ``ids`` are 0 until their next physics step.
        """
        self._write_state(ids)
        if self._touch_rows:
            self.scene["touch"].reset(ids.tolist())
            self.state.sensordata[ids] = 0.0
        self.state.update_kinematics()

    def step(self, nstep: int) -> None:
        """Advance every env ``nstep`` physics steps.

        The joints track the position targets in ``ctrl``, clamped to the control ranges. State
        the task changed since the last step (a push) is written into Isaac Lab first.
        """
        s = self.state
        changed = ((s.qpos != self._synced_qpos).any(1) | (s.qvel != self._synced_qvel).any(1))
        if changed.any():
            self._write_state(changed.nonzero().flatten())
        target = s.ctrl[:, self._act_ids].clamp(self._lo, self._hi)
        self._target[:, self._act_joints] = target.float()
        self.robot.actuators.target_command.set_position_index(value=self._target,
                                                               full_data=True)
        for _ in range(nstep):
            self.scene.write_data_to_sim()
            self.sim.step(render=False)
        self.scene.update(dt=s.physics_dt * nstep)
        self._read_joint_state()
        self._read_touch()
        s.time += s.physics_dt * nstep
        s.update_kinematics()

    def scale_parameters(self, ids: torch.Tensor, friction: torch.Tensor, mass: torch.Tensor,
                         actuator_gain: torch.Tensor, actuated: slice) -> None:
        """Scale per-env friction, mass and PD gains of ``ids`` through Isaac Lab's setters.

        Each is the model's value times the factors [len(ids)]: every shape's friction (sliding,
        torsional, rolling) in the envs' worlds, every body's mass (inertia kept, as in C
        MuJoCo), and kp and kd of the joints of the ``actuated`` actuators.
        """
        from isaaclab_newton.physics import NewtonManager
        from newton import ModelFlags

        ids = ids.to(self.device)
        newton = NewtonManager.get_model()
        # Per shape: the row of its env in ``ids``, -1 for other envs and for shapes of no
        # env (world -1 reads the last entry, which no env id reaches); those keep theirs.
        row = torch.full((int(self._shape_world.max()) + 2,), -1, dtype=torch.long,
                         device=self.device)
        row[ids] = torch.arange(len(ids), device=self.device)
        shape_rows = row[self._shape_world]
        hit = shape_rows >= 0
        factor = friction.to(self.device, torch.float32)[shape_rows[hit]]
        for field in self._friction_fields:
            view = wp_to_torch(getattr(newton, field))
            view[hit] = self._friction0[field][hit] * factor
        NewtonManager.add_model_change(ModelFlags.SHAPE_PROPERTIES)
        for (asset, _), mass0 in zip(self._mass_assets, self._mass0, strict=True):
            scaled = mass0[ids] * mass.to(self.device, torch.float32)[:, None]
            asset.set_masses_index(masses=scaled.contiguous(), env_ids=ids)
        joints = self._act_joints[self._act_ids_in(actuated)]
        gain = actuator_gain.to(self.device, torch.float32)[:, None]
        self.robot.write_joint_stiffness_to_sim_index(
            stiffness=(self._kp0[ids][:, joints] * gain).contiguous(), joint_ids=joints,
            env_ids=ids)
        self.robot.write_joint_damping_to_sim_index(
            damping=(self._kd0[ids][:, joints] * gain).contiguous(), joint_ids=joints,
            env_ids=ids)

    def _act_ids_in(self, actuated: slice) -> torch.Tensor:
        """Positions in ``self._act_ids`` of the actuators in the slice ``actuated``."""
        wanted = set(range(self.model.nu)[actuated])
        return torch.tensor([i for i, a in enumerate(self._act_ids.tolist()) if a in wanted],
                            dtype=torch.long, device=self.device)

    def parameters(self) -> dict[str, torch.Tensor]:
        """Per-env physical parameters as Isaac Lab holds them, in MuJoCo's layout.

        ``geom_friction`` [B, ngeom, 3] (NaN for geoms without a shape, e.g. of mocap bodies),
        ``body_mass`` [B, nbody] (NaN for bodies outside Isaac Lab: the world, mocap bodies),
        ``actuator_kp`` and ``actuator_kd`` [B, nu] (the joint stiffness and damping of each
        actuator's joint).
        """
        from isaaclab_newton.physics import NewtonManager

        m, n = self.model, self.state.num_envs
        newton = NewtonManager.get_model()
        friction = torch.full((n, m.ngeom, 3), float("nan"), dtype=torch.float64)
        keep = (self._shape_geom >= 0) & (self._shape_world >= 0) & (self._shape_world < n)
        values = torch.stack([wp_to_torch(getattr(newton, f)) for f in self._friction_fields], 1)
        friction[self._shape_world[keep].cpu(), self._shape_geom[keep].cpu()] = \
            values[keep].double().cpu()
        mass = torch.full((n, m.nbody), float("nan"), dtype=torch.float64)
        for asset, bodies in self._mass_assets:
            mass[:, bodies] = asset.data.body_mass.torch.double().cpu()
        kp = torch.full((n, m.nu), float("nan"), dtype=torch.float64)
        kd = kp.clone()
        joints = self._act_joints.cpu()
        kp[:, self._act_ids.cpu()] = self.robot.data.joint_stiffness.torch.double().cpu()[:, joints]
        kd[:, self._act_ids.cpu()] = self.robot.data.joint_damping.torch.double().cpu()[:, joints]
        return {"geom_friction": friction, "body_mass": mass, "actuator_kp": kp,
                "actuator_kd": kd}

    def mjdata(self, ids: list[int]) -> list[mujoco.MjData]:
        """C MuJoCo copies of envs ``ids`` (for rendering)."""
        datas = []
        for i in ids:
            data = mujoco.MjData(self.model)
            data.qpos[:] = self.state.qpos[i].cpu().numpy()
            data.qvel[:] = self.state.qvel[i].cpu().numpy()
            data.mocap_pos[:] = self.state.mocap_pos[i].cpu().numpy()
            mujoco.mj_forward(self.model, data)
            datas.append(data)
        return datas

    def close(self) -> None:
        """Release the Isaac Lab simulation context."""
        self.sim.clear_instance()


def wp_to_torch(array: Any) -> torch.Tensor:
    """A torch view of a Warp array (imported lazily: Warp lives in the Isaac Lab environment)."""
    import warp as wp

    return wp.to_torch(array)


def isaaclab_physics_factory(task: Task, device: str = "cpu"
                             ) -> Callable[[mujoco.MjModel, int, int, EnvConfig], IsaacLabPhysics]:
    """A :data:`sim.env.PhysicsFactory` building :class:`IsaacLabPhysics` for ``task``."""

    def build(model: mujoco.MjModel, num_envs: int, decimation: int,
              cfg: EnvConfig) -> IsaacLabPhysics:
        return IsaacLabPhysics(task, model, num_envs, decimation, device)

    return build
