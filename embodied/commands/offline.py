"""`embodied offline`: IQL or BC from a dataset path, evaluated in simulation.

The run folder is the one of `embodied train` (:mod:`embodied.run_folder`); its
checkpoints are read by `embodied eval` and `embodied export`.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from embodied.commands.registry import command
from embodied.config import ConfigError
from embodied.datasets import DatasetError, LeRobotDataset
from embodied.datasets.actions import ACTION_COLUMN_PREFIX, action_column
from embodied.datasets.format import ACTION
from embodied.datasets.rabc import RABC_WEIGHT
from embodied.envs import make_train_env
from embodied.learners.base import train_in
from embodied.learners.factory import learner_class
from embodied.offline.data import load_transitions
from embodied.offline.finetune import FinetuneConfig, finetune_env
from embodied.offline.runner import with_dataset_task
from embodied.rl.checkpoint import CheckpointError
from embodied.rl.evaluate import evaluate
from embodied.run_folder import EVAL_SEED_OFFSET, RunFolder, print_summary


def action_key(cfg: DictConfig, ds: LeRobotDataset) -> str:
    """The dataset column of ``cfg.action_space`` (``action`` for the recorded space)."""
    native = (ds.info.get("embodied") or {}).get("action_space")
    kind = cfg.get("action_space")
    if kind is None or kind == native:
        return ACTION
    column = action_column(str(kind))
    if column not in ds.features:
        have = [native] + [k.removeprefix(ACTION_COLUMN_PREFIX) for k in ds.features
                           if k.startswith(ACTION_COLUMN_PREFIX)]
        raise DatasetError(f"action_space={kind}: {ds.root} holds actions of {have}; choose "
                           "one of them (or recollect with this version of `embodied collect`)")
    return column


def with_action_space(cfg: DictConfig, ds: LeRobotDataset) -> DictConfig:
    """``cfg`` whose task acts in ``action_space`` (the policy is evaluated in that space)."""
    if cfg.get("action_space") is not None:
        action_key(cfg, ds)  # an unknown space is an error before anything runs
        cfg.task.action = str(cfg.action_space)
    return cfg


def finetune_config(cfg: DictConfig) -> FinetuneConfig:
    """``cfg.finetune`` checked before anything trains (fine-tuning needs ``algo=iql``)."""
    try:
        tune = FinetuneConfig.from_dict(dict(cfg.get("finetune") or {}))
    except ValueError as err:
        raise ConfigError(str(err)) from err
    if tune.env_steps > 0 and cfg.algo.name != "iql":
        raise ConfigError(f"finetune.env_steps={tune.env_steps} fine-tunes IQL's critics and "
                          f"policy online; algo={cfg.algo.name} has no critics: use algo=iql "
                          "or finetune.env_steps=0")
    return tune


def run_finetune(cfg: DictConfig, ds: LeRobotDataset, learner: Any,
                 tune: FinetuneConfig) -> dict[str, Any]:
    """Evaluate, fine-tune online (:mod:`embodied.offline.finetune`); returns its summary.

    The evaluation before fine-tuning plays the same episodes as the final one (no video).
    """
    before = None
    if int(cfg.eval.num_envs) > 0:
        env = make_train_env(cfg, int(cfg.eval.num_envs), int(cfg.seed) + EVAL_SEED_OFFSET)
        policy = learner.act()
        if hasattr(policy, "bind_env"):
            policy.bind_env(env)
        try:
            before = evaluate(policy, env)
        finally:
            env.close()
        print(f"before fine-tuning: success {before['success_rate']:.0%} of "
              f"{before['episodes']} episodes")
    env, reward = finetune_env(ds, str(cfg.reward_key),
                               lambda n, seed: make_train_env(cfg, n, seed), tune.num_envs,
                               int(cfg.seed))
    print(f"fine-tuning online for {tune.env_steps:,} env steps; reward: {reward}")
    try:
        stats = learner.finetune(tune, env)
    finally:
        env.close()
    return {**stats, "reward": reward,
            "eval_before": None if before is None else
            {k: before[k] for k in ("success_rate", "episode_return", "episodes")}}


@command("offline", "train IQL or BC on a dataset, evaluated in simulation (run folder as for "
         "train)", errors=(DatasetError, CheckpointError))
def run_offline(cfg: DictConfig) -> dict[str, Any]:
    """Train per ``cfg`` (configs/commands/offline.yaml); returns the summary."""
    torch.set_num_threads(int(cfg.torch_threads))
    if not cfg.get("dataset"):
        raise DatasetError("no dataset given: pass dataset=PATH (a LeRobot dataset folder)")
    learner_cls = learner_class(str(cfg.algo.name))
    if learner_cls.online:
        raise ConfigError(f"algo={cfg.algo.name} learns online: use `embodied train`")
    tune = finetune_config(cfg)
    ds = LeRobotDataset(str(cfg.dataset))
    cfg = with_action_space(with_dataset_task(cfg, ds), ds)
    run = RunFolder.from_config(cfg, learner_cls.checkpoint_suffix, learner_cls.checkpoint_kind)
    cfg = run.write_config(cfg)
    data = load_transitions(ds.root, str(cfg.reward_key), action_key=action_key(cfg, ds),
                            chunk=int(cfg.algo.get("chunk") or 1),
                            weight_key=RABC_WEIGHT if cfg.algo.name == "rabc" else None)
    transitions = len(data)  # the dataset's (fine-tuning appends online ones)
    eval_env = None
    if int(cfg.eval_episodes) > 0:
        eval_env = make_train_env(cfg, min(int(cfg.eval_episodes), 64),
                                  int(cfg.seed) + EVAL_SEED_OFFSET)
    learner = learner_cls.build(cfg, eval_env, run, data)
    trained = train_in(run, learner, learner_cls.budget(cfg),
                       f"embodied offline dataset={cfg.dataset} resume={run.path}")
    last, train_s = trained.last, trained.seconds
    tuned = None
    if tune.env_steps > learner.finetuned_env_steps:
        tuned = run_finetune(cfg, ds, learner, tune)
    evaluation = run.evaluate(cfg, learner.act())
    name = learner.label
    curve = run.plot(f"{cfg.task.name}: {name} from {ds.root.name} ({transitions} transitions), "
                     f"seed {cfg.seed}", evaluation, x="gradient_steps",
                     xlabel="gradient steps", evaluated_only=True)
    summary = {"task": cfg.task.name, "algo": str(cfg.algo.name), "dataset": str(ds.root),
               "reward_key": str(cfg.reward_key), "transitions": transitions,
               "run_dir": str(run.path), "gradient_steps": learner.iteration,
               "train_seconds": round(train_s, 1),
               "gradient_steps_per_s": last.get("gradient_steps_per_s"),
               "learning_curve": str(curve) if curve else None, "eval": evaluation,
               **({"finetune": tuned} if tuned else {})}
    print_summary(f"{cfg.task.name}: {name} on {transitions:,} transitions of {ds.root}, "
                  f"{learner.progress_text()} in {train_s:.0f} s", None, 0, evaluation)
    return run.finish(summary)

