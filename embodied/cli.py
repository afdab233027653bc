"""The `embodied` command: `embodied <command> [key=value ...]` (Hydra overrides)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

from embodied.config import ConfigError, load_config


def _resolve(name: str | type) -> Any:
    """``"module:attr"`` imported on use (commands import their heavy modules lazily)."""
    if not isinstance(name, str):
        return name
    module, attr = name.split(":")
    return getattr(importlib.import_module(module), attr)


def _command(target: str, *errors: str | type[BaseException]) -> Callable[[DictConfig], int]:
    """A command that runs ``target`` (``"module:function"``) on the composed config.

    The listed errors (they name the file or value and the fix) are printed as
    ``error: ...`` with exit code 2, without a traceback; Ctrl-C exits with 130
    (training commands write a checkpoint first).
    """

    def run(cfg: DictConfig) -> int:
        caught = tuple(_resolve(e) for e in errors)
        try:
            _resolve(target)(cfg)
        except caught as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
        return 0

    return run


CHECKPOINT_ERROR = "embodied.rl:CheckpointError"
EXPORT_ERROR = "embodied.export:ExportError"
DATASET_ERROR = "embodied.datasets:DatasetError"
BACKEND_ERROR = "sim:BackendError"  # engine not installed, or task not mapped to it
SERVER_ERROR = "embodied.reward.vlm.remote:ServerError"  # reward model server unreachable

COMMANDS: dict[str, tuple[Callable, str]] = {
    "demo": (_command("embodied.demo:run_demo", BACKEND_ERROR),
             "record scripted-expert rollouts of a task to an MP4 (all camera views)"),
    "train": (_command("embodied.train:run_train", CHECKPOINT_ERROR, FileNotFoundError,
                       BACKEND_ERROR, SERVER_ERROR),
              "train a policy with PPO (resumable run folder: metrics, checkpoints, eval video)"),
    "export": (_command("embodied.export:run_export", CHECKPOINT_ERROR, EXPORT_ERROR),
               "export a run's policy to TorchScript/ONNX with its robot metadata"),
    "eval": (_command("embodied.evaluate_cli:run_evaluation", CHECKPOINT_ERROR, EXPORT_ERROR,
                      BACKEND_ERROR),
             "evaluate a run's checkpoint or an exported policy (success, return, video)"),
    "reward train": (_command("embodied.reward.prm.run:run_reward_train", FileNotFoundError,
                              ValueError),
                     "train the learned multi-view PRM on simulated episodes of a task"),
    "reward eval": (_command("embodied.reward.prm.run:run_reward_eval", FileNotFoundError,
                             ValueError),
                    "reward-model metrics on held-out episodes (VOC, success F1/AUROC, ...)"),
    "reward bt": (_command("embodied.reward.bt_train:run_bt", FileNotFoundError, ValueError),
                  "train a Bradley-Terry reward model from preference labels (simulator "
                  "progress or a VLM judge)"),
    "collect": (_command("embodied.datasets.collect:collect", DATASET_ERROR),
                "record rollouts (expert, random or a trained policy) as a LeRobot dataset "
                "with every camera view"),
    "label": (_command("embodied.datasets.label:run_label", DATASET_ERROR, SERVER_ERROR),
              "score a dataset's frames with a reward model into a new dataset (resumable)"),
    "offline": (_command("embodied.offline.train:run_offline", DATASET_ERROR, CHECKPOINT_ERROR),
                "train IQL or BC on a dataset, evaluated in simulation (run folder as for "
                "train)"),
}


def _usage() -> str:
    lines = ["usage: embodied <command> [key=value ...]", "", "commands:"]
    lines += [f"  {name:<13} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Overrides are Hydra's: e.g. `embodied demo task=panda_push num_envs=2`."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `embodied` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    command, overrides = args[0], args[1:]
    if len(args) > 1 and f"{args[0]} {args[1]}" in COMMANDS:  # e.g. `embodied reward train`
        command, overrides = f"{args[0]} {args[1]}", args[2:]
    if command not in COMMANDS:
        print(f"error: unknown command '{command}'\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        cfg = load_config(command.replace(" ", "_"), overrides)
        return COMMANDS[command][0](cfg)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
