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
* Loose objects (bodies with a free joint, the cubes) are Isaac Lab rigid
  objects of the same USD; their pose and velocity map to the free joint's
  qpos (w, x, y, z quaternion; Isaac Lab's is x, y, z, w) and qvel (angular
  velocity in the body frame).

Not supported yet (clear errors): floating-base robots and sensors (the Go2
and its touch sensors), ball joints, per-env parameter randomisation.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import mujoco
import torch

from robots.math import quat_rotate, quat_rotate_inverse
from sim.backends import TaskNotSupported
from sim.backends.isaaclab_kinematics import Kinematics
from sim.backends.model_lookup import ModelLookup
from sim.env import EnvConfig
from sim.task import Task

_FREE = int(mujoco.mjtJoint.mjJNT_FREE)
_BALL = int(mujoco.mjtJoint.mjJNT_BALL)
_INTEGRATORS = {int(mujoco.mjtIntegrator.mjINT_EULER): "euler",
                int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST): "implicitfast",
                int(mujoco.mjtIntegrator.mjINT_RK4): "rk4"}
_CONES = {int(mujoco.mjtCone.mjCONE_PYRAMIDAL): "pyramidal",
          int(mujoco.mjtCone.mjCONE_ELLIPTIC): "elliptic"}


def free_bodies(model: mujoco.MjModel) -> list[int]:
    """Bodies with a free joint: loose objects (cubes), simulated as Isaac Lab rigid objects."""
    return [int(model.jnt_bodyid[j]) for j in range(model.njnt)
            if int(model.jnt_type[j]) == _FREE]


