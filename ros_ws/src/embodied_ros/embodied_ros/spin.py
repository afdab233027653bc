"""Spinning a node until SIGINT/SIGTERM with a last word while ROS still works."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node


def spin_until_signal(node: Node, on_exit: Callable[[], None]) -> None:
    """Spin ``node`` until SIGINT/SIGTERM, then call ``on_exit()`` while ROS still works."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.05)
    finally:
        on_exit()
        executor.remove_node(node)
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
