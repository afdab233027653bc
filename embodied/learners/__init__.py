"""Learners behind one protocol, chosen by ``algo.name``.

- :mod:`base`: the :class:`~embodied.learners.base.Learner` protocol and the registry
- :mod:`ppo`: our PPO (:mod:`embodied.rl`)
- :mod:`sb3`: stable-baselines3 PPO and SAC
- :mod:`embodied.offline.runner`: IQL and BC on a dataset
- :mod:`factory`: :func:`~embodied.learners.factory.learner_class` over all of them
"""
