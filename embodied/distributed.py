"""Data parallelism over ``torch.distributed`` for processes started by ``torchrun``.

One process per rank; ``torchrun`` sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``.
:func:`init` joins the process group (NCCL when the rank has a GPU, gloo on the CPU)
and every helper here is a no-op in a single process (no ``WORLD_SIZE`` or 1), so the
learners call them unconditionally. Rank 0 is the main rank: it alone writes files.

Contracts the learners rely on:

- :func:`broadcast_module` makes every rank start from rank 0's parameters and buffers;
- :func:`average_gradients` turns each rank's gradient of a per-sample-mean loss into
  the gradient of that loss over the union of the ranks' (equal-sized) minibatches;
- :func:`mean_over_ranks` / :func:`reduce_metrics` average scalars (NaN-aware);
- :class:`NormalizerSync` merges what each rank's observation normaliser saw since
  the last merge, so the statistics equal one normaliser fed every rank's samples.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn

RANK_SEED_STRIDE = 1_000_000  # rank r seeds its envs and RNG with seed + r * stride


class WorldSizeError(RuntimeError):
    """A checkpoint written with one world size resumed with another."""


def world_size() -> int:
    """Processes in the job (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    """This process's rank (0 without torchrun)."""
    return int(os.environ.get("RANK", "0"))


def local_rank() -> int:
    """This process's rank on its node (picks its GPU)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_distributed() -> bool:
    """Whether this process is one of several ranks."""
    return world_size() > 1


def is_main() -> bool:
    """Whether this process writes files (rank 0)."""
    return rank() == 0


def rank_seed(seed: int) -> int:
    """This rank's seed: ``seed`` on rank 0, ``seed + rank * RANK_SEED_STRIDE`` elsewhere."""
    return int(seed) + rank() * RANK_SEED_STRIDE


def restart_count() -> int:
    """How often torchrun restarted the job's workers (``--max-restarts``); 0 at first."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def default_device() -> str | None:
    """``cuda:<local rank>`` under torchrun on a GPU machine, else None (the backend's default)."""
    if is_distributed() and torch.cuda.is_available():
        return f"cuda:{local_rank() % torch.cuda.device_count()}"
    return None


def init(timeout_s: float = 1800.0) -> bool:
    """Join the process group if started by torchrun with several ranks; True if joined.

    NCCL when CUDA is available (each rank on ``cuda:<local rank>``), gloo otherwise.
    """
    if not is_distributed():
        return False
    if dist.is_initialized():
        return True
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank() % torch.cuda.device_count())
    timeout = timedelta(seconds=timeout_s)
    if restart_count() == 0:
        dist.init_process_group(backend, timeout=timeout)
        return True
    # after a torchrun restart the store still holds the dead round's addresses: a fresh prefix
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                          world_size(), is_master=rank() == 0 and os.environ.get(
                              "TORCHELASTIC_USE_AGENT_STORE") != "True", timeout=timeout)
    dist.init_process_group(backend, store=dist.PrefixStore(f"restart_{restart_count()}", store),
                            rank=rank(), world_size=world_size(), timeout=timeout)
    return True


def shutdown() -> None:
    """Leave the process group (after a last barrier) if joined."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def leave() -> None:
    """After a successful command: leave the process group and end this rank with status 0.

    A no-op outside a joined process group (a plain run, or a test calling the CLI in
    its own process). Under torchrun every rank leaves the group together, then flushes
    its output and exits at once: interpreter teardown after the group is gone
    intermittently aborts with ``terminate called without an active exception`` (a gloo
    worker thread still joinable), on any rank, which torchrun reports as a failed job
    although the work is done. Callers close their files before this (run folders,
    loggers and label parts are closed when the command returns).
    """
    if not _active():
        return
    shutdown()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _active() -> bool:
    return is_distributed() and dist.is_available() and dist.is_initialized()


def _device() -> torch.device:
    return torch.device(f"cuda:{torch.cuda.current_device()}") \
        if dist.get_backend() == "nccl" else torch.device("cpu")


def barrier() -> None:
    """Wait for every rank."""
    if _active():
        dist.barrier()


def broadcast_object(value: Any) -> Any:
    """Rank 0's ``value`` on every rank (any picklable object)."""
    if not _active():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather_objects(value: Any) -> list[Any]:
    """Every rank's ``value``, in rank order, on every rank."""
    if not _active():
        return [value]
    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, value)
    return out


def broadcast_module(module: nn.Module) -> None:
    """Overwrite every parameter and buffer with rank 0's."""
    if not _active():
        return
    for tensor in [*module.parameters(), *module.buffers()]:
        data = tensor.data.to(_device())
        dist.broadcast(data, src=0)
        tensor.data.copy_(data)


