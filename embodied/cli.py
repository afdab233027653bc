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
    except (CheckpointError, FileNotFoundError) as err:
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


def _dataset_command(run: Callable) -> Callable:
    """A dataset command: a DatasetError is printed (it names the file), exit code 2."""

    def command(cfg) -> int:
        from embodied.datasets import DatasetError

        try:
            run(cfg)
        except DatasetError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
        return 0

    return command


def _collect(cfg) -> int:
    from embodied.datasets.collect import collect

    return _dataset_command(collect)(cfg)


def _label(cfg) -> int:
    from embodied.datasets.label import run_label

    return _dataset_command(run_label)(cfg)


def _offline(cfg) -> int:
    from embodied.offline.train import run_offline
    from embodied.rl import CheckpointError

    def run(cfg) -> None:
        try:
            run_offline(cfg)
        except CheckpointError as err:
            from embodied.datasets import DatasetError

            raise DatasetError(str(err)) from err

    return _dataset_command(run)(cfg)


def _reward_command(name: str, module: str = "embodied.reward.prm.run") -> Callable:
    """`embodied reward train|eval|bt`: file and value errors are printed, exit code 2."""

    def command(cfg) -> int:
        import importlib

        try:
            getattr(importlib.import_module(module), name)(cfg)
        except (FileNotFoundError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
        return 0

    return command


COMMANDS: dict[str, tuple[Callable, str]] = {
    "demo": (_demo, "record scripted-expert rollouts of a task to an MP4 (all camera views)"),
    "train": (_train, "train a policy with PPO (resumable run folder: metrics, checkpoints, "
                      "eval video)"),
    "export": (_export, "export a run's policy to TorchScript/ONNX with its robot metadata"),
    "eval": (_eval, "evaluate a run's checkpoint or an exported policy (success, return, video)"),
    "reward train": (_reward_command("run_reward_train"),
                     "train the learned multi-view PRM on simulated episodes of a task"),
    "reward eval": (_reward_command("run_reward_eval"),
                    "reward-model metrics on held-out episodes (VOC, success F1/AUROC, ...)"),
    "reward bt": (_reward_command("run_bt", "embodied.reward.bt_train"),
                  "train a Bradley-Terry reward model from preference labels (simulator "
                  "progress or a VLM judge)"),
    "collect": (_collect, "record rollouts (expert, random or a trained policy) as a LeRobot "
                          "dataset with every camera view"),
    "label": (_label, "score a dataset's frames with a reward model into a new dataset "
                      "(resumable)"),
    "offline": (_offline, "train IQL or BC on a dataset, evaluated in simulation (run folder "
                          "as for train)"),
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
