"""Run an exported policy on the simulated robot: the policy node + a MuJoCo robot node.

    ros2 launch embodied_ros sim_deploy.launch.py robot:=panda policy:=/path/to/policy.pt

Both nodes speak the topics of the real robot, so this is the full stand-in for hardware.
Discovery defaults to this machine only (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST).
"""

from launch import LaunchDescription
from launch.actions import SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration

from embodied_ros.description import NodeSpec, as_bool, sim_deploy_nodes
from embodied_ros.launch_actions import arguments, common_arguments, nodes_from

ARGS = {
    **common_arguments(robot="panda", autostart="true"),
    "discovery_range": ("LOCALHOST", "ROS_AUTOMATIC_DISCOVERY_RANGE for both nodes"),
}


def _build(robot: str, policy: str, namespace: str, params_file: str, autostart: str,
           discovery_range: str) -> list[NodeSpec]:
    return sim_deploy_nodes(robot, policy, namespace, params_file, as_bool(autostart))


def generate_launch_description() -> LaunchDescription:
    """The launch arguments of ``ARGS``, the discovery range and :func:`sim_deploy_nodes`."""
    return LaunchDescription([
        *arguments(ARGS),
        SetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE",
                               LaunchConfiguration("discovery_range")),
        nodes_from(_build, list(ARGS)),
    ])

