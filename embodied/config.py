"""Hydra configuration: compose a command's config from configs/ with CLI overrides.

``configs/commands/<command>.yaml`` is one per command (named after its module in
:mod:`embodied.commands`; package ``_global_``, so its defaults name the groups by
absolute path, ``/task: panda_reach``); every other folder of ``configs/`` is a
group (``task/``, ``sim/``, ``algo/``, ``reward/``) chosen on the command line with
``task=panda_push``.

Resolver ``${run_iterations:}``: the PPO iterations the run will train, i.e.
``max_iterations``, or the iterations that cover ``total_env_steps`` when that is set
(:func:`run_iterations`); a schedule over "the whole run" names it, not
``${max_iterations}``, which ``total_env_steps`` does not change.

A run resumed with ``resume=<run>`` keeps its own budget (:data:`BUDGET_KEYS`) unless
the command line sets one of those keys (which then replaces the whole budget).

Composed values are validated in one pass (:func:`check_values`): an override keeps
the type of the value it replaces (``num_envs=abc`` and ``seed=1.5`` are errors, never
truncated), counts are in range (:data:`AT_LEAST`), and a ``device`` exists.
"""

from __future__ import annotations

import math
import os
import re
from importlib import resources
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict

from embodied.files import writing


class ConfigError(ValueError):
    """A config that cannot be composed, or holds a value of the wrong type or range.

    Unknown group options and bad override syntax are errors too; the message names the
    key and the fix.
    """


def run_iterations(cfg: DictConfig) -> int:
    """PPO iterations of a run: those covering ``total_env_steps`` if set, else ``max_iterations``.

    One iteration collects ``num_envs * algo.num_steps`` env steps.
    """
    if cfg.get("total_env_steps") is None:
        return int(cfg.max_iterations)
    return math.ceil(cfg.total_env_steps / (cfg.num_envs * cfg.algo.num_steps))


# How long a run trains: PPO iterations or env steps (train), gradient steps (offline).
BUDGET_KEYS = ("max_iterations", "total_env_steps", "steps")


def saved_config(path: str | Path) -> DictConfig | None:
    """The config.yaml of the run folder ``path`` points into (a folder or a checkpoint)."""
    path = Path(path)
    for folder in (path, path.parent, path.parent.parent):
        if (folder / "config.yaml").is_file():
            saved = OmegaConf.load(folder / "config.yaml")
            return saved if isinstance(saved, DictConfig) else None
    return None


def override_key(override: str) -> str:
    """The key a Hydra override sets, adds or deletes: ``+a.b=1`` -> ``a.b``."""
    return override.split("=", 1)[0].lstrip("+~")


def resumed_budget(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """``cfg`` (updated in place) with the budget keys of the run ``cfg.resume`` continues.

    Unchanged when ``cfg`` resumes nothing, when the resumed folder has no config.yaml, or
    when ``overrides`` set any budget key (an extension: ``max_iterations=500``). Otherwise
    every budget key the saved config has is copied, so ``resume=<run>`` alone trains to
    the run's own end rather than to the defaults of the command line's task.
    """
    if cfg.get("resume") is None:
        return cfg
    given = {override_key(o) for o in overrides}
    saved = saved_config(cfg.resume)
    if saved is None or given.intersection(BUDGET_KEYS):
        return cfg
    budget = OmegaConf.create({k: saved[k] for k in BUDGET_KEYS if k in saved and k in cfg})
    with open_dict(cfg):
        cfg.merge_with(budget)
    return cfg


OmegaConf.register_new_resolver("run_iterations", lambda *, _root_: run_iterations(_root_),
                                replace=True)


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
    cfg = _compose(name, overrides)
    groups = [o for o in overrides if _is_group_choice(o)]
    check_values(cfg, _compose(name, groups) if len(groups) < len(overrides) else cfg)
    return resumed_budget(cfg, overrides)


def _is_group_choice(override: str) -> bool:
    """``task=panda_push``-style overrides (they choose a group's file, set no value)."""
    key = override_key(override)
    return "." not in key and (config_dir() / key).is_dir() and key != COMMANDS_DIR


# Counts: the smallest value of each key (dotted path, else its last name); all integers.
AT_LEAST = {
    "seed": 0, "video_envs": 0, "eval.num_envs": 0, "save_interval": 0,
    **dict.fromkeys(
        ("num_envs", "max_iterations", "total_env_steps", "episodes",
         "episodes_per_file", "torch_threads", "physics_threads", "batch_size", "batch_envs",
         "epochs", "num_steps", "num_epochs", "num_mini_batches", "steps", "width", "height",
         "fps", "stride"), 1),
}


def check_values(cfg: DictConfig, reference: DictConfig) -> None:
    """Raise a :class:`ConfigError` for the first value of ``cfg`` that does not fit.

    Not fitting: a type other than the ``reference`` config's value at that key (the
    config composed without value overrides), a count below its :data:`AT_LEAST` bound or
    not an integer, or a ``device`` that this machine lacks.
    """
    for key, value in _leaves(OmegaConf.to_container(cfg, resolve=True)):
        if key.startswith("task."):  # task terms are checked by the task (sim.task)
            continue
        ref = OmegaConf.select(reference, key, default=None)
        bound = AT_LEAST.get(key, AT_LEAST.get(key.rsplit(".", 1)[-1]))
        if value is None or (isinstance(value, list) and bound is None):
            continue  # a list may stand for one value (collect's policy=[..] noise=[..])
        if bound is not None or (isinstance(ref, int) and not isinstance(ref, bool)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{key}={value}: expected an integer"
                                  + (f" >= {bound}" if bound is not None else ""))
            if bound is not None and value < bound:
                raise ConfigError(f"{key}={value}: must be >= {bound}")
        elif isinstance(ref, float) and (isinstance(value, bool)
                                         or not isinstance(value, int | float)):
            raise ConfigError(f"{key}={value}: expected a number")
        elif isinstance(ref, bool) and not isinstance(value, bool):
            raise ConfigError(f"{key}={value}: expected true or false")
        if key.rsplit(".", 1)[-1] == "device":
            _check_device(key, str(value))


def _leaves(tree: object, prefix: str = "") -> list[tuple[str, object]]:
    if isinstance(tree, dict):
        return [leaf for k, v in tree.items() for leaf in _leaves(v, f"{prefix}{k}.")]
    return [(prefix[:-1], tree)]


def _check_device(key: str, device: str) -> None:
    """A :class:`ConfigError` if ``device`` names a CUDA device torch cannot see."""
    if not device.startswith("cuda"):
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.split(":", 1)[1]) if ":" in device and device.split(":")[1].isdigit() \
        else 0
    if index >= count:
        raise ConfigError(f"{key}={device}: this machine has "
                          f"{f'{count} CUDA device(s)' if count else 'no CUDA GPU'} visible "
                          f"to torch; use {key}=cpu")


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
        match = _TERM_OVERRIDE.match(override)
        if match is None:  # the caller passes only overrides this pattern selected
            continue
        group, term, param = match.groups()
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
    path = run_dir / "config.yaml"
    with writing(path) as tmp:
        tmp.write_text(OmegaConf.to_yaml(cfg, resolve=True))
    return path
