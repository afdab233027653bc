"""Fixtures of the ROS 2 bridge tests: a private DDS graph per test and test policies.

Every test that talks DDS runs in a fresh network namespace with only a loopback
interface when this process may create one (root), otherwise with discovery limited to
localhost and a unique ROS_DOMAIN_ID; either way no discovery traffic leaves the machine.
Node processes are stopped (their whole process groups) when the test ends.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed: "
                    "pip install -e '.[ros]' (scripts/bootstrap.sh does)")
pytest.importorskip("embodied_ros", reason="embodied_ros is not installed: "
                    "pip install -e ros_ws/src/embodied_ros (scripts/bootstrap.sh does)")

import rclpy
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from embodied_ros.description import NodeSpec
from embodied_ros.isolation import can_isolate, private_network, unique_domain_id
from embodied_ros.launcher import NodeProcesses, ros_environment

REPO = Path(__file__).resolve().parents[2]
PANDA_POLICY = REPO / "assets" / "policies" / "panda_reach" / "policy.pt"
GO2_POLICY = REPO / "assets" / "policies" / "go2_walk" / "policy.pt"
LATCHED = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
TRANSITIONS = {"configure": Transition.TRANSITION_CONFIGURE,
               "activate": Transition.TRANSITION_ACTIVATE,
               "deactivate": Transition.TRANSITION_DEACTIVATE}
_counter = itertools.count()


class Recorder:
    """Messages of one topic with their arrival times (monotonic s), filled by the executor."""

    def __init__(self):
        self.items: list[tuple[float, Any]] = []

    def __call__(self, msg: Any) -> None:
        self.items.append((time.monotonic(), msg))

    @property
    def messages(self) -> list[Any]:
        return [m for _, m in self.items]

    def since(self, t: float) -> list[Any]:
        return [m for s, m in list(self.items) if s >= t]


class RosGraph:
    """A probe node in this process plus node processes, all on one private DDS graph."""

    def __init__(self, env: dict[str, str], log_dir: Path):
        self.env, self.log_dir = env, log_dir
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"test_probe_{os.getpid()}", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self.processes: list[NodeProcesses] = []

    def _spin(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self.executor.spin_once(timeout_sec=0.02)

    def launch(self, specs: list[NodeSpec]) -> NodeProcesses:
        """Start node processes (stopped at the end of the test)."""
        procs = NodeProcesses(specs, self.env, self.log_dir / f"launch{len(self.processes)}")
        self.processes.append(procs.start())
        return procs

    def logs(self) -> str:
        return "\n".join(f"--- {s.name}\n{p.output(s.name)[-3000:]}" for p in self.processes
                         for s in p.specs)

    def record(self, msg_type: type, topic: str, qos: QoSProfile | int = 10) -> Recorder:
        rec = Recorder()
        self.node.create_subscription(msg_type, topic, rec, qos)
        return rec

    def safety(self, node_path: str = "/embodied_policy") -> Recorder:
        """The policy node's ``~/safety_state`` (JSON strings, decoded)."""
        rec = Recorder()
        self.node.create_subscription(String, f"{node_path}/safety_state",
                                      lambda m: rec(json.loads(m.data)), LATCHED)
        return rec

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        """Poll ``predicate`` until truthy; on timeout fail with the node logs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{self.logs()}")

    def wait_mode(self, safety: Recorder, mode: str, timeout: float = 60.0) -> dict:
        """The first safety-state message with ``mode``."""
        return self.wait_for(lambda: next((m for m in safety.messages if m["mode"] == mode),
                                          None), timeout, f"safety mode '{mode}'")

    def transition(self, node_path: str, name: str, timeout: float = 60.0) -> bool:
        """Ask a lifecycle node for a transition; its success flag."""
        client = self.node.create_client(ChangeState, f"{node_path}/change_state")
        self.wait_for(lambda: client.service_is_ready(), timeout, f"{node_path}/change_state")
        request = ChangeState.Request()
        request.transition.id = TRANSITIONS[name]
        future = client.call_async(request)
        self.wait_for(future.done, timeout, f"{name} of {node_path}")
        return bool(future.result().success)

    def close(self) -> None:
        for procs in self.processes:
            procs.stop()
        self._stop.set()
        self._thread.join(5.0)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture
def ros_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RosGraph]:
    """A private DDS graph: network namespace if possible, else localhost + unique domain."""
    env = ros_environment(domain_id=unique_domain_id(next(_counter)))
    for key in ("AMENT_PREFIX_PATH", "ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID"):
        monkeypatch.setenv(key, env[key])
    isolation = private_network() if can_isolate() else contextlib.nullcontext()
    with isolation:
        graph = RosGraph(env, tmp_path)
        try:
            yield graph
        finally:
            graph.close()


@pytest.fixture(scope="session")
def panda_policy() -> Path:
    """The small exported panda_reach policy in assets/."""
    if not PANDA_POLICY.is_file():
        pytest.fail(f"{PANDA_POLICY} is missing (see assets/policies/panda_reach/README.md)")
    return PANDA_POLICY


@pytest.fixture(scope="session")
def untrained_go2_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A go2_walk policy from a freshly initialised ActorCritic, through the real export code
    (TorchScript with the metadata inside): exercises the legged path without a walker."""
    import torch
    from omegaconf import OmegaConf

    from embodied.export import DeployedPolicy, policy_metadata, write_torchscript
    from embodied.rl.actor_critic import ActorCritic
    from sim import make_env

    torch.manual_seed(0)
    env = make_env("go2_walk", num_envs=1, seed=0)
    try:
        policy = ActorCritic(env.obs_dim, env.action_dim).eval()
        cfg = OmegaConf.create({"task": {"name": "go2_walk"}, "seed": 0})
        meta = policy_metadata(cfg, env, Path("untrained"), {})
    finally:
        env.close()
    path = tmp_path_factory.mktemp("go2_untrained") / "policy.pt"
    return write_torchscript(DeployedPolicy(policy), path, meta)
