"""``free_port``: a port no socket of ours (or anybody's) gets from the kernel meanwhile."""

from __future__ import annotations

import socket

import pytest

from elanus.channels.nats_server import free_port
from elanus.channels.runtime import ports


def test_ports_come_from_below_the_ephemeral_range_free_and_never_twice() -> None:
    span = ports.ephemeral_range()
    if span is None:
        pytest.skip("no /proc/sys/net/ipv4/ip_local_port_range on this system")
    got = [free_port() for _ in range(200)]
    assert len(set(got)) == len(got)
    assert all(ports.FLOOR <= p < span[0] for p in got)
    with socket.socket() as s:  # free when handed out: a server can bind it
        s.bind(("127.0.0.1", got[-1]))


def test_a_port_something_listens_on_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the draws pinned to one busy port, the kernel picks instead."""
    if ports.ephemeral_range() is None:
        pytest.skip("no /proc/sys/net/ipv4/ip_local_port_range on this system")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        monkeypatch.setattr(ports._random, "randint", lambda a, b: port)
        got = free_port()
        assert got != port and got > 0


def test_without_room_below_the_range_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ports.ephemeral_range()
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (1024, 65535))
    got = free_port()
    if real is not None:
        assert real[0] <= got <= real[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", got))
