"""Run an exported policy on a real robot.

    ros2 launch embodied_ros deploy.launch.py robot:=go2 policy:=/path/to/policy.pt
        [namespace:=robot1] [params_file:=my_go2.yaml] [autostart:=false]
        [remappings:="joint_states:=/lowstate/joint_states,imu:=/lowstate/imu"]

The node set comes from embodied_ros.description.deploy_nodes, the same description the
process launcher uses on machines without launch_ros.
"""

from launch import LaunchDescription

from embodied_ros.description import NodeSpec, as_bool, deploy_nodes
from embodied_ros.launch_actions import arguments, common_arguments, nodes_from

ARGS = {
    **common_arguments(robot="go2", autostart="false"),
    "remappings": ("", "comma-separated from:=to topic remappings"),
}


def _build(robot: str, policy: str, namespace: str, params_file: str, autostart: str,
           remappings: str) -> list[NodeSpec]:
    return deploy_nodes(robot, policy, namespace, params_file, remappings, as_bool(autostart))


def generate_launch_description() -> LaunchDescription:
    """The launch arguments of ``ARGS`` and the nodes of :func:`deploy_nodes`."""
    return LaunchDescription([*arguments(ARGS), nodes_from(_build, list(ARGS))])
