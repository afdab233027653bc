"""Load any transformers image-text-to-text model and its processor, without video.

``load_vlm(path_or_id)`` returns ``(model, processor)`` through ``from_pretrained``:
``AutoModelForImageTextToText`` for the model, and the model type's processor class
for the processor. Qwen2-VL, Qwen2.5-VL, Qwen3-VL and SmolVLM processors also build a
video processor, which needs torchvision; torchvision does not import beside the CPU
torch wheel this project pins. ``without_video(cls)`` is a subclass of such a processor
class that has no video processor (images and text only), and is what gets loaded.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

_NO_VIDEO_CLASSES: dict[type, type] = {}


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as err:
        raise ImportError("VLM reward models need transformers: pip install -e '.[vlm]'") from err
    return transformers


def _reads_video_processor(method: Any) -> bool:
    """Whether a processor method's own source touches ``self.video_processor``."""
    try:
        return "self.video_processor" in inspect.getsource(method)
    except (OSError, TypeError):
        return False


def without_video(cls: type) -> type:
    """A subclass of processor class ``cls`` with no ``video_processor`` attribute.

    ``ProcessorMixin`` reads a processor's parts (and the options it loads) from its
    ``__init__`` arguments, so the subclass's ``__init__`` has no ``video_processor``
    and passes None for it to the parent (whose ``ProcessorMixin.__init__`` drops it).
    Loading, saving and calling with ``images=``/``text=`` work as for the parent;
    ``videos=`` is not supported.
    """
    if "video_processor" not in cls.get_attributes():
        return cls
    if cls not in _NO_VIDEO_CLASSES:

        def __init__(self: Any, image_processor: Any = None, tokenizer: Any = None,
                     chat_template: str | None = None, image_seq_len: int | None = None,
                     **kwargs: Any) -> None:
            # transformers reads the parts from this signature and the options it loads
            # from this function's argument names: image_seq_len is SmolVLM's/Idefics3's.
            kwargs.pop("video_processor", None)
            if image_seq_len is not None:
                kwargs["image_seq_len"] = image_seq_len
            cls.__init__(self, image_processor=image_processor, tokenizer=tokenizer,
                         video_processor=None, chat_template=chat_template, **kwargs)

        def apply_chat_template(self: Any, conversation: Any, chat_template: str | None = None,
                                **kwargs: Any) -> Any:
            # Some parents (SmolVLM) override this only to read video defaults
            # (num_frames, fps) from the video processor; without video the base
            # implementation does the same work.
            from transformers.processing_utils import ProcessorMixin

            return ProcessorMixin.apply_chat_template(self, conversation, chat_template,
                                                      **kwargs)

        body: dict[str, Any] = {"__init__": __init__}
        if _reads_video_processor(cls.apply_chat_template):
            body["apply_chat_template"] = apply_chat_template
        _NO_VIDEO_CLASSES[cls] = type(cls.__name__, (cls,), {
            **body,
            "__module__": __name__,
            "__doc__": f"{cls.__name__} without its video processor (images and text only).",
        })
    return _NO_VIDEO_CLASSES[cls]


def processor_class(model: str, **kwargs: Any) -> type:
    """The processor class of the model at ``model`` (local folder or hub id), without video."""
    transformers = _transformers()
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING

    config = transformers.AutoConfig.from_pretrained(model, **kwargs)
    try:
        cls = PROCESSOR_MAPPING[type(config)]
    except KeyError as err:
        raise ValueError(f"'{model}' (model type '{config.model_type}') has no processor class "
                         "in transformers; a VLM reward needs an image-text-to-text model "
                         "such as Qwen2.5-VL, Qwen3-VL or SmolVLM") from err
    return without_video(cls)


def load_vlm(model: str, *, device: str | torch.device = "cpu", dtype: str = "float32",
             local_files_only: bool = False) -> tuple[Any, Any]:
    """``(model, processor)`` of an image-text-to-text VLM, in eval mode on ``device``.

    ``model``: a local folder or a hub id. ``dtype``: "float32", "bfloat16", "float16"
    or "auto" (the checkpoint's). ``local_files_only``: never touch the network.
    """
    transformers = _transformers()
    kwargs = {"local_files_only": local_files_only}
    try:
        cls = processor_class(model, **kwargs)
        processor = cls.from_pretrained(model, **kwargs)
        torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
        net = transformers.AutoModelForImageTextToText.from_pretrained(
            model, dtype=torch_dtype, **kwargs)
    except OSError as err:
        raise OSError(f"cannot load the VLM '{model}': {err}\nPass a local folder with "
                      "config.json, the weights and the processor files, or a hub id with "
                      "network access (offline: set HF_HUB_OFFLINE=1 and pre-fill the HF "
                      "cache)") from err
    tokenizer = getattr(processor, "tokenizer", None)
    if tokenizer is None or not hasattr(processor, "image_processor"):
        raise ValueError(f"'{model}' has no tokenizer and image processor; a VLM reward needs "
                         "an image-text-to-text model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # batched generation continues every row at the end
    net.to(device).eval()
    return net, processor


__all__ = ["load_vlm", "processor_class", "without_video"]
