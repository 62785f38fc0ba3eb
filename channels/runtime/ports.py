"""A free TCP port for a server that is about to be started (by us or by a child process).

Binding port 0 and closing the socket names a port from the kernel's ephemeral range, and
the kernel may hand that port out again at once: to any socket bound to port 0, or as the
local end of any outgoing connection, in this process or another. A standalone binds its
direct port and connects to NATS before its proxy binds the Flight port it was given, so now
and then that port was already its own socket's (seen in CI: the Flight server's bind
failed with "Address already in use" and the test's health probe reached the direct port).

A port below the ephemeral range (Linux: ``/proc/sys/net/ipv4/ip_local_port_range``) is
never handed out that way: one is drawn at random from there, checked free by binding it,
and never given twice by one process. Where the range cannot be read, the kernel picks.
"""

from __future__ import annotations

import random
import socket
import threading

FLOOR = 10_000
"""The lowest port drawn (well above the ports services usually own)."""
_DRAWS = 64
_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"

_given: set[int] = set()
_lock = threading.Lock()
_random = random.Random()  # its own generator: a test that seeds ``random`` changes nothing


def ephemeral_range() -> tuple[int, int] | None:
    """The kernel's ephemeral ports (low, high), or None where they cannot be read."""
    try:
        with open(_RANGE_FILE) as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        return None
    return low, high


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that nothing listens on, outside the ephemeral range if possible."""
    span = ephemeral_range()
    if span is not None and span[0] - 1 > FLOOR:
        for _ in range(_DRAWS):
            port = _random.randint(FLOOR, span[0] - 1)
            with _lock:
                if port in _given:
                    continue
                if _bindable(host, port):
                    _given.add(port)
                    return port
    return kernel_port(host)


def kernel_port(host: str = "127.0.0.1") -> int:
    """A port the kernel picks (from its ephemeral range)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _bindable(host: str, port: int) -> bool:
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
