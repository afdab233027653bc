"""The `embodied` command: `embodied <command> [key=value ...]` (Hydra overrides)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from embodied.config import ConfigError, load_config


def _demo(cfg) -> int:
    from embodied.demo import run_demo

    run_demo(cfg)
    return 0


def _train(cfg) -> int:
    from embodied.rl import CheckpointError
    from embodied.train import run_train

    try:
        run_train(cfg)
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _export(cfg) -> int:
    from embodied.export import ExportError, run_export
    from embodied.rl import CheckpointError

    try:
        run_export(cfg)
    except (CheckpointError, ExportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def _eval(cfg) -> int:
    from embodied.evaluate_cli import run_evaluation
    from embodied.export import ExportError
    from embodied.rl import CheckpointError

    try:
        run_evaluation(cfg)
    except (CheckpointError, ExportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


COMMANDS: dict[str, tuple[Callable, str]] = {
    "demo": (_demo, "record scripted-expert rollouts of a task to an MP4 (all camera views)"),
    "train": (_train, "train a policy with PPO (resumable run folder: metrics, checkpoints, "
                      "eval video)"),
    "export": (_export, "export a run's policy to TorchScript/ONNX with its robot metadata"),
    "eval": (_eval, "evaluate a run's checkpoint or an exported policy (success, return, video)"),
}


def _usage() -> str:
    lines = ["usage: embodied <command> [key=value ...]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Overrides are Hydra's: e.g. `embodied demo task=panda_push num_envs=2`."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `embodied` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    command, overrides = args[0], args[1:]
    if command not in COMMANDS:
        print(f"error: unknown command '{command}'\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        cfg = load_config(command, overrides)
        return COMMANDS[command][0](cfg)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
