"""`embodied export`: a trained policy as one deployable file plus the robot it was trained for.

From a run folder's checkpoint this writes, under ``<run>/export/``:

- ``policy.pt``: TorchScript (traced), raw observation float32 [N, obs_dim] ->
  action [N, action_dim] in [-1, 1], with the observation normaliser inside;
- ``policy.onnx``: the same graph in ONNX (batch axis dynamic), exported with
  ``torch.onnx.export(..., dynamo=True)`` (torch.export + onnxscript);
- ``policy.json``: the metadata (task, robot, joint and ROS joint names,
  observation layout, action mapping, control period, training config hash,
  commit, sha256 of each artifact) and ``robot.yaml``, the robot spec copied.

Each artifact also carries the metadata inside it (TorchScript extra file
``policy.json``, ONNX ``metadata_props['embodied.policy']``), so a single file is
enough to run and to check. :func:`load_policy` loads either file and
:func:`check_against_robot` refuses a robot whose joints or dimensions differ.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as _dt
import hashlib
import json
import logging
import shutil
import subprocess
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from embodied.rl.actor_critic import ActorCritic
from embodied.rl.checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from embodied.rl.normalizer import EmpiricalNormalization
from sim.actions import ACTION_TYPES

METADATA_FORMAT = 1
ONNX_METADATA_KEY = "embodied.policy"
TS_METADATA_FILE = "policy.json"
TORCHSCRIPT_TOLERANCE = 1e-6
ONNX_TOLERANCE = 1e-5
FORMATS = ("both", "torchscript", "onnx")


class ExportError(RuntimeError):
    """A run, checkpoint or artifact that cannot be exported or loaded (says which and why)."""


class PolicyMismatchError(ExportError):
    """An exported policy that does not fit the robot, task or env it is about to drive."""


# --------------------------------------------------------------- the module
class DeployedPolicy(nn.Module):
    """Raw observation [N, obs_dim] -> deterministic action [N, action_dim] clipped to [-1, 1].

    A frozen copy of an :class:`ActorCritic`'s normaliser and actor: exactly
    ``ActorCritic.forward(obs).clamp(-1, 1)``, without the critic or the noise.
    """

    def __init__(self, policy: ActorCritic):
        super().__init__()
        norm = policy.obs_normalizer
        self.normalizer = (copy.deepcopy(norm).eval()
                           if isinstance(norm, EmpiricalNormalization) else None)
        self.actor = copy.deepcopy(policy.actor).eval()
        self.obs_dim, self.action_dim = int(policy.obs_dim), int(policy.action_dim)
        self.requires_grad_(False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The action for raw observations ``obs`` [N, obs_dim] (float32)."""
        if self.normalizer is not None:
            obs = self.normalizer.normalize(obs)
        return self.actor(obs).clamp(-1.0, 1.0)


# ------------------------------------------------------------ checkpoints
def resolve_run(run: str | Path | None) -> Path:
    """The run folder ``run`` (must exist and hold config.yaml); clear errors otherwise."""
    if run is None or str(run) == "":
        raise ExportError("no run given: pass run=PATH (a run folder of `embodied train`)")
    path = Path(str(run)).expanduser()
    if not path.exists():
        raise ExportError(f"run folder {path} does not exist")
    if path.is_file():  # a checkpoint file: its run folder
        path = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    if not (path / "config.yaml").is_file():
        raise ExportError(f"{path} is not a run folder of `embodied train` (no config.yaml)")
    return path


def load_run_config(run_dir: Path) -> DictConfig:
    """The resolved training config saved in a run folder."""
    try:
        return OmegaConf.load(run_dir / "config.yaml")
    except Exception as err:
        raise ExportError(f"cannot read {run_dir / 'config.yaml'}: {err}") from err


def load_checkpoint_policy(path: str | Path) -> tuple[ActorCritic, dict[str, Any], Path]:
    """The :class:`ActorCritic` (eval mode) of a checkpoint file or a run folder's newest one.

    The architecture comes from the checkpoint's own PPO config. Returns the
    policy, the raw checkpoint dict and the file read; raises
    :class:`CheckpointError` for a missing, corrupt or foreign checkpoint.
    """
    ckpt = find_checkpoint(path)
    state = load_checkpoint(ckpt)
    algo = state.get("config") or {}
    try:
        policy = ActorCritic(int(state["obs_dim"]), int(state["action_dim"]),
                             algo.get("actor_hidden", (256, 128, 64)),
                             algo.get("critic_hidden", (256, 128, 64)),
                             algo.get("activation", "elu"), algo.get("init_noise_std", 1.0),
                             algo.get("normalize_obs", True))
        policy.load_state_dict(state["policy"])
    except (KeyError, RuntimeError, ValueError, TypeError) as err:
        raise CheckpointError(f"{ckpt}: the policy cannot be rebuilt from it: {err}") from err
    return policy.eval(), state, ckpt


