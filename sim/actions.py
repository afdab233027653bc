"""Action spaces of the simulated envs: the robot side's :mod:`robots.actions`.

Simulation and the ROS deployment node map actions with the same code, so an
action means the same in training and on hardware.
"""

from robots.actions import ACTION_TYPES, JointDeltaAction, JointPositionAction, make_action_map

__all__ = ["ACTION_TYPES", "JointDeltaAction", "JointPositionAction", "make_action_map"]
