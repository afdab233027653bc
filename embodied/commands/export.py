"""`embodied export`: a run's policy as TorchScript/ONNX with its robot metadata.

Writes ``<run>/export/`` (see :func:`embodied.export.export_run`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from embodied.commands.registry import command
from embodied.export import export_run
from embodied.policy_io import ExportError
from embodied.rl.checkpoint import CheckpointError


def _size(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


@command("export", "export a run's policy to TorchScript/ONNX with its robot metadata",
         errors=(CheckpointError, ExportError))
def run_export(cfg: DictConfig) -> dict[str, Any]:
    """`embodied export run=PATH [format=both|torchscript|onnx] [checkpoint=FILE] [out=DIR]`."""
    torch.set_num_threads(int(cfg.get("torch_threads") or 1))
    result = export_run(cfg.run, str(cfg.format), cfg.get("checkpoint"), cfg.get("out"),
                        int(cfg.get("parity_samples") or 1024))
    meta = result["metadata"]
    print(f"exported {meta['task']} policy ({meta['robot']}, obs {meta['obs_dim']} -> action "
          f"{meta['action_dim']}) from {result['checkpoint']}")
    for name, art in result["artifacts"].items():
        print(f"  {name:<12} {_size(art['bytes']):>10}  parity max |err| "
              f"{art['parity_max_abs_error']:.2e}  sha256 {art['sha256'][:12]}")
    print(f"  metadata     {Path(result['out_dir']) / 'policy.json'} (+ robot.yaml)")
    return result