# --------------------------------------------------------------- metadata
def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _git_commit() -> str | None:
    """The commit of the code doing the export (``+dirty`` with local changes), if in git."""
    repo = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=repo, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty.strip() else "")


def observation_layout(env: Any) -> list[dict[str, Any]]:
    """Names, sizes and offsets of the task's observation terms (evaluated once on ``env``)."""
    layout, offset = [], 0
    for term in env.task.observation_terms():
        size = int(term.fn().reshape(env.num_envs, -1).shape[1])
        layout.append({"name": term.name, "size": size, "start": offset,
                       "noise": float(term.noise)})
        offset += size
    return layout


def _portable_path(path: str | Path) -> str:
    """``path`` relative to the project root when inside it (no machine paths in artifacts)."""
    path = Path(path).resolve()
    root = Path(__file__).resolve().parent.parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else path.name


def policy_metadata(cfg: DictConfig, env: Any, checkpoint: Path,
                    state: dict[str, Any]) -> dict[str, Any]:
    """Everything a deployment needs to know about a checkpoint's policy (no artifact hashes)."""
    robot = env.robot
    layout = observation_layout(env)
    if sum(t["size"] for t in layout) != env.obs_dim:
        raise ExportError(f"observation terms of task '{env.task.name}' add up to "
                          f"{sum(t['size'] for t in layout)}, the env's obs_dim is {env.obs_dim}")
    gripper = None
    if robot.gripper is not None:
        g = robot.gripper
        gripper = {"joints": list(g.joints), "ros_names": list(g.ros_names),
                   "action_index": len(robot.joints), "closed": g.lower, "open": g.upper,
                   "mapping": "opening = closed + (action + 1) / 2 * (open - closed)"}
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    return {
        "format": METADATA_FORMAT,
        "task": str(env.task.name),
        "instruction": str(getattr(env.task, "instruction", "")),
        "robot": robot.name,
        "robot_yaml_path": _portable_path(robot.yaml_path),
        "robot_yaml": Path(robot.yaml_path).read_text(),
        "joint_names": robot.joint_names,
        "ros_joint_names": robot.ros_joint_names,
        "obs_dim": int(env.obs_dim),
        "action_dim": int(env.action_dim),
        "observation": layout,
        "action": {**env.action_map.metadata(), "gripper": gripper},
        "control_dt": float(robot.control_dt),
        "decimation": int(robot.decimation),
        "input": {"name": "obs", "dtype": "float32", "shape": ["batch", int(env.obs_dim)]},
        "output": {"name": "action", "dtype": "float32",
                   "shape": ["batch", int(env.action_dim)], "range": [-1.0, 1.0]},
        "normalizer_inside": True,
        "training": {
            "run_dir": str(cfg.get("run_dir", "")),
            "checkpoint": str(checkpoint),
            "iteration": int(state.get("iteration", 0)),
            "env_steps": int(state.get("global_step", 0)),
            "seed": cfg.get("seed"),
            "config_sha256": hashlib.sha256(config_yaml.encode()).hexdigest(),
            "task_config": OmegaConf.to_container(cfg.task, resolve=True) if "task" in cfg
            else None,
            "algo": state.get("config"),
        },
        "commit": _git_commit(),
        "exported_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "torch_version": torch.__version__,
    }


