"""NodeSpec -> launch_ros actions (imported only by the launch files, where launch_ros is)."""

from __future__ import annotations

from collections.abc import Callable

from launch import LaunchContext
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

from embodied_ros.description import NodeSpec, normalise_namespace


def to_action(spec: NodeSpec) -> Node:
    """A ``launch_ros`` Node (LifecycleNode for lifecycle nodes) for ``spec``."""
    kwargs = dict(package="embodied_ros", executable=spec.executable, name=spec.name,
                  namespace=normalise_namespace(spec.namespace) or "",
                  parameters=[*spec.param_files, dict(spec.overrides)],
                  remappings=list(spec.remappings), output="screen")
    return LifecycleNode(**kwargs) if spec.lifecycle else Node(**kwargs)


def common_arguments(robot: str, autostart: str) -> dict[str, tuple[str, str]]:
    """The launch arguments both launch files take: ``{name: (default, description)}``."""
    return {
        "robot": (robot, "robot name (robots/<robot>/robot.yaml, config/<robot>.yaml)"),
        "policy": ("", "exported policy.pt or policy.onnx (embodied export)"),
        "namespace": ("", "namespace of the nodes and their topics"),
        "params_file": ("", "parameter file; default config/<robot>.yaml"),
        "autostart": (autostart, "configure at once and activate on fresh state"),
    }


def arguments(defaults: dict[str, tuple[str, str]]) -> list[DeclareLaunchArgument]:
    """Launch arguments from ``{name: (default, description)}``."""
    return [DeclareLaunchArgument(name, default_value=default, description=text)
            for name, (default, text) in defaults.items()]


def nodes_from(build: Callable[..., list[NodeSpec]], names: list[str]) -> OpaqueFunction:
    """Resolve the launch arguments ``names`` and add the actions of ``build(**args)``."""

    def launch_setup(context: LaunchContext) -> list[Node]:
        values = {n: LaunchConfiguration(n).perform(context) for n in names}
        return [to_action(spec) for spec in build(**values)]

    return OpaqueFunction(function=launch_setup)
