"""Keep DDS traffic on this machine: a private network namespace, or localhost discovery.

:func:`private_network` moves the calling thread (and every process and DDS thread it
starts afterwards) into a new network namespace that has only a loopback interface, so
no discovery packet can leave the machine and no other ROS graph is seen; it needs
CAP_SYS_ADMIN (root). Without it, callers fall back to
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a unique ``ROS_DOMAIN_ID``.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import socket
import struct
from collections.abc import Iterator

CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def can_isolate() -> bool:
    """Whether :func:`private_network` can work here (Linux, root)."""
    return os.name == "posix" and os.path.exists("/proc/thread-self/ns/net") and \
        os.geteuid() == 0


@contextlib.contextmanager
def private_network() -> Iterator[None]:
    """Run the body in a fresh network namespace (loopback only); restore it afterwards.

    Only the calling thread changes namespace; start ROS contexts and node processes
    inside the body and shut them down before it ends.
    """
    libc = _libc()
    original = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}")
        try:
            _loopback_up()
            yield
        finally:
            if libc.setns(original, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns back to the original network namespace failed: "
                                   f"{os.strerror(err)}")
    finally:
        os.close(original)


def unique_domain_id(seed: int | None = None) -> int:
    """A ROS domain id in 1..100 derived from the process id (and ``seed``)."""
    return 1 + (os.getpid() + (seed or 0)) % 100
