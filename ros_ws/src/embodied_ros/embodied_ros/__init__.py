"""ROS 2 bridge of the embodied stack: deploy exported policies on arms and quadrupeds.

Modules: :mod:`policy_node` (lifecycle node with safety), :mod:`sim_robot_node` (a MuJoCo
robot behind the same topics), :mod:`description` (the node set that the launch files and
the process launcher both start), :mod:`safety`, :mod:`observation`, :mod:`messages`.
"""