# ------------------------------------------------------------- the writers
@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """Silence the exporters' deprecation chatter and progress prints."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo",
                                              "onnxscript")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


def write_torchscript(module: DeployedPolicy, path: Path, metadata: dict[str, Any]) -> Path:
    """Trace ``module`` and save it with the metadata as the extra file ``policy.json``."""
    example = torch.zeros(2, module.obs_dim)
    with _quiet_export():
        # No freeze/optimize_for_inference: the same kernels as torch, so bitwise parity.
        traced = torch.jit.trace(module, (example,), check_trace=False)
        torch.jit.save(traced, str(path), _extra_files={TS_METADATA_FILE: json.dumps(metadata)})
    _strip_debug_info(path)
    return path


def _strip_debug_info(path: Path) -> None:
    """Drop TorchScript's optional ``*.debug_pkl`` entries (source locations: the paths of
    the exporting machine); the archive loads and runs the same without them."""
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            if not info.filename.endswith(".debug_pkl"):
                dst.writestr(info, src.read(info.filename))
    tmp.replace(path)


def write_onnx(module: DeployedPolicy, path: Path, metadata: dict[str, Any]) -> Path:
    """Export ``module`` to ONNX with a dynamic batch axis, the metadata in ``metadata_props``.

    Uses the torch.export-based exporter (``dynamo=True``, the default and the
    supported path since torch 2.9; needs onnxscript) and writes one
    self-contained file (no external weight data).
    """
    import onnx

    example = torch.zeros(2, module.obs_dim)
    with _quiet_export():
        torch.onnx.export(module, (example,), str(path), input_names=["obs"],
                          output_names=["action"], dynamo=True, external_data=False,
                          dynamic_shapes=({0: torch.export.Dim("batch")},), verbose=False)
    model = onnx.load(str(path))
    for node in model.graph.node:  # source locations: the paths of the exporting machine
        keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    del model.metadata_props[:]
    entry = model.metadata_props.add()
    entry.key, entry.value = ONNX_METADATA_KEY, json.dumps(metadata)
    model.doc_string = f"embodied policy: task {metadata['task']}, robot {metadata['robot']}"
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def parity_observations(module: DeployedPolicy, n: int = 1024, seed: int = 0) -> torch.Tensor:
    """Random raw observations around the normaliser's statistics (actions not all clipped)."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(n, module.obs_dim, generator=gen)
    if module.normalizer is None:
        return z
    return module.normalizer.mean + 2.0 * module.normalizer.std * z


def parity_error(reference: Callable[[torch.Tensor], torch.Tensor],
                 policy: Callable[[torch.Tensor], torch.Tensor], obs: torch.Tensor) -> float:
    """Max |reference(obs) - policy(obs)| (batches of several sizes, 1 included)."""
    err = 0.0
    with torch.inference_mode():
        for batch in (obs[:1], obs[:7], obs):
            diff = (reference(batch).double() - torch.as_tensor(policy(batch)).double()).abs()
            err = max(err, float(diff.max()))
    return err


def export_run(run: str | Path, fmt: str = "both", checkpoint: str | Path | None = None,
               out: str | Path | None = None, parity_samples: int = 1024) -> dict[str, Any]:
    """Export a run folder's policy; returns a summary (paths, sizes, parity errors, metadata).

    ``fmt`` is ``both``, ``torchscript`` or ``onnx``; ``checkpoint`` defaults to the
    run's newest; ``out`` to ``<run>/export``. Each artifact is reloaded from disk
    and compared with the torch policy on random observations; an error above
    1e-6 (TorchScript) or 1e-5 (ONNX) raises :class:`ExportError`.
    """
    from embodied.envs import env_kwargs
    from sim import make_env

    if fmt not in FORMATS:
        raise ExportError(f"unknown format '{fmt}'; use one of {list(FORMATS)}")
    run_dir = resolve_run(run)
    cfg = load_run_config(run_dir)
    policy, state, ckpt = load_checkpoint_policy(checkpoint or run_dir)
    env = make_env(cfg.task.name, num_envs=1, seed=0, **env_kwargs(cfg.task))
    try:
        if (env.obs_dim, env.action_dim) != (policy.obs_dim, policy.action_dim):
            raise CheckpointError(
                f"{ckpt} has obs/action dims {policy.obs_dim}/{policy.action_dim}, task "
                f"'{cfg.task.name}' has {env.obs_dim}/{env.action_dim}")
        metadata = policy_metadata(cfg, env, ckpt, state)
    finally:
        env.close()

    out_dir = Path(out) if out else run_dir / "export"
    out_dir.mkdir(parents=True, exist_ok=True)
    module = DeployedPolicy(policy).eval()
    obs = parity_observations(module, parity_samples)

    def reference(x: torch.Tensor) -> torch.Tensor:
        return policy(x).clamp(-1.0, 1.0)

    artifacts: dict[str, dict[str, Any]] = {}
    writers = {"torchscript": (write_torchscript, "policy.pt", TORCHSCRIPT_TOLERANCE),
               "onnx": (write_onnx, "policy.onnx", ONNX_TOLERANCE)}
    for kind, (writer, name, tol) in writers.items():
        if fmt not in ("both", kind):
            continue
        start = time.perf_counter()
        path = writer(module, out_dir / name, metadata)
        loaded, _ = load_policy(path, verify_hash=False)
        err = parity_error(reference, loaded, obs)
        if not err <= tol:
            raise ExportError(f"{path}: exported policy differs from the torch policy by "
                              f"{err:.3g} (tolerance {tol:g})")
        artifacts[name] = {"format": kind, "bytes": path.stat().st_size,
                           "sha256": sha256_file(path), "parity_max_abs_error": err,
                           "export_seconds": round(time.perf_counter() - start, 2)}
    previous = _read_sidecar(out_dir / "policy.json")
    if previous and previous.get("training", {}).get("checkpoint") == str(ckpt):
        # e.g. format=onnx after format=torchscript: keep the other, still valid, artifact
        for name, art in (previous.get("artifacts") or {}).items():
            if name not in artifacts and (out_dir / name).is_file() and \
                    sha256_file(out_dir / name) == art.get("sha256"):
                artifacts[name] = art
    shutil.copyfile(env.robot.yaml_path, out_dir / "robot.yaml")
    sidecar = {**metadata, "artifacts": artifacts}
    (out_dir / "policy.json").write_text(json.dumps(sidecar, indent=2))
    return {"out_dir": str(out_dir), "checkpoint": str(ckpt), "artifacts": artifacts,
            "metadata": sidecar}