def check_supported(model: mujoco.MjModel, task_name: str) -> None:
    """Raise :class:`TaskNotSupported` if ``model`` needs what this backend does not map yet."""
    ball = [model.joint(j).name for j in range(model.njnt) if int(model.jnt_type[j]) == _BALL]
    floating = [model.body(b).name for b in free_bodies(model)
                if int(model.body_parentid[b]) != 0 or (model.body_parentid == b).any()]
    if ball or floating:
        raise TaskNotSupported(
            f"task '{task_name}': ball joints {ball} / floating bases with links {floating} are "
            "not mapped to Isaac Lab yet; supported: fixed-base robots with hinge/slide joints "
            "and loose rigid objects. Use sim=mujoco for this task.")
    if model.nsensor:
        raise TaskNotSupported(
            f"task '{task_name}': MuJoCo sensors ({model.nsensor}) have no Isaac Lab mapping "
            "yet. Use sim=mujoco for this task.")


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
    supports_parameter_randomization = False

    def __init__(self, task: Task, model: mujoco.MjModel, num_envs: int, decimation: int,
                 device: str = "cpu"):
        check_supported(model, task.name)
        t0 = time.perf_counter()
        import isaaclab.sim as sim_utils
        from isaaclab.actuators import ImplicitActuatorCfg
        from isaaclab.assets import ArticulationCfg, RigidObjectCfg
        from isaaclab.scene import InteractiveScene, InteractiveSceneCfg
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
        self._objects = [(model.body(b).name, b) for b in free_bodies(model)]
        for name, _ in self._objects:
            setattr(scene_cfg, f"object_{name}", RigidObjectCfg(
                prim_path=f"{{ENV_REGEX_NS}}/Scene/Geometry/{name}", spawn=None))
        physics = NewtonCfg(solver_cfg=MJWarpSolverCfg(**solver_settings(model)),
                            use_cuda_graph=self.device.type == "cuda")
        self.sim = SimulationContext(SimulationCfg(dt=float(model.opt.timestep), device=device,
                                                   physics=physics))
        self.scene = InteractiveScene(scene_cfg)
        self.sim.reset()
        self.robot = self.scene["robot"]
        self._object_assets = [self.scene[f"object_{name}"] for name, _ in self._objects]
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
        self.reset(torch.arange(num_envs, device=dev))
        self.forward(torch.arange(num_envs, device=dev))

    # Newton's hinge/slide coordinate is zero in the MJCF's body pose, where MuJoCo's is
    # qpos0 (the joint's ref; 0 in our robots): the two differ by qpos0.
    def _read_joint_state(self) -> None:
        data = self.robot.data
        s = self.state
        s.qpos[:, self._qpos_cols] = data.joint_pos.torch.to(torch.float64) + \
            self._qpos0[self._qpos_cols]
        s.qvel[:, self._dof_cols] = data.joint_vel.torch.to(torch.float64)
        for (_, body), asset in zip(self._objects, self._object_assets, strict=True):
            q, d = self._free_cols(body)
            pose = asset.data.root_link_pose_w.torch.to(torch.float64)
            vel = asset.data.root_link_vel_w.torch.to(torch.float64)
            quat = pose[:, [6, 3, 4, 5]]  # Isaac Lab: (x, y, z, w); MuJoCo: (w, x, y, z)
            s.qpos[:, q:q + 3] = pose[:, :3] - self._origins
            s.qpos[:, q + 3:q + 7] = quat
            s.qvel[:, d:d + 3] = vel[:, :3]
            s.qvel[:, d + 3:d + 6] = quat_rotate_inverse(quat, vel[:, 3:])  # body frame

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

    def forward(self, ids: torch.Tensor) -> None:
        """Write the qpos and qvel of ``ids`` into Isaac Lab, then update kinematics."""
        s = self.state
        pos = (s.qpos[ids][:, self._qpos_cols] - self._qpos0[self._qpos_cols]).float()
        vel = s.qvel[ids][:, self._dof_cols].float()
        self.robot.write_joint_state_to_sim_index(position=pos.contiguous(),
                                                  velocity=vel.contiguous(), env_ids=ids)
        for (_, body), asset in zip(self._objects, self._object_assets, strict=True):
            q, d = self._free_cols(body)
            quat = s.qpos[ids, q + 3:q + 7]
            pose = torch.cat([s.qpos[ids, q:q + 3] + self._origins[ids], quat[:, [1, 2, 3, 0]]], 1)
            vel = torch.cat([s.qvel[ids, d:d + 3], quat_rotate(quat, s.qvel[ids, d + 3:d + 6])], 1)
            asset.write_root_link_pose_to_sim_index(root_pose=pose.float().contiguous(),
                                                    env_ids=ids)
            asset.write_root_link_velocity_to_sim_index(root_velocity=vel.float().contiguous(),
                                                        env_ids=ids)
        s.update_kinematics()

    def step(self, nstep: int) -> None:
        """Advance every env ``nstep`` physics steps.

        The joints track the position targets in ``ctrl``, clamped to the control ranges.
        """
        s = self.state
        target = s.ctrl[:, self._act_ids].clamp(self._lo, self._hi)
        self._target[:, self._act_joints] = target.float()
        self.robot.actuators.target_command.set_position_index(value=self._target,
                                                               full_data=True)
        for _ in range(nstep):
            self.scene.write_data_to_sim()
            self.sim.step(render=False)
        self.scene.update(dt=s.physics_dt * nstep)
        self._read_joint_state()
        s.time += s.physics_dt * nstep
        s.update_kinematics()

    def scale_parameters(self, ids: torch.Tensor, friction: torch.Tensor, mass: torch.Tensor,
                         actuator_gain: torch.Tensor, actuated: slice) -> None:
        """Not mapped (``supports_parameter_randomization`` is False: the env never calls it)."""
        raise TaskNotSupported("per-env friction/mass/PD-gain randomisation is not mapped to "
                               "Isaac Lab yet; action latency is randomised")

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


def isaaclab_physics_factory(task: Task, device: str = "cpu"
                             ) -> Callable[[mujoco.MjModel, int, int, EnvConfig], IsaacLabPhysics]:
    """A :data:`sim.env.PhysicsFactory` building :class:`IsaacLabPhysics` for ``task``."""

    def build(model: mujoco.MjModel, num_envs: int, decimation: int,
              cfg: EnvConfig) -> IsaacLabPhysics:
        return IsaacLabPhysics(task, model, num_envs, decimation, device)

    return build
