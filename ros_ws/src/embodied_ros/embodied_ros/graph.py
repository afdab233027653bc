"""A probe node in this process on the same DDS graph as node processes it launches.

Used by the tests and the benchmark: record topics, wait for conditions, call lifecycle
transitions and trigger services, and stop every launched process group at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import rclpy
from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from std_srvs.srv import Trigger

from embodied_ros.description import NodeSpec
from embodied_ros.isolation import can_isolate, private_network, unique_domain_id
from embodied_ros.launcher import NodeProcesses, ros_environment

LATCHED = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
ENV_KEYS = ("AMENT_PREFIX_PATH", "ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")
# Set to "localhost" to use localhost discovery + a unique domain even where a network
# namespace could be made (to exercise the fallback).
ISOLATION_ENV = "EMBODIED_ROS_ISOLATION"
TRANSITIONS = {"configure": Transition.TRANSITION_CONFIGURE,
               "activate": Transition.TRANSITION_ACTIVATE,
               "deactivate": Transition.TRANSITION_DEACTIVATE}
TARGET_STATES = {"configure": State.PRIMARY_STATE_INACTIVE,
                 "activate": State.PRIMARY_STATE_ACTIVE,
                 "deactivate": State.PRIMARY_STATE_INACTIVE}
PRIMARY_STATES = (State.PRIMARY_STATE_UNCONFIGURED, State.PRIMARY_STATE_INACTIVE,
                  State.PRIMARY_STATE_ACTIVE, State.PRIMARY_STATE_FINALIZED)
RESPONSE_WAIT_S = 15.0  # a service response not here by then is taken as lost


class Recorder:
    """Messages of one topic with their arrival times (monotonic s), filled by the executor."""

    def __init__(self) -> None:
        self.items: list[tuple[float, Any]] = []

    def __call__(self, msg: Any) -> None:
        """Store ``msg`` with its arrival time (the subscription callback)."""
        self.items.append((time.monotonic(), msg))

    @property
    def messages(self) -> list[Any]:
        """All messages received so far, oldest first."""
        return [m for _, m in self.items]

    def since(self, t: float) -> list[Any]:
        """Messages that arrived at or after monotonic time ``t`` (s), oldest first."""
        return [m for s, m in list(self.items) if s >= t]


class RosGraph:
    """A probe node in this process plus node processes, all on one DDS graph.

    ``env`` is the node processes' environment (:func:`embodied_ros.launcher.
    ros_environment`); this process must use the same domain id and discovery range.
    """

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
        self.isolation = ""

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
        """The last 3000 characters of every launched node's output, one section per node."""
        return "\n".join(f"--- {s.name}\n{p.output(s.name)[-3000:]}" for p in self.processes
                         for s in p.specs)

    def record(self, msg_type: type, topic: str, qos: QoSProfile | int = 10) -> Recorder:
        """A :class:`Recorder` subscribed to ``topic`` (messages of ``msg_type``)."""
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
        """Ask a lifecycle node for a transition; its success flag.

        DDS can drop a service response when the node has not yet matched this new
        client's reply reader; with no response after ``RESPONSE_WAIT_S`` the flag is read
        from the node's state instead: whether it settled in the transition's target state.
        """
        deadline = time.monotonic() + timeout
        client = self.node.create_client(ChangeState, f"{node_path}/change_state")
        self.wait_for(lambda: client.service_is_ready(), timeout, f"{node_path}/change_state")
        request = ChangeState.Request()
        request.transition.id = TRANSITIONS[name]
        future = client.call_async(request)
        with contextlib.suppress(AssertionError):
            self.wait_for(future.done, min(RESPONSE_WAIT_S, timeout), f"{name} of {node_path}")
        if future.done():
            return bool(future.result().success)
        while True:  # the response was lost: wait for the node to settle
            state = self.lifecycle_state(node_path, max(deadline - time.monotonic(), 1.0))
            if future.done():
                return bool(future.result().success)
            if state in PRIMARY_STATES or time.monotonic() > deadline:
                return state == TARGET_STATES[name]
            time.sleep(0.2)

    def lifecycle_state(self, node_path: str, timeout: float) -> int:
        """A lifecycle node's current state id (``lifecycle_msgs/State``), asked until answered."""
        deadline = time.monotonic() + timeout
        while True:
            client = self.node.create_client(GetState, f"{node_path}/get_state")
            self.wait_for(lambda c=client: c.service_is_ready(),
                          max(deadline - time.monotonic(), 1.0), f"{node_path}/get_state")
            future = client.call_async(GetState.Request())
            with contextlib.suppress(AssertionError):
                self.wait_for(future.done, min(RESPONSE_WAIT_S, max(deadline - time.monotonic(),
                                                                      1.0)),
                              f"the state of {node_path}")
            self.node.destroy_client(client)
            if future.done():
                return int(future.result().current_state.id)
            if time.monotonic() > deadline:
                raise AssertionError(f"no state from {node_path} within {timeout} s\n"
                                     f"{self.logs()}")

    def call_trigger(self, service: str, timeout: float = 30.0) -> Trigger.Response:
        """Call a std_srvs/Trigger service; its response."""
        client = self.node.create_client(Trigger, service)
        self.wait_for(lambda: client.service_is_ready(), timeout, service)
        future = client.call_async(Trigger.Request())
        self.wait_for(future.done, timeout, f"the response of {service}")
        return future.result()

    def __enter__(self) -> RosGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the launched node processes, the executor (waits up to 5 s) and the context."""
        for procs in self.processes:
            procs.stop()
        self._stop.set()
        self._thread.join(5.0)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@contextlib.contextmanager
def private_graph(log_dir: str | Path, seed: int = 0) -> Iterator[RosGraph]:
    """A :class:`RosGraph` whose traffic stays on this machine.

    In a fresh network namespace (loopback only) when possible, else with
    ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a ROS domain id derived from the
    process id and ``seed``. ``graph.isolation`` says which. This process's environment
    gets the same settings for the duration (restored afterwards).
    """
    env = ros_environment(domain_id=unique_domain_id(seed))
    saved = {k: os.environ.get(k) for k in ENV_KEYS}
    os.environ.update({k: env[k] for k in ENV_KEYS})
    netns = can_isolate() and os.environ.get(ISOLATION_ENV, "netns") != "localhost"
    try:
        with private_network() if netns else contextlib.nullcontext():
            graph = RosGraph(env, Path(log_dir))
            graph.isolation = "network namespace" if netns else \
                f"localhost discovery, ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']}"
            try:
                yield graph
            finally:
                graph.close()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
