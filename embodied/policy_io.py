"""Load and check an exported policy: the light half of :mod:`embodied.export`.

What a robot computer needs to run an artifact of ``embodied export``: :func:`load_policy`
reads ``policy.pt`` (TorchScript) or ``policy.onnx`` (onnxruntime) with the metadata
inside it and in the ``policy.json`` beside it, and :func:`check_against_robot` refuses
a robot whose joints, dimensions or action mapping differ from the policy's. This
module imports torch, numpy and :mod:`robots.actions` only: neither MuJoCo, nor the
simulator, nor the training stack.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robots.actions import ACTION_TYPES, action_map_from_metadata

ONNX_METADATA_KEY = "embodied.policy"
TS_METADATA_FILE = "policy.json"


class ExportError(RuntimeError):
    """A run, checkpoint or artifact that cannot be exported or loaded (says which and why)."""


class PolicyMismatchError(ExportError):
    """An exported policy that does not fit the robot, task or env it is about to drive."""


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def quiet_exporters() -> Iterator[None]:
    """Silence torch's exporters' deprecation chatter and progress prints (saving and loading)."""
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
        """Actions [N, act_dim] float32 for ``obs`` [N, obs_dim] (inference mode).

        Raises :class:`PolicyMismatchError` when ``obs`` is not [N, obs_dim].
        """
        obs = torch.as_tensor(obs, dtype=torch.float32)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise PolicyMismatchError(f"{self.path} takes observations [N, {self.obs_dim}], "
                                      f"got {list(obs.shape)}")
        with torch.inference_mode():
            return self._fn(obs)

    def __repr__(self) -> str:
        return f"LoadedPolicy({self.kind}: {self.path})"


class ChunkedPolicy:
    """Temporal ensembling of an action-chunking policy: obs [N, D] -> actions [N, A].

    ``fn(obs)`` returns chunks [N, chunk * A]: the actions for this step and the next
    ``chunk - 1``. Each call keeps the last ``chunk`` predictions per env and executes,
    for the current step, the average of every prediction made for it, weighted
    ``exp(-decay * age)`` (the newest prediction weighs most). The state is per env:
    :meth:`reset` (all, or ``ids``) starts an episode afresh; with ``episode_count``
    (a callable returning per-env episode counters, e.g. the simulated task's) envs whose
    counter changed since the last call are reset automatically. A different batch size
    resets everything.
    """

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], chunk: int,
                 action_dim: int, decay: float = 0.1,
                 episode_count: Callable[[], torch.Tensor] | None = None):
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.fn, self.chunk, self.action_dim, self.decay = fn, chunk, action_dim, decay
        self.episode_count = episode_count
        self._seen: torch.Tensor | None = None
        self._history = torch.zeros(0, chunk, chunk, action_dim)  # [N, age, step, A]
        self._valid = torch.zeros(0, chunk, dtype=torch.bool)
        self._weights = torch.exp(-decay * torch.arange(chunk, dtype=torch.float32))

    def __getattr__(self, name: str) -> Any:
        """Attributes of the wrapped policy (``obs_dim``, ``kind``, ``path``, ...)."""
        if name.startswith("_") or name == "fn":
            raise AttributeError(name)
        return getattr(self.fn, name)

    def bind_env(self, env: Any) -> None:
        """Reset envs of ``env`` (a simulated batch) whenever its task resets them."""
        self.episode_count = lambda: env.task.episode_count
        self._seen = None

    def reset(self, ids: torch.Tensor | None = None) -> None:
        """Forget the predictions of envs ``ids`` (all if None): their episodes start anew."""
        if ids is None:
            self._valid.zero_()
        else:
            self._valid[ids] = False

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """The ensembled actions [N, A] for ``obs`` [N, D]."""
        chunks = self.fn(obs).reshape(obs.shape[0], self.chunk, self.action_dim).float()
        n = chunks.shape[0]
        if self._history.shape[0] != n:
            self._history = torch.zeros(n, self.chunk, self.chunk, self.action_dim)
            self._valid = torch.zeros(n, self.chunk, dtype=torch.bool)
        if self.episode_count is not None:
            count = self.episode_count().detach().cpu().clone()
            if self._seen is not None and self._seen.shape == count.shape:
                self.reset((count != self._seen).nonzero().flatten())
            self._seen = count
        self._history = torch.roll(self._history, 1, dims=1)
        self._valid = torch.roll(self._valid, 1, dims=1)
        self._history[:, 0] = chunks.detach().cpu()
        self._valid[:, 0] = True
        ages = torch.arange(self.chunk)
        now = self._history[:, ages, ages]  # [N, age, A]: each prediction's action for now
        w = self._weights * self._valid.float()
        return (now * w[..., None]).sum(1) / w.sum(1, keepdim=True)


def chunk_settings(meta: dict[str, Any] | None) -> tuple[int, float]:
    """(chunk size, ensembling decay) of a policy's metadata or algo config (1: no chunks).

    Exported metadata holds ``{"chunk": {"size": k, "ensemble_decay": m}}``; an offline
    learner's config holds ``chunk`` and ``ensemble_decay``.
    """
    meta = meta or {}
    chunk = meta.get("chunk")
    if isinstance(chunk, dict):
        return int(chunk.get("size", 1)), float(chunk.get("ensemble_decay", 0.1))
    return int(chunk or 1), float(meta.get("ensemble_decay", 0.1))


def with_chunking(policy: Callable[[torch.Tensor], torch.Tensor], meta: dict[str, Any] | None,
                  action_dim: int) -> Any:
    """``policy`` itself, or a :class:`ChunkedPolicy` around it if ``meta`` has chunks."""
    size, decay = chunk_settings(meta)
    return policy if size <= 1 else ChunkedPolicy(policy, size, action_dim, decay)


def read_sidecar(path: Path) -> dict[str, Any] | None:
    """The ``policy.json`` beside an artifact ``path`` (None if there is none)."""
    sidecar = path.with_suffix(".json")
    if not sidecar.is_file():
        return None
    try:
        return json.loads(sidecar.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ExportError(f"cannot read the policy metadata {sidecar}: {err}") from err


def load_policy(path: str | Path, verify_hash: bool = True) -> tuple[Any, dict[str, Any]]:
    """Load an exported ``policy.pt`` (TorchScript) or ``policy.onnx`` and its metadata.

    The policy is a :class:`LoadedPolicy`, or for an action-chunking policy a
    :class:`ChunkedPolicy` around it (stateful: call ``reset()`` when an episode starts).

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
            with quiet_exporters():
                module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
        except Exception as err:
            raise ExportError(f"cannot load TorchScript policy {path} (not an exported "
                              f"policy, or corrupt): {type(err).__name__}: {err}") from err
        module.eval()
        meta = json.loads(extra[TS_METADATA_FILE]) if extra[TS_METADATA_FILE] else None
        fn, kind = module, "torchscript"

    sidecar = read_sidecar(path)
    if sidecar is not None:
        recorded = (sidecar.get("artifacts") or {}).get(path.name, {}).get("sha256")
        if verify_hash and recorded and recorded != sha256_file(path):
            raise ExportError(f"{path} does not match {path.with_suffix('.json')} (sha256 "
                              f"differs): re-export, or remove the stale metadata")
        meta = {**sidecar, **(meta or {}), "artifacts": sidecar.get("artifacts", {})}
    if meta is None:
        raise ExportError(f"{path} has no policy metadata (not written by `embodied export`?)")
    loaded = LoadedPolicy(path, kind, fn, int(meta["obs_dim"]))
    return with_chunking(loaded, meta, int(meta["action_dim"])), meta


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
    action = meta.get("action") or {}
    if action.get("type") not in ACTION_TYPES:
        problems.append(f"action type: policy '{action.get('type')}', supported {ACTION_TYPES}")
    elif int(meta.get("action_dim", -1)) != (
            dim := action_map_from_metadata(action, robot, robot.control_dt).action_dim):
        problems.append(f"action_dim: policy {meta.get('action_dim')}, robot {dim} "
                        f"({action['type']} actions)")
    for key, value in (("default_pose", robot.default_pose),
                       ("action_scale", robot.action_scale)):
        theirs = np.asarray(action.get(key, []), dtype=float)
        if theirs.shape != value.shape or not np.allclose(theirs, value, atol=1e-9):
            problems.append(f"{key}: policy {theirs.tolist()}, robot {value.tolist()}")
    if (action.get("gripper") is None) != (robot.gripper is None):
        problems.append(f"gripper: policy {'has' if action.get('gripper') else 'has no'} "
                        f"gripper action, robot {'has' if robot.gripper else 'has no'} gripper")
    steps = float(meta.get("control_dt", -1.0)) / robot.timestep
    if round(steps) < 1 or abs(steps - round(steps)) > 1e-6:
        problems.append(f"control_dt: policy {meta.get('control_dt')} s is not a whole number "
                        f"of robot '{robot.name}' physics steps ({robot.timestep} s)")
    return problems


def policy_control_dt(meta: dict[str, Any], requested: float = 0.0) -> float:
    """The control period (s) to run an exported policy at: the one it was trained at.

    That is its metadata's ``control_dt``; a nonzero ``requested`` period must equal it
    (else :class:`PolicyMismatchError`).
    """
    dt = float(meta["control_dt"])
    if requested and abs(requested - dt) > 1e-9:
        raise PolicyMismatchError(f"control_dt {requested} s differs from the policy's {dt} s "
                                  f"(the period it was trained at); 0 runs at the policy's")
    return dt


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
