"""Start the nodes of a :mod:`embodied_ros.description` as processes, without launch_ros.

The same node set, parameters and remappings as the launch files; used by the tests,
the benchmark and ``python -m embodied_ros.launcher sim_deploy robot:=panda policy:=...``
on machines where ``ros2 launch`` is not available. Every process gets its own process
group, and :meth:`NodeProcesses.stop` ends each group (SIGINT, then SIGTERM, SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from embodied_ros.description import NodeSpec, as_bool, deploy_nodes, sim_deploy_nodes

# The simulated deployment, the tests and the benchmark keep discovery on this machine.
DEFAULT_DISCOVERY_RANGE = "LOCALHOST"


def ros_environment(domain_id: int | None = None, discovery_range: str | None =
                    DEFAULT_DISCOVERY_RANGE, base: dict[str, str] | None = None,
                    ) -> dict[str, str]:
    """The environment of a node process, built from ``base`` (default: ``os.environ``).

    The venv on AMENT_PREFIX_PATH (package share lookups), discovery range and
    domain id, unbuffered output.
    """
    env = dict(os.environ if base is None else base)
    prefixes = [p for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if sys.prefix not in prefixes:
        env["AMENT_PREFIX_PATH"] = os.pathsep.join([sys.prefix, *prefixes])
    if discovery_range:
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = discovery_range
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class NodeProcesses:
    """Node processes started from :class:`NodeSpec` s; a context manager that stops them."""

    def __init__(self, specs: list[NodeSpec], env: dict[str, str] | None = None,
                 log_dir: str | Path | None = None):
        self.specs, self.env = list(specs), env or ros_environment()
        self.log_dir = Path(log_dir) if log_dir else None
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path | None] = []

    def start(self) -> NodeProcesses:
        """Start every node (``python -m <module> --ros-args ...``) in its own group."""
        for spec in self.specs:
            cmd = [sys.executable, "-m", spec.module, *spec.ros_args()]
            log = None
            if self.log_dir is not None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                log = self.log_dir / f"{spec.name}.log"
            out = open(log, "w") if log else None  # noqa: SIM115  (None: this terminal)
            try:
                proc = subprocess.Popen(cmd, env=self.env, stdout=out,
                                        stderr=subprocess.STDOUT if log else None,
                                        start_new_session=True)
            finally:
                if out is not None:
                    out.close()
            self.procs.append(proc)
            self.logs.append(log)
        return self

    def output(self, name: str) -> str:
        """The log of node ``name`` so far ('' without a log directory)."""
        for spec, log in zip(self.specs, self.logs, strict=False):
            if spec.name == name and log is not None and log.exists():
                return log.read_text(errors="replace")
        return ""

    def stop(self, timeout: float = 5.0) -> list[int | None]:
        """SIGINT every process group, then SIGTERM / SIGKILL stragglers; exit codes."""
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 2.0),
                          (signal.SIGKILL, 2.0)):
            alive = [p for p in self.procs if p.poll() is None]
            if not alive:
                break
            for p in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)
            deadline = time.monotonic() + wait
            for p in alive:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(max(0.0, deadline - time.monotonic()))
        return [p.poll() for p in self.procs]

    def __enter__(self) -> NodeProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    """``python -m embodied_ros.launcher {deploy|sim_deploy} robot:=R policy:=P [...]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    builders = {"deploy": deploy_nodes, "sim_deploy": sim_deploy_nodes}
    if not argv or argv[0] not in builders:
        raise SystemExit(f"usage: python -m embodied_ros.launcher {{{'|'.join(builders)}}} "
                         "robot:=NAME policy:=PATH [namespace:=NS] [params_file:=FILE] "
                         "[autostart:=true|false]")
    known = ("robot", "policy", "namespace", "params_file", "autostart") + \
        (("remappings",) if argv[0] == "deploy" else ())
    kwargs = {}
    for arg in argv[1:]:
        key, sep, value = arg.partition(":=")
        if not sep or key not in known:
            raise SystemExit(f"argument '{arg}' is not NAME:=VALUE with NAME in {list(known)}")
        kwargs[key] = as_bool(value) if key == "autostart" else value
    if not kwargs.get("robot") or not kwargs.get("policy"):
        raise SystemExit("robot:=NAME and policy:=PATH are required")
    specs = builders[argv[0]](**kwargs)
    procs = NodeProcesses(specs, ros_environment(discovery_range=os.environ.get(
        "ROS_AUTOMATIC_DISCOVERY_RANGE", DEFAULT_DISCOVERY_RANGE)))
    signal.signal(signal.SIGTERM, _interrupt)  # stop the nodes on SIGTERM as on Ctrl-C
    procs.start()
    try:
        while all(p.poll() is None for p in procs.procs):
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        procs.stop()


if __name__ == "__main__":
    main()