# ------------------------------------------------------------------ loading
class LoadedPolicy:
    """An exported policy as a callable: observations [N, obs_dim] -> actions [N, action_dim].

    Accepts a torch tensor or a numpy array (cast to float32) and returns a
    float32 torch tensor. ``kind`` is ``torchscript`` or ``onnx``.
    """

    def __init__(self, path: Path, kind: str, fn: Callable[[torch.Tensor], torch.Tensor],
                 obs_dim: int):
        self.path, self.kind, self._fn, self.obs_dim = path, kind, fn, obs_dim

    def __call__(self, obs: torch.Tensor | np.ndarray) -> torch.Tensor:
        obs = torch.as_tensor(obs, dtype=torch.float32)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise PolicyMismatchError(f"{self.path} takes observations [N, {self.obs_dim}], "
                                      f"got {list(obs.shape)}")
        with torch.inference_mode():
            return self._fn(obs)

    def __repr__(self) -> str:
        return f"LoadedPolicy({self.kind}: {self.path})"


def _read_sidecar(path: Path) -> dict[str, Any] | None:
    sidecar = path.with_suffix(".json")
    if not sidecar.is_file():
        return None
    try:
        return json.loads(sidecar.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ExportError(f"cannot read the policy metadata {sidecar}: {err}") from err


def load_policy(path: str | Path, verify_hash: bool = True) -> tuple[LoadedPolicy, dict[str, Any]]:
    """Load an exported ``policy.pt`` (TorchScript) or ``policy.onnx`` and its metadata.

    The metadata is the one embedded in the file, completed by the ``policy.json``
    beside it if present; with ``verify_hash`` the file's sha256 must match the one
    recorded there (a file swapped without its metadata is refused).
    """
    path = Path(path)
    if not path.is_file():
        raise ExportError(f"exported policy {path} does not exist")
    meta: dict[str, Any] | None
    if path.suffix == ".onnx":
        try:
            import onnxruntime as ort
        except ImportError as err:
            raise ExportError("loading an ONNX policy needs onnxruntime "
                              "(pip install onnxruntime)") from err
        try:
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.log_severity_level = 3
            session = ort.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
        except Exception as err:
            raise ExportError(f"cannot load ONNX policy {path}: {err}") from err
        raw = session.get_modelmeta().custom_metadata_map.get(ONNX_METADATA_KEY)
        meta = json.loads(raw) if raw else None
        input_name = session.get_inputs()[0].name

        def fn(obs: torch.Tensor) -> torch.Tensor:
            out = session.run(None, {input_name: obs.detach().cpu().numpy()})[0]
            return torch.from_numpy(np.asarray(out, dtype=np.float32))

        kind = "onnx"
    else:
        extra = {TS_METADATA_FILE: ""}
        try:
            with _quiet_export():
                module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
        except Exception as err:
            raise ExportError(f"cannot load TorchScript policy {path} (not an exported "
                              f"policy, or corrupt): {type(err).__name__}: {err}") from err
        module.eval()
        meta = json.loads(extra[TS_METADATA_FILE]) if extra[TS_METADATA_FILE] else None
        fn, kind = module, "torchscript"

    sidecar = _read_sidecar(path)
    if sidecar is not None:
        recorded = (sidecar.get("artifacts") or {}).get(path.name, {}).get("sha256")
        if verify_hash and recorded and recorded != sha256_file(path):
            raise ExportError(f"{path} does not match {path.with_suffix('.json')} (sha256 "
                              f"differs): re-export, or remove the stale metadata")
        meta = {**sidecar, **(meta or {}), "artifacts": sidecar.get("artifacts", {})}
    if meta is None:
        raise ExportError(f"{path} has no policy metadata (not written by `embodied export`?)")
    return LoadedPolicy(path, kind, fn, int(meta["obs_dim"])), meta


# ----------------------------------------------------------------- checking
def policy_mismatches(meta: dict[str, Any], robot: Any) -> list[str]:
    """What differs between an exported policy's metadata and a :class:`robots.RobotSpec`."""
    problems = []
    if meta.get("robot") != robot.name:
        problems.append(f"robot: policy was trained for '{meta.get('robot')}', this robot is "
                        f"'{robot.name}'")
    if list(meta.get("joint_names", [])) != robot.joint_names:
        problems.append(f"joint names/order: policy {meta.get('joint_names')}, "
                        f"robot {robot.joint_names}")
    if list(meta.get("ros_joint_names", [])) != robot.ros_joint_names:
        problems.append(f"ROS joint names/order: policy {meta.get('ros_joint_names')}, "
                        f"robot {robot.ros_joint_names}")
    if int(meta.get("action_dim", -1)) != robot.action_dim:
        problems.append(f"action_dim: policy {meta.get('action_dim')}, robot {robot.action_dim}")
    action = meta.get("action") or {}
    if action.get("type") not in ACTION_TYPES:
        problems.append(f"action type: policy '{action.get('type')}', supported {ACTION_TYPES}")
    for key, value in (("default_pose", robot.default_pose),
                       ("action_scale", robot.action_scale)):
        theirs = np.asarray(action.get(key, []), dtype=float)
        if theirs.shape != value.shape or not np.allclose(theirs, value, atol=1e-9):
            problems.append(f"{key}: policy {theirs.tolist()}, robot {value.tolist()}")
    if (action.get("gripper") is None) != (robot.gripper is None):
        problems.append(f"gripper: policy {'has' if action.get('gripper') else 'has no'} "
                        f"gripper action, robot {'has' if robot.gripper else 'has no'} gripper")
    if abs(float(meta.get("control_dt", -1.0)) - robot.control_dt) > 1e-9:
        problems.append(f"control_dt: policy {meta.get('control_dt')} s, robot "
                        f"{robot.control_dt} s")
    return problems


def check_against_robot(meta: dict[str, Any], robot: Any) -> None:
    """Raise :class:`PolicyMismatchError` naming every mismatch of joints, dims, action mapping."""
    problems = policy_mismatches(meta, robot)
    if problems:
        raise PolicyMismatchError(
            f"policy for robot '{meta.get('robot')}' (task '{meta.get('task')}') does not fit "
            f"robot '{robot.name}' ({robot.yaml_path}):\n  - " + "\n  - ".join(problems))


def check_against_env(meta: dict[str, Any], env: Any) -> None:
    """:func:`check_against_robot` on the env's robot, plus the task and observation size."""
    problems = []
    if meta.get("task") != env.task.name:
        problems.append(f"task: policy was trained on '{meta.get('task')}', the env runs "
                        f"'{env.task.name}'")
    if int(meta.get("obs_dim", -1)) != env.obs_dim:
        problems.append(f"obs_dim: policy {meta.get('obs_dim')}, env {env.obs_dim}")
    problems += policy_mismatches(meta, env.robot)
    if problems:
        raise PolicyMismatchError(
            f"policy for task '{meta.get('task')}' / robot '{meta.get('robot')}' does not fit "
            f"the env of task '{env.task.name}':\n  - " + "\n  - ".join(problems))
