"""Worker of the torchrun tests: ``embodied <args>`` in a rank that may be made to die.

With ``KILL_RANK=<r>`` in the environment, rank r kills itself (SIGKILL) right after
writing its first labels (``embodied label``) or after the first checkpoint of the
run (``embodied train``). With ``KILL_ONCE=<file>`` it dies only if that file does not
exist yet (and creates it), so a torchrun restart runs through.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from embodied import distributed
from embodied.cli import main
from embodied.datasets import label
from embodied.rl import runner


def die_after(owner: object, name: str) -> None:
    """Make ``owner.<name>`` kill this process once it has returned."""
    original = getattr(owner, name)

    def then_die(*args, **kwargs):
        result = original(*args, **kwargs)
        once = os.environ.get("KILL_ONCE")
        if once is None or not Path(once).exists():
            if once is not None:
                Path(once).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, then_die)


if os.environ.get("KILL_RANK") == str(distributed.rank()):
    die_after(label, "save_npz")
    die_after(runner.OnPolicyRunner, "save")

sys.exit(main(sys.argv[1:]))
