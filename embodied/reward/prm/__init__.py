"""The learned multi-view process reward model (PRM).

- ``data``: simulated training episodes (expert, noisy, failed) with every camera view
  and the simulator's progress; the on-disk format.
- ``labels``: K-bin progress targets, temporal clips, counterfactual instructions.
- ``network`` / ``text``: the per-view encoder, instruction embedding, fusion and heads.
- ``train`` / ``evaluate`` / ``metrics``: training, and what the field reports.
- ``model``: ``LearnedPRM``, registered as reward model ``prm``.

Importing this package imports neither transformers nor the simulator.
"""
