"""Simulated rollouts recorded as a LeRobot dataset (what `embodied collect` runs).

Each env of a batch records its first episode from a reset: the policy's
observation (``observation.state``), the action, the env reward, done flags and
success of the reached state, the privileged progress and success of the observed
state (``sim.progress``, ``sim.success``: what the oracle reward model replays),
and every camera view of the observed state (one MP4 stream per camera). Frame t
is the state before action t, at ``timestamp = t * control_dt`` (fps = control rate).
``action`` is in the env's action space (``info.json``: ``embodied.action_space``);
``action.<kind>`` holds the equivalent actions of every other space
(:mod:`embodied.datasets.actions`), so one dataset trains learners in any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import ListConfig, OmegaConf

from embodied.datasets.actions import ActionSpaces, action_column, action_kind, action_names
from embodied.datasets.format import (
    ACTION,
    DONE,
    REWARD,
    SIM_PREFIX,
    STATE,
    SUCCESS,
    TRUNCATED,
    DatasetError,
)
from embodied.datasets.writer import DatasetWriter
from embodied.rl.checkpoint import run_dir_of

Policy = Callable[[torch.Tensor], torch.Tensor]


def observation_names(env: Any) -> list[str]:
    """One name per observation dimension: ``<term>`` or ``<term>.<i>`` for wider terms."""
    from embodied.export import observation_layout

    return [term["name"] if term["size"] == 1 else f"{term['name']}.{i}"
            for term in observation_layout(env) for i in range(term["size"])]


def frame_features(env: Any) -> dict[str, dict[str, Any]]:
    """The non-video frame features of a dataset collected on ``env``, names filled.

    ``action`` is in the env's action space; ``action.<kind>`` holds the equivalent actions
    of every other space (:mod:`embodied.datasets.actions`); ``sim.joint_pos`` the measured
    joint positions (rad) they are computed from.
    """
    def f(dtype: str, names: list[str] | None = None) -> dict[str, Any]:
        return {"dtype": dtype, "shape": [len(names) if names else 1], "names": names}

    spaces = action_spaces(env)
    actions = {action_column(k): f("float32", action_names(k, env.robot))
               for k in spaces.others()}
    return {STATE: f("float32", observation_names(env)),
            ACTION: f("float32", action_names(spaces.native, env.robot)), **actions,
            REWARD: f("float32"), DONE: f("bool"), TRUNCATED: f("bool"), SUCCESS: f("bool"),
            SIM_PREFIX + "progress": f("float32"), SIM_PREFIX + "success": f("bool"),
            SIM_PREFIX + "joint_pos": f("float32", list(env.robot.joint_names))}


def action_spaces(env: Any) -> ActionSpaces:
    """The converter from ``env``'s action space into the others."""
    return ActionSpaces(action_kind(env.action_map), env.robot, env.control_dt,
                        float(env.cfg.action_speed), env.task.ee_bounds)


def make_policy(env: Any, policy: str, noise: float, seed: int) -> tuple[Policy, str]:
    """Action source of a collection run.

    ``expert`` (scripted, with its noise), ``random`` (uniform), or a trained policy (a run folder,
    checkpoint, or exported policy.pt/.onnx) with Gaussian action noise.
    """
    gen = torch.Generator().manual_seed(seed)
    if policy == "expert":
        from sim.experts import expert_names, make_expert

        if env.task.name not in expert_names():
            raise DatasetError(f"task '{env.task.name}' has no scripted expert; use "
                               "policy=random or a trained policy (run folder or export)")
        expert = make_expert(env, noise=noise, seed=seed)
        return (lambda obs: expert()), f"expert(noise={noise:g})"
    if policy == "random":
        return (lambda obs: torch.rand(env.num_envs, env.action_dim, generator=gen) * 2 - 1,
                "random")
    path = Path(policy)
    net = load_policy_file(env, path)

    def act(obs: torch.Tensor) -> torch.Tensor:
        mean = net(obs)
        if noise > 0:
            mean = mean + noise * torch.randn(mean.shape, generator=gen)
        return mean.clamp(-1.0, 1.0)

    return act, f"{path}(noise={noise:g})"


