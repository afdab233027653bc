"""Generative VLM backends (any transformers image-text-to-text model).

``VlmProgressReward`` (registered as ``vlm``) asks for a progress percentage;
``VlmChat`` is the batched prompting they share; ``parsing`` reads free-text answers;
``tiny.build_tiny_vlm`` writes small random models for tests and benchmarks.
Importing this package imports transformers only when a model is built.
"""
