"""The thread-side NATS client (``channels/syncnats.py``) steps aside for servers that need
TLS, which it does not speak: requests and replies then go the loop's way (nats-py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from elanus.channels.syncnats import SyncRequester, Unusable


@pytest.fixture
def tls_only_server() -> Iterator[str]:
    """A listener that greets every connection as a TLS-only NATS server would."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(
                    b'INFO {"server_id":"x","tls_required":true,"max_payload":1048576}\r\n'
                )
                conn.recv(1024)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"nats://127.0.0.1:{port}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_a_server_that_needs_tls_turns_the_thread_side_client_off(tls_only_server: str) -> None:
    sync = SyncRequester(tls_only_server, None, "test")
    assert sync.fits(100)  # not known before the first connection
    with pytest.raises(Unusable):
        sync.request("elanus.x.search", b"{}", 1.0)
    assert not sync.fits(100)  # from then on every request goes the loop's way
    with pytest.raises(Unusable):
        sync.reply("_INBOX.x", b"{}")  # a handler thread's reply too
    assert sync.ask("elanus.x.search", "Elanus-Probe") is None  # no port found through it
    sync.close()


def test_tls_urls_never_use_the_thread_side_client() -> None:
    assert not SyncRequester("tls://127.0.0.1:4222", None, "test").fits(1)
