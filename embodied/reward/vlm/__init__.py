"""Generative VLM backends (any transformers image-text-to-text model).

``VlmProgressReward`` (registered as ``vlm``) asks for a progress percentage; the
published protocols are ``roboreward`` (RoboReward's 1-5 clip score), ``grm``
(Robo-Dopamine's hops) and ``sarm`` (a SARM-style stage + progress prompt).
``backend.make_chat`` answers their prompts locally (``chat.VlmChat``) or through an
OpenAI-compatible server (``remote.ServerChat``, with the answer cache of ``cache``);
``serve`` runs ``transformers serve`` for these models; ``goal`` renders a GRM goal
image from a task's expert; ``parsing`` reads free-text answers; ``tiny.build_tiny_vlm``
writes small random models for tests and benchmarks.
Importing this package imports transformers only when a model is built.
"""