def average_gradients(params: Iterable[nn.Parameter]) -> None:
    """Replace each gradient by its mean over the ranks (one flat all-reduce)."""
    if not _active():
        return
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads]).to(_device())
    dist.all_reduce(flat)
    flat /= world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def mean_over_ranks(value: float) -> float:
    """The mean of a scalar over the ranks."""
    if not _active():
        return value
    return reduce_metrics({"v": value})["v"]


def sum_over_ranks(value: float) -> float:
    """The sum of a scalar over the ranks."""
    if not _active():
        return value
    box = torch.tensor([float(value)], dtype=torch.float64, device=_device())
    dist.all_reduce(box)
    return float(box.item())


def reduce_metrics(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with every float averaged over the ranks (NaNs left out; NaN if all are).

    Integers (iteration, env-step counters) are the same on every rank and stay as they are.
    """
    if not _active():
        return row
    keys = [k for k, v in row.items() if isinstance(v, float)]
    if not keys:
        return row
    values = torch.tensor([row[k] for k in keys], dtype=torch.float64)
    valid = ~torch.isnan(values)
    packed = torch.cat([torch.where(valid, values, 0.0), valid.double()]).to(_device())
    dist.all_reduce(packed)
    sums, counts = packed.cpu().chunk(2)
    means = torch.where(counts > 0, sums / counts.clamp(min=1), math.nan)
    return {**row, **dict(zip(keys, means.tolist(), strict=True))}


class RunningStatistics(Protocol):
    """What :class:`NormalizerSync` reads and writes of an observation normaliser."""

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor


class NormalizerSync:
    """Keeps an :class:`~embodied.rl.normalizer.EmpiricalNormalization` identical on all ranks.

    :meth:`mark` remembers the (common) statistics; after each rank has folded its own
    samples in, :meth:`merge` combines the ranks' increments (counts, sums, sums of
    squares, in float64) into the statistics of all the samples together.
    """

    def __init__(self, normalizer: RunningStatistics | None):
        self.normalizer = normalizer if _active() else None
        self._base: torch.Tensor | None = None

    def _moments(self) -> torch.Tensor:
        norm = self.normalizer
        assert norm is not None  # only called with a normaliser
        count = norm.count.double()
        mean, var = norm.mean.double().reshape(-1), norm.var.double().reshape(-1)
        return torch.cat([count.reshape(1), count * mean, count * (var + mean.square())])

    def mark(self) -> None:
        """Remember the statistics all ranks share now."""
        if self.normalizer is not None:
            self._base = self._moments()

    def merge(self) -> None:
        """Fold every rank's samples since :meth:`mark` into every rank's statistics."""
        norm = self.normalizer
        if norm is None or self._base is None:
            return
        increment = (self._moments() - self._base).to(_device())
        dist.all_reduce(increment)
        total = self._base + increment.cpu()
        count = total[0]
        if count <= 0:
            return
        dim = norm.mean.numel()
        mean = total[1:1 + dim] / count
        var = (total[1 + dim:] / count - mean.square()).clamp(min=0.0)
        norm.mean.copy_(mean.view_as(norm.mean).to(norm.mean.dtype))
        norm.var.copy_(var.view_as(norm.var).to(norm.var.dtype))
        norm.count.copy_(count.round().to(norm.count.dtype))
        self._base = None


def check_world_size(saved: int | None, what: str) -> None:
    """Refuse to resume ``what`` (a checkpoint) written by a different number of processes."""
    saved = 1 if saved is None else int(saved)
    if saved != world_size():
        how = "without torchrun" if saved == 1 else \
            f"with torchrun --nproc_per_node={saved} (or --nnodes x --nproc_per_node = {saved})"
        raise WorldSizeError(f"{what} was written by {saved} process(es), this run has "
                             f"{world_size()}: resume it {how}")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a single-machine rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_gone(group: int, timeout_s: float = 10.0) -> None:
    """Wait until no process of process group ``group`` is left (at most ``timeout_s``).

    A SIGKILLed rank may still finish the system call it is in (e.g. renaming a file it
    wrote), so callers that inspect a killed job's files wait for every rank to be gone.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def launch_local(nproc: int, args: Sequence[str], timeout: float,
                 cwd: str | Path | None = None,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``torchrun --nproc_per_node=<nproc> <args>`` on this machine (rendezvous on 127.0.0.1).

    ``args`` follows the rendezvous options: more torchrun options if any, then the
    program (``-m embodied.cli train ...`` or a script). Output is captured; after
    ``timeout`` seconds, or on any error, the whole process group (torchrun and its
    ranks) is killed. A port taken between choosing and binding it is retried once.
    """
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    for attempt in range(2):
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               "--nnodes=1", "--rdzv-backend=c10d",
               f"--rdzv-endpoint=127.0.0.1:{free_port()}", *args]
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:  # whatever is left of the job: torchrun, its agent and its ranks
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            _wait_until_gone(proc.pid)
        if proc.returncode == 0 or attempt or "address already in use" not in err.lower():
            break
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
