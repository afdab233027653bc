"""The reward-model seam: ``score(frames [B, V, H, W, 3], instruction) -> progress [B]``.

A reward model judges task progress, in [0, 1], for a batch of multi-view camera
observations and the task's instruction. Learners turn progress into an RL reward
with potential-based shaping (``embodied.reward.shaping``); the labeller writes it
into datasets. Subclasses implement ``_score`` on validated input; ``score`` does
the checks every model needs (dtype, shape, batch size, camera selection), so
every model fails the same way on bad input.

Two kinds of model share this interface:

- frame models (``requires_frames = True``): CLIP/SigLIP zero-shot, VLMs, learned
  PRMs. They read pixels only.
- state models (``requires_state = True``): they read privileged simulator or
  dataset state passed as ``score(..., state=info)``, e.g. ``SimProgressReward``
  returns the simulator's own progress. Callers check ``requires_frames`` to skip
  rendering, which is the expensive part of any frame-based reward on a CPU.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from sim.registry import Registry


@dataclass
class RewardOutput:
    """What a reward model returns for a batch of B observations.

    ``progress``: float32 [B] in [0, 1] (1 = task complete). ``success_prob``:
    float32 [B] in [0, 1], or None if the model does not estimate success.
    """

    progress: torch.Tensor
    success_prob: torch.Tensor | None = None


Frames = torch.Tensor | np.ndarray


class RewardModel(abc.ABC):
    """Scores task progress from camera frames (or privileged state), batched.

    Attributes a subclass sets in ``__init__``:

    - ``device``: where the model runs; frames are moved there, outputs come back on it.
    - ``camera_names``: the views it expects, in order, or None for any number of
      any views. When set, ``score`` picks these views by name from ``cameras``.
    - ``image_size``: the (height, width) it was built for, the size worth rendering
      at; None for any. Frames of other sizes are accepted (the model resizes).
    """

    requires_frames: bool = True
    requires_state: bool = False
    registry_name: str | None = None  # the name it is registered under

    device: torch.device = torch.device("cpu")
    camera_names: tuple[str, ...] | None = None
    image_size: tuple[int, int] | None = None

    def score(
        self,
        frames: Frames | None,
        instruction: str | Sequence[str],
        *,
        cameras: Sequence[str] | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> RewardOutput:
        """Progress (and optionally success probability) of B observations.

        ``frames``: uint8 [B, V, H, W, 3] (``env.render()``'s layout), a torch tensor or
        numpy array; may be None for a model that does not require frames.
        ``instruction``: one string for the whole batch, or B strings.
        ``cameras``: the names of the V views (``env.camera_names`` or the list given to
        ``render``); needed when the model expects particular cameras.
        ``state``: privileged per-env state (an env step's ``info``) for state models.
        """
        batch: int | None = None
        if self.requires_frames:
            frames = self._select_views(check_frames(frames), cameras).to(self.device)
            batch = frames.shape[0]
        elif frames is not None:
            frames = check_frames(frames)
            batch = frames.shape[0]
        if self.requires_state:
            if state is None:
                raise ValueError(f"{type(self).__name__} reads privileged state: pass "
                                 "score(frames, instruction, state=info) with the env "
                                 "step's info (or a dataset row's state columns)")
            batch = self._state_batch(state) if batch is None else batch
        if batch is None:
            raise ValueError("score() got neither frames nor state")
        out = self._score(frames, instructions(instruction, batch), state)
        if out.progress.shape != (batch,):
            raise RuntimeError(f"{type(self).__name__} returned progress of shape "
                               f"{tuple(out.progress.shape)}, expected ({batch},)")
        return out

    __call__ = score

    @abc.abstractmethod
    def _score(self, frames: torch.Tensor | None, instructions: list[str],
               state: Mapping[str, Any] | None) -> RewardOutput:
        """Score validated input: frames uint8 [B, V, H, W, 3] on ``device`` (or None)."""

    def _state_batch(self, state: Mapping[str, Any]) -> int:
        """The batch size B of a state mapping (state models override if needed)."""
        for value in state.values():
            if isinstance(value, torch.Tensor | np.ndarray) and value.ndim >= 1:
                return int(value.shape[0])
        raise ValueError("state holds no per-env [B, ...] array to take the batch size from")

    def _select_views(self, frames: torch.Tensor, cameras: Sequence[str] | None) -> torch.Tensor:
        """The views this model expects, in its order; all views if it takes any."""
        want = self.camera_names
        if want is None:
            return frames
        if cameras is None:
            if frames.shape[1] != len(want):
                raise ValueError(
                    f"{type(self).__name__} expects the cameras {list(want)} but got "
                    f"{frames.shape[1]} unnamed views; pass cameras=env.camera_names (or "
                    f"render with cameras={list(want)})")
            return frames
        cameras = list(cameras)
        if len(cameras) != frames.shape[1]:
            raise ValueError(f"cameras names {len(cameras)} views ({cameras}) but frames "
                             f"have {frames.shape[1]}; pass the list given to render()")
        missing = [c for c in want if c not in cameras]
        if missing:
            raise ValueError(
                f"{type(self).__name__} expects the camera(s) {missing} that the frames do "
                f"not have (they have {cameras}); render with cameras={list(want)}, or set "
                f"the model's camera_names to views this task has")
        return frames[:, [cameras.index(c) for c in want]]


def check_frames(frames: Frames | None) -> torch.Tensor:
    """Frames as a uint8 torch tensor [B, V, H, W, 3]; a ValueError that names the fix if not."""
    if frames is None:
        raise ValueError("this reward model reads camera frames: pass "
                         "env.render(cameras, width=..., height=...) as frames")
    if isinstance(frames, np.ndarray):
        frames = torch.from_numpy(np.ascontiguousarray(frames))
    if not isinstance(frames, torch.Tensor):
        raise ValueError(f"frames must be a torch tensor or numpy array, got {type(frames)}")
    if frames.dtype != torch.uint8:
        raise ValueError(f"frames must be uint8 [B, V, H, W, 3] (as env.render() returns), "
                         f"got dtype {frames.dtype}; convert images in [0, 1] with "
                         "(x * 255).round().clamp(0, 255).to(torch.uint8)")
    shape = tuple(frames.shape)
    if frames.ndim == 4 and shape[-1] == 3:
        raise ValueError(f"frames must be [B, V, H, W, 3], got {list(shape)} (no view axis); "
                         "for a single camera use frames[:, None]")
    if frames.ndim != 5 or shape[-1] != 3:
        hint = (" (channels first? use frames.permute(0, 1, 3, 4, 2))"
                if frames.ndim == 5 and shape[2] == 3 else "")
        raise ValueError(f"frames must be uint8 [B, V, H, W, 3] with RGB last, got "
                         f"{list(shape)}{hint}")
    if 0 in shape:
        raise ValueError(f"frames must not be empty, got {list(shape)}")
    return frames


def instructions(instruction: str | Sequence[str], batch: int) -> list[str]:
    """One instruction per env: a single string is shared by the whole batch."""
    if isinstance(instruction, str):
        return [instruction] * batch
    out = list(instruction)
    if len(out) != batch:
        raise ValueError(f"got {len(out)} instructions for a batch of {batch}; pass one "
                         "string for the whole batch or one per env")
    if not all(isinstance(s, str) for s in out):
        raise ValueError("instructions must be strings")
    return out


# ------------------------------------------------------------------ registry
T = TypeVar("T")

REWARD_MODELS: Registry[type[RewardModel]] = Registry(
    "reward model", ValueError, listing="available:",
    hint=" (register your own with @register_reward_model)")


def register_reward_model(name: str, model: str | None = None) -> Callable[[type[T]], type[T]]:
    """Register a ``RewardModel`` buildable as ``make_reward_model({'name': name})``.

    As a class decorator, ``@register_reward_model(name)``; or with ``model`` the
    ``"module:Class"`` path of the class, imported on first use (the built-in models:
    ``import embodied.reward`` never pulls in transformers unless a model needs it).
    """
    if model is not None:
        REWARD_MODELS.register(name, model)

    def decorator(cls: type[T]) -> type[T]:
        if not (isinstance(cls, type) and issubclass(cls, RewardModel)):
            raise TypeError(f"@register_reward_model('{name}') needs a RewardModel subclass, "
                            f"got {cls!r}")
        REWARD_MODELS.register(name, cls)
        cls.registry_name = name
        return cls

    return decorator


def reward_model_names() -> list[str]:
    """Names ``make_reward_model`` accepts (built-in and registered)."""
    return REWARD_MODELS.names()


def get_reward_model_class(name: str) -> type[RewardModel]:
    """The class registered as ``name`` (importing a built-in model's module on demand)."""
    cls = REWARD_MODELS.get(name)
    cls.registry_name = name
    return cls


register_reward_model("sim_progress", "embodied.reward.oracle:SimProgressReward")
register_reward_model("clip", "embodied.reward.clip_zero_shot:ClipZeroShotReward")
register_reward_model("prm", "embodied.reward.prm.model:LearnedPRM")
register_reward_model("vlm", "embodied.reward.vlm.progress:VlmProgressReward")
register_reward_model("bt", "embodied.reward.bradley_terry:BradleyTerryReward")
register_reward_model("roboreward", "embodied.reward.vlm.roboreward:RoboReward")
register_reward_model("grm", "embodied.reward.vlm.grm:DopamineGRM")
register_reward_model("sarm", "embodied.reward.vlm.sarm:StageProgressReward")


def make_reward_model(cfg: Mapping[str, Any] | Any) -> RewardModel | None:
    """Build a reward model from config: ``{'name': <registered name>, **kwargs}``.

    Accepts the model mapping itself or a whole ``configs/reward/*.yaml`` group config
    (its ``model`` key is used; ``model: null`` -> None, for rewards without a model such
    as ``sparse``). Also accepts ``_target_`` (Hydra instantiation) for models that live
    outside this package; the result must be a ``RewardModel``.
    """
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    if not isinstance(cfg, Mapping):
        raise ValueError(f"reward model config must be a mapping, got {type(cfg).__name__}")
    if "name" not in cfg and "_target_" not in cfg and "model" in cfg:  # a reward group config
        if cfg["model"] is None:
            return None
        return make_reward_model(cfg["model"])
    kwargs = dict(cfg)
    if "_target_" in kwargs:
        from hydra.utils import instantiate

        model = instantiate(kwargs)
        if not isinstance(model, RewardModel):
            raise ValueError(f"_target_ {kwargs['_target_']} built a {type(model).__name__}, "
                             "not an embodied.reward.RewardModel")
        return model
    if "name" not in kwargs:
        raise ValueError(f"reward model config needs a 'name' (one of {reward_model_names()}), "
                         f"got keys {sorted(kwargs)}")
    return get_reward_model_class(kwargs.pop("name"))(**kwargs)
