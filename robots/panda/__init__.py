"""Franka Panda: robot.yaml + panda.xml, and the torch observation terms of its policies."""
