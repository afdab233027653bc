"""The application layer: one module per CLI verb, each a recipe over library calls.

Each module registers its command once (:func:`embodied.commands.registry.command`);
importing this package registers them all, in the order `embodied --help` lists them
(hence the import order below). The library never imports from here.
"""

# isort: skip_file
from __future__ import annotations

from embodied.commands import demo, train, export, eval, reward_train, reward_eval, reward_bt
from embodied.commands import collect, label, offline
from embodied.commands.registry import COMMANDS, Command, command

__all__ = ["COMMANDS", "Command", "collect", "command", "demo", "eval", "export", "label",
           "offline", "reward_bt", "reward_eval", "reward_train", "train"]
