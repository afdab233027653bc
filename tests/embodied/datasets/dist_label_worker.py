"""Worker of test_label_distributed.py, launched by torchrun: ``embodied label <overrides>``.

With ``KILL_RANK=<r>`` in the environment, rank r kills itself (SIGKILL) right after
writing the labels of its first episode.
"""

from __future__ import annotations

import os
import signal
import sys

from embodied import distributed
from embodied.cli import main
from embodied.datasets import label

if os.environ.get("KILL_RANK") == str(distributed.rank()):
    save_npz = label.save_npz

    def save_then_die(path, arrays):
        save_npz(path, arrays)
        os.kill(os.getpid(), signal.SIGKILL)

    label.save_npz = save_then_die

sys.exit(main(["label", *sys.argv[1:]]))