def load_policy_file(env: Any, path: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    """The network of a run folder, checkpoint or exported policy file, checked first.

    It is checked against ``env`` (task, observation and action sizes) before any step:
    a mismatch is an error naming the file, never a tensor-size error mid-rollout.
    """
    if not path.exists():
        raise DatasetError(f"policy '{path}' is neither 'expert', 'random' nor an existing "
                           "run folder, checkpoint or exported policy file")
    if path.suffix in (".pt", ".onnx") and path.parent.name != "checkpoints":
        from embodied.policy_io import check_against_env, load_policy

        net, meta = load_policy(path)
        check_against_env(meta, env)
        return net
    from embodied.export import load_checkpoint_policy

    net, state, ckpt = load_checkpoint_policy(path)
    config = run_dir_of(ckpt) / "config.yaml"
    task = OmegaConf.select(OmegaConf.load(config), "task.name") if config.is_file() else None
    dims = (state.get("obs_dim"), state.get("action_dim"))
    if (task is not None and task != env.task.name) or dims != (env.obs_dim, env.action_dim):
        raise DatasetError(
            f"{ckpt} was trained on task '{task or 'unknown'}' (obs/action dims "
            f"{dims[0]}/{dims[1]}), this collection runs task '{env.task.name}' (dims "
            f"{env.obs_dim}/{env.action_dim}): pass task={task} or a policy of this task")
    return net


def check_sources(env: Any, pairs: list[tuple[str, float]]) -> None:
    """Load and check every policy file of ``pairs`` before anything is recorded.

    See :func:`load_policy_file`.
    """
    for source in dict.fromkeys(s for s, _ in pairs if s not in ("expert", "random")):
        load_policy_file(env, Path(source))


@torch.inference_mode()
def record_round(env: Any, policy: Policy, cameras: Sequence[str], width: int,
                 height: int) -> list[dict[str, Any]]:
    """One episode per env from a fresh reset: per-frame data, views and the outcome."""
    n = env.num_envs
    obs = env.reset()
    spaces = action_spaces(env)
    shadow = spaces.native_map(n)  # the commanded joint targets, replayed from the actions
    shadow.reset(torch.arange(n), env.task.joint_pos)
    progress = env.task.progress().to(torch.float32).clone()
    success_now = env.task.success().clone()
    active = torch.ones(n, dtype=torch.bool)
    steps: list[dict[str, torch.Tensor]] = []
    views: list[np.ndarray] = []
    outcome = torch.zeros(n, dtype=torch.bool)
    returns = torch.zeros(n, dtype=torch.float64)
    length = torch.zeros(n, dtype=torch.long)
    for _ in range(env.max_episode_steps):
        ids = active.nonzero().flatten()
        frame = np.zeros((n, len(cameras), height, width, 3), np.uint8)
        if cameras:
            frame[ids.numpy()] = env.render(list(cameras), ids, width, height).numpy()
        views.append(frame)
        joint_pos = env.task.joint_pos.to(torch.float32).clone()
        action = policy(obs).to(torch.float32).clamp(-1.0, 1.0)
        target = shadow(action)[:, :shadow.num_joints].clone()
        next_obs, reward, terminated, truncated, info = env.step(action)
        steps.append({"obs": obs.clone(), "action": action.clone(), "reward": reward.clone(),
                      "terminated": terminated.clone(), "truncated": truncated.clone(),
                      "success": info["success"].clone(), "progress": progress.clone(),
                      "success_now": success_now.clone(), "active": active.clone(),
                      "joint_pos": joint_pos, "target": target})
        returns += torch.where(active, reward.double(), 0.0)
        length += active.long()
        done = terminated | truncated
        outcome = torch.where(active & done, info["success"], outcome)
        active &= ~done
        progress = info["progress"].to(torch.float32).clone()
        success_now = info["success"].clone()
        obs = next_obs
        if not active.any():
            break
    episodes = []
    for i in range(n):
        t = int(length[i])
        pick = {k: torch.stack([s[k][i] for s in steps[:t]]).numpy() for k in steps[0]}
        last = pick["terminated"][-1] | pick["truncated"][-1]
        others = spaces.convert(pick["action"], pick["joint_pos"][0], pick["target"])
        episodes.append({
            "data": {STATE: pick["obs"], ACTION: pick["action"], REWARD: pick["reward"],
                     DONE: pick["terminated"] | pick["truncated"],
                     TRUNCATED: pick["truncated"] & ~pick["terminated"],
                     SUCCESS: pick["success"], SIM_PREFIX + "progress": pick["progress"],
                     SIM_PREFIX + "success": pick["success_now"],
                     SIM_PREFIX + "joint_pos": pick["joint_pos"],
                     **{action_column(k): v for k, v in others.items()}},
            "videos": {c: np.stack([v[i, j] for v in views[:t]]) for j, c in enumerate(cameras)},
            "success": bool(outcome[i]), "return": float(returns[i]), "complete": bool(last),
        })
    return episodes


def sources(policy: Any, noise: Any) -> list[tuple[str, float]]:
    """(policy, noise) pairs that share the episodes evenly.

    ``policy`` and ``noise`` are each one value or a list; two lists pair up element by
    element, one value pairs with every element of the other's list.
    """
    policies = [str(p) for p in policy] if isinstance(policy, ListConfig | list | tuple) \
        else [str(policy)]
    levels = [float(x) for x in noise] if isinstance(noise, ListConfig | list | tuple) \
        else [float(noise)]
    if len(policies) > 1 and len(levels) > 1 and len(policies) != len(levels):
        raise DatasetError(f"policy has {len(policies)} entries and noise {len(levels)}; give "
                           "lists of one length (pairs) or a single value for one of them")
    n = max(len(policies), len(levels))
    return [(policies[i % len(policies)], levels[i % len(levels)]) for i in range(n)]


def split_episodes(total: int, pairs: list[tuple[str, float]]) -> list[int]:
    """``total`` episodes shared out over the (policy, noise) pairs, the first ones first."""
    if total < 1:
        raise DatasetError(f"episodes must be >= 1, got {total}")
    return [total // len(pairs) + (i < total % len(pairs)) for i in range(len(pairs))]


def record_sources(env: Any, writer: DatasetWriter, pairs: list[tuple[str, float]],
                   counts: list[int], cameras: Sequence[str], width: int, height: int,
                   seed: int, on_episode: Callable[[], None] | None = None
                   ) -> dict[str, list[bool]]:
    """``counts[i]`` episodes of each (policy, noise) pair into ``writer``; successes per policy.

    Pair ``i``'s policy is seeded with ``seed + i``; every policy file is checked against
    the env first (:func:`check_sources`). A resumed ``writer`` (holding the first episodes
    of an interrupted run) gets the rest: the rollouts are replayed from the start, without
    rendering the rounds it already has, so the result equals an uninterrupted run.
    """
    check_sources(env, pairs)
    outcomes: dict[str, list[bool]] = {}
    skip, produced = len(writer.episodes), 0  # a resumed writer holds the first episodes
    for level_i, ((source, noise), count) in enumerate(zip(pairs, counts, strict=True)):
        policy, name = make_policy(env, source, noise, seed + level_i)
        done = 0
        while done < count:
            take = min(env.num_envs, count - done)
            views = [] if produced + take <= skip else cameras  # replayed rounds: no render
            for ep in record_round(env, policy, views, width, height)[:take]:
                if produced >= skip:
                    writer.add_episode(ep["data"], env.instruction, ep["videos"],
                                       {"success": ep["success"], "return": ep["return"],
                                        "policy": name})
                produced += 1
                outcomes.setdefault(name, []).append(ep["success"])
                done += 1
                if on_episode is not None:
                    on_episode()
    return outcomes
