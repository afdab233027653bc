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
enough to run and to check. Loading and checking live in :mod:`embodied.policy_io`
(light: what a robot computer imports); :func:`load_policy`, :func:`check_against_robot`
and the errors are re-exported here for the training side.
"""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import json
import shutil
import subprocess
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from embodied.policy_io import (
    ONNX_METADATA_KEY,
    TS_METADATA_FILE,
    ExportError,
    chunk_settings,
    load_policy,
    quiet_exporters,
    read_sidecar,
    sha256_file,
)
from embodied.rl.actor_critic import ActorCritic
from embodied.rl.checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from embodied.rl.normalizer import EmpiricalNormalization

__all__ = [
    "DeployedPolicy", "export_run", "load_checkpoint_policy", "load_run_config",
    "observation_layout", "parity_error", "parity_observations", "policy_metadata",
    "resolve_run", "write_onnx", "write_torchscript",
]

METADATA_FORMAT = 1
TORCHSCRIPT_TOLERANCE = 1e-6
ONNX_TOLERANCE = 1e-5
FORMATS = ("both", "torchscript", "onnx")


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
    chunk, decay = chunk_settings(state.get("config"))
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
        # the task's own settings the observation depends on (the ROS node builds with them)
        "task_settings": {k: float(v) for k, v in env.task.cfg.settings.items()},
        "control_dt": float(env.control_dt),
        "decimation": int(env.decimation),
        "input": {"name": "obs", "dtype": "float32", "shape": ["batch", int(env.obs_dim)]},
        "output": {"name": "action", "dtype": "float32",
                   "shape": ["batch", int(env.action_dim) * chunk], "range": [-1.0, 1.0]},
        # chunks: the output holds the next `size` actions; run them temporally ensembled
        # (embodied.policy_io.ChunkedPolicy: weights exp(-ensemble_decay * age))
        "chunk": {"size": chunk, "ensemble_decay": decay} if chunk > 1 else None,
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
def write_torchscript(module: DeployedPolicy, path: Path, metadata: dict[str, Any]) -> Path:
    """Trace ``module`` and save it with the metadata as the extra file ``policy.json``."""
    example = torch.zeros(2, module.obs_dim)
    with quiet_exporters():
        # No freeze/optimize_for_inference: the same kernels as torch, so bitwise parity.
        traced = torch.jit.trace(module, (example,), check_trace=False)
        torch.jit.save(traced, str(path), _extra_files={TS_METADATA_FILE: json.dumps(metadata)})
    _strip_debug_info(path)
    return path


def _strip_debug_info(path: Path) -> None:
    """Drop TorchScript's optional ``*.debug_pkl`` entries from the archive.

    They hold source locations (the paths of the exporting machine); the archive loads and runs the
    same without them.
    """
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
    with quiet_exporters():
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
        chunk = chunk_settings(state.get("config"))[0]
        if (env.obs_dim, env.action_dim * chunk) != (policy.obs_dim, policy.action_dim):
            raise CheckpointError(
                f"{ckpt} has obs/action dims {policy.obs_dim}/{policy.action_dim}, task "
                f"'{cfg.task.name}' has {env.obs_dim}/{env.action_dim}"
                + (f" x {chunk} (chunks)" if chunk > 1 else ""))
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
        loaded = getattr(loaded, "fn", loaded)  # the raw chunks of a chunking policy
        err = parity_error(reference, loaded, obs)
        if not err <= tol:
            raise ExportError(f"{path}: exported policy differs from the torch policy by "
                              f"{err:.3g} (tolerance {tol:g})")
        artifacts[name] = {"format": kind, "bytes": path.stat().st_size,
                           "sha256": sha256_file(path), "parity_max_abs_error": err,
                           "export_seconds": round(time.perf_counter() - start, 2)}
    previous = read_sidecar(out_dir / "policy.json")
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


