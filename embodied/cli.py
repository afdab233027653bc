"""The `embodied` command: `embodied <command> [key=value ...]` (Hydra overrides)."""

from __future__ import annotations

import sys

from embodied import distributed
from embodied.commands import COMMANDS, Command
from embodied.commands.registry import error_line
from embodied.config import load_config


def _usage() -> str:
    lines = ["usage: embodied <command> [key=value ...]", "", "commands:"]
    lines += [f"  {name:<13} {cmd.help}" for name, cmd in COMMANDS.items()]
    lines += ["", "Overrides are Hydra's: e.g. `embodied demo task=panda_push num_envs=2`."]
    return "\n".join(lines)


def _run(cmd: Command, overrides: list[str]) -> int:
    """Compose the command's config and run it.

    Bad input (the command's listed errors, config, robot.yaml and memory errors, OS
    errors such as a read-only folder or a full disk: see
    :func:`~embodied.commands.registry.error_line`) is printed as one ``error: ...``
    line with exit code 2, without a traceback; Ctrl-C exits with 130 (training
    commands write a checkpoint first). Under torchrun the ranks that succeed leave the
    process group together.
    """
    try:
        cmd.run(load_config(cmd.config, overrides))
        distributed.leave()
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        line = error_line(cmd, err)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `embodied` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    name, overrides = args[0], args[1:]
    if len(args) > 1 and f"{args[0]} {args[1]}" in COMMANDS:  # e.g. `embodied reward train`
        name, overrides = f"{args[0]} {args[1]}", args[2:]
    if name not in COMMANDS:
        print(f"error: unknown command '{name}'\n\n{_usage()}", file=sys.stderr)
        return 2
    return _run(COMMANDS[name], overrides)


if __name__ == "__main__":
    sys.exit(main())
