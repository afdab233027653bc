"""Hydra configuration: compose a command's config from configs/ with CLI overrides.

``configs/commands/<command>.yaml`` is one per command (named after its module in
:mod:`embodied.commands`; package ``_global_``, so its defaults name the groups by
absolute path, ``/task: panda_reach``); every other folder of ``configs/`` is a
group (``task/``, ``sim/``, ``algo/``, ``reward/``) chosen on the command line with
``task=panda_push``.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf


class ConfigError(ValueError):
    """A config that cannot be composed (unknown group option, bad override syntax)."""


def config_dir() -> Path:
    """The configs folder: $EMBODIED_CONFIGS, else the one shipped inside the package.

    The shipped one is found through importlib.resources, so a regular (non-editable)
    install works as well as an editable one.
    """
    env = os.environ.get("EMBODIED_CONFIGS")
    path = Path(env) if env else Path(str(resources.files("embodied") / "configs"))
    if not path.is_dir():
        raise ConfigError(f"config folder {path} not found; set EMBODIED_CONFIGS to it")
    return path


COMMANDS_DIR = "commands"


def load_config(name: str, overrides: list[str] | None = None) -> DictConfig:
    """Compose configs/commands/<name>.yaml with Hydra overrides such as ``task=panda_push``.

    Interpolations are resolved, so the returned config is what the run uses.
    """
    overrides = list(overrides or [])
    term_overrides = [o for o in overrides if _TERM_OVERRIDE.match(o)]
    if term_overrides:  # name an unknown term (and the known ones) before Hydra refuses it
        _check_terms(_compose(name, [o for o in overrides if o not in term_overrides]),
                     term_overrides)
    return _compose(name, overrides)


def _compose(name: str, overrides: list[str]) -> DictConfig:
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            cfg = compose(config_name=f"{COMMANDS_DIR}/{name}", overrides=overrides)
    except HydraException as err:  # named as users know it: the command, not its file
        raise ConfigError(str(err).replace(f"'{COMMANDS_DIR}/{name}'", f"'{name}'")) from err
    OmegaConf.resolve(cfg)
    return cfg


# task.rewards.<term>[.params.<param>] / task.observations.<term> overrides (with + or ~)
_TERM_OVERRIDE = re.compile(
    r"^[+~]{0,2}task\.(rewards|observations)\.([^.=]+)(?:\.params\.([^.=]+))?")


def _check_terms(cfg: DictConfig, term_overrides: list[str]) -> None:
    """A :class:`ConfigError` for an override of a term (or parameter) the task lacks."""
    for override in term_overrides:
        group, term, param = _TERM_OVERRIDE.match(override).groups()
        kind = group[:-1]  # reward | observation
        terms = (cfg.get("task") or {}).get(group) or {}
        if term not in terms:
            raise ConfigError(f"task '{cfg.task.name}' has no {kind} term '{term}'; its {kind} "
                              f"terms: {list(terms)}")
        params = terms[term].get("params") or {}
        if param is not None and param not in params:
            raise ConfigError(f"{kind} term '{term}' of task '{cfg.task.name}' has no "
                              f"parameter '{param}'; its parameters: {list(params)}")


def save_config(cfg: DictConfig, run_dir: Path) -> Path:
    """Write the resolved config next to the run's outputs."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.yaml"
    path.write_text(OmegaConf.to_yaml(cfg, resolve=True))
    return path
