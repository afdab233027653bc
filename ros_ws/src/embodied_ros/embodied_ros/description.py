"""The nodes of a deployment, described once.

``launch/deploy.launch.py`` and ``launch/sim_deploy.launch.py`` turn these descriptions
into ``launch_ros`` actions; :mod:`embodied_ros.launcher` starts the very same nodes as
plain processes (machines without ``launch_ros``, tests, benchmarks). Parameters,
remappings, names and namespaces therefore cannot drift between the two.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

PACKAGE = "embodied_ros"
POLICY_NODE = "embodied_policy"
SIM_ROBOT_NODE = "sim_robot"


@dataclass(frozen=True)
class NodeSpec:
    """One node: executable (console script) and module, name, parameters, remappings."""

    executable: str
    module: str
    name: str
    namespace: str = ""
    param_files: tuple[str, ...] = ()
    overrides: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    lifecycle: bool = False

    def ros_args(self) -> list[str]:
        """The ``--ros-args`` command-line arguments that configure this node."""
        args = ["--ros-args", "-r", f"__node:={self.name}"]
        if self.namespace:
            args += ["-r", f"__ns:={normalise_namespace(self.namespace)}"]
        for path in self.param_files:
            args += ["--params-file", str(path)]
        for key, value in self.overrides.items():
            args += ["-p", f"{key}:={_yaml_scalar(value)}"]
        for src, dst in self.remappings:
            args += ["-r", f"{src}:={dst}"]
        return args


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else "''"
    return repr(value)


def normalise_namespace(namespace: str) -> str:
    """``robot1`` -> ``/robot1``; empty stays empty."""
    namespace = namespace.strip()
    return "" if not namespace or namespace == "/" else "/" + namespace.strip("/")


def package_dir() -> Path:
    """The package's share directory (launch/, config/).

    The source tree when run from it, else the installed share directory found
    through the ament index.
    """
    source = Path(__file__).resolve().parent.parent
    if (source / "package.xml").is_file() and (source / "config").is_dir():
        return source
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory(PACKAGE))


def config_file(robot: str) -> Path:
    """``config/<robot>.yaml``, with a clear error naming the robots that have one."""
    path = package_dir() / "config" / f"{robot}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (package_dir() / "config").glob("*.yaml"))
        raise FileNotFoundError(f"no parameter file for robot '{robot}' ({path}); robots with "
                                f"one: {known}. Fix: add config/{robot}.yaml or pass params_file")
    return path


def parse_remappings(text: str) -> tuple[tuple[str, str], ...]:
    """``"joint_states:=/robot/joint_states,cmd_vel:=/teleop/cmd_vel"`` -> pairs."""
    pairs = []
    for item in filter(None, (s.strip() for s in text.replace(";", ",").split(","))):
        src, sep, dst = item.partition(":=")
        if not sep or not src or not dst:
            raise ValueError(f"remapping '{item}' is not 'from:=to'")
        pairs.append((src.strip(), dst.strip()))
    return tuple(pairs)


def policy_node(robot: str, policy: str, namespace: str = "", params_file: str = "",
                remappings: tuple[tuple[str, str], ...] = (), autostart: bool = False,
                ) -> NodeSpec:
    """The lifecycle policy node for ``robot`` running the exported ``policy``."""
    files = (params_file or str(config_file(robot)),)
    policy = str(Path(policy).expanduser().resolve()) if policy else ""  # any working dir
    return NodeSpec(executable="policy_node", module=f"{PACKAGE}.policy_node",
                    name=POLICY_NODE, namespace=namespace, param_files=files,
                    overrides={"robot": robot, "policy_path": policy,
                               "autostart": bool(autostart)},
                    remappings=tuple(remappings), lifecycle=True)


def sim_robot_node(robot: str, namespace: str = "", params_file: str = "") -> NodeSpec:
    """The simulated robot (MuJoCo) speaking the robot's topics."""
    files = (params_file or str(config_file(robot)),)
    return NodeSpec(executable="sim_robot_node", module=f"{PACKAGE}.sim_robot_node",
                    name=SIM_ROBOT_NODE, namespace=namespace, param_files=files,
                    overrides={"robot": robot})


def deploy_nodes(robot: str, policy: str, namespace: str = "", params_file: str = "",
                 remappings: str = "", autostart: bool = False) -> list[NodeSpec]:
    """``deploy.launch.py``: the policy node for a real robot."""
    return [policy_node(robot, policy, namespace, params_file, parse_remappings(remappings),
                        autostart)]


def sim_deploy_nodes(robot: str, policy: str, namespace: str = "", params_file: str = "",
                     autostart: bool = True) -> list[NodeSpec]:
    """``sim_deploy.launch.py``: the policy node plus the simulated robot, same namespace.

    The simulated robot sends state at the policy's control rate (it reads the policy's
    control period, and its task's scene when that has an object to push), so the policy
    node steps on each state message (``trigger: state``) rather than on its own timer;
    it publishes its simulation time on ``/clock`` and the policy node runs on it
    (``use_sim_time``), so a simulation slowed down by a busy CPU does not look like a
    stale robot. The simulated robot follows the finger joints in the trajectory, so the
    policy node sends them (``command_gripper``).
    """
    spec = policy_node(robot, policy, namespace, params_file, (), autostart)
    spec = replace(spec, overrides={**spec.overrides, "trigger": "state", "use_sim_time": True,
                                    "command_gripper": True})
    sim = sim_robot_node(robot, namespace, params_file)
    sim = replace(sim, overrides={**sim.overrides, "publish_clock": True,
                                  "policy_path": spec.overrides["policy_path"]})
    return [spec, sim]


def as_bool(text: str | bool) -> bool:
    """A launch argument as a boolean (true/false/1/0/yes/no)."""
    if isinstance(text, bool):
        return text
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"'{text}' is not a boolean (use true or false)")
