"""Physics engines behind :class:`sim.env.TaskEnv` (see :mod:`sim.physics`)."""
