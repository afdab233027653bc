"""Unitree Go2: robot.yaml + go2.xml, and the torch observation terms of its policies."""
