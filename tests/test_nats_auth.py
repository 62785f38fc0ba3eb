"""Issue 13 item 4a: only Elanus roles speak on the bus. The embedded nats-server requires
a user and password (generated once, kept owner-only, never on a command line); a raw
client without them is refused; roles in other processes get them through their
environment."""

from __future__ import annotations

import asyncio
import json
import signal
import stat
from collections.abc import Callable
from pathlib import Path

import nats
import numpy as np
import psutil
import pytest
from conftest import ElanusProcess, StandaloneProcess, bare_collection, run_elanus, wait_for

from elanus.channels.bus import Bus
from elanus.channels.nats_server import EmbeddedNats, free_port
from elanus.channels.natsauth import CREDENTIALS_FILE, NatsCredentials, split_url
from elanus.client.client import Client
from elanus.errors import ElanusError

pytestmark = pytest.mark.timeout(120)


async def _raw_roundtrip(url: str, user: str | None = None, password: str | None = None) -> int:
    """Connect as a bare NATS client (no Elanus code), publish into JetStream, return the
    stream sequence; raises what nats-py raises when the server refuses."""
    nc = await nats.connect(
        url,
        user=user,
        password=password,
        allow_reconnect=False,
        max_reconnect_attempts=0,
        connect_timeout=5,
    )
    try:
        js = nc.jetstream()
        await js.add_stream(name="PROBE", subjects=["probe.>"])
        ack = await js.publish("probe.x", b"hello")
        return int(ack.seq)
    finally:
        await nc.close()


def raw_roundtrip(url: str, creds: NatsCredentials | None = None) -> int:
    return asyncio.run(
        _raw_roundtrip(url, creds.user if creds else None, creds.password if creds else None)
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_embedded_server_refuses_clients_without_credentials(tmp_path: Path) -> None:
    store = tmp_path / "nats"
    with EmbeddedNats(store) as server:
        creds = server.credentials
        with pytest.raises(nats.errors.Error) as exc:
            raw_roundtrip(server.url)
        assert "authorization" in str(exc.value).lower()
        with pytest.raises(nats.errors.Error) as exc:
            raw_roundtrip(server.url, NatsCredentials(creds.user, creds.password + "x"))
        assert "authorization" in str(exc.value).lower()
        assert raw_roundtrip(server.url, creds) == 1

        # Owner-only files; the password is in neither the URL nor the command line.
        assert mode(store) == 0o700
        assert mode(store / CREDENTIALS_FILE) == 0o600
        assert mode(store / "nats-server.conf") == 0o600
        assert creds.password not in server.url
        assert server.pid is not None
        cmdline = " ".join(psutil.Process(server.pid).cmdline())
        assert creds.password not in cmdline and "--pass" not in cmdline
        assert creds.password not in repr(creds)
        first = creds

    # A restart on the same store keeps the credentials (and the JetStream data).
    with EmbeddedNats(store) as again:
        assert again.credentials == first
        assert raw_roundtrip(again.url, first) == 2


def test_bus_reports_refused_credentials_at_once(tmp_path: Path) -> None:
    with EmbeddedNats(tmp_path / "nats") as server:

        async def attempt(bus: Bus) -> None:
            await bus.connect(timeout=10)
            await bus.close()

        for creds in (None, NatsCredentials("elanus", "not-the-password")):
            with pytest.raises(ElanusError) as exc:
                asyncio.run(attempt(Bus(server.url, credentials=creds)))
            assert exc.value.code == "UNAUTHENTICATED", exc.value
            assert "refused the credentials" in exc.value.message
        # Credentials in the URL work too; the bus keeps (and shows) the URL without them.
        c = server.credentials
        bus = Bus(f"nats://{c.user}:{c.password}@127.0.0.1:{server.port}")
        assert bus.url == server.url and bus.credentials == c
        asyncio.run(attempt(bus))


def test_url_userinfo_is_split_off() -> None:
    assert split_url("nats://a%40b:p%3Aw@h:4222") == (
        "nats://h:4222",
        NatsCredentials("a@b", "p:w"),
    )
    assert split_url("nats://h:4222") == ("nats://h:4222", None)
    assert split_url("nats://[::1]:4222")[0] == "nats://[::1]:4222"


def test_stored_credentials_with_wide_rights_are_refused(tmp_path: Path) -> None:
    store = tmp_path / "nats"
    EmbeddedNats(store).credentials  # noqa: B018 - generates the file
    (store / CREDENTIALS_FILE).chmod(0o644)
    with pytest.raises(ElanusError) as exc:
        EmbeddedNats(store).start()
    assert "readable by other users" in exc.value.message
    assert "password" not in exc.value.message.replace("NATS credentials", "")


def test_standalone_bus_is_closed_to_strangers(
    standalone_factory: Callable[..., StandaloneProcess],
) -> None:
    sp = standalone_factory().start().wait_ready()
    url = sp.info()["nats_url"]
    assert "@" not in url
    with pytest.raises(nats.errors.Error):
        raw_roundtrip(url)
    creds_file = sp.data_dir / "nats" / CREDENTIALS_FILE
    assert mode(creds_file) == 0o600
    doc = json.loads(creds_file.read_text())
    creds = NatsCredentials(doc["user"], doc["password"])
    assert raw_roundtrip(url, creds) == 1
    (nats_child,) = sp.nats_children()
    assert creds.password not in " ".join(nats_child.cmdline())
    assert creds.password not in sp.log()

    # The whole server still works over its authenticated bus.
    client = Client(sp.uri, timeout=30)
    try:
        client.create_collection("c", dimension=4)
        client.insert("c", {"id": [1, 2], "vector": np.eye(2, 4, dtype=np.float32)})
        client.flush("c", timeout=30)
        client.load_collection("c")
        hits = client.search("c", [[1, 0, 0, 0]], limit=1, consistency_level="Strong")
        assert hits[0][0]["id"] == 1
    finally:
        client.close()

    # A restart reuses the stored password.
    assert sp.stop() == 0
    again = standalone_factory(data_dir=sp.data_dir).start().wait_ready()
    assert raw_roundtrip(again.info()["nats_url"], creds) == 2
    assert json.loads(creds_file.read_text()) == doc


@pytest.mark.slow
def test_config_show_hides_secrets() -> None:
    from conftest import cli_env

    env = cli_env(ELANUS_NATS_PASSWORD="s3cret-value", ELANUS_NATS_URL="nats://u:pw@h:4222")
    shown = run_elanus("config", "show", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    values = json.loads(shown.stdout)
    assert values["nats_password"] == "***" and values["nats_url"] == "nats://h:4222"
    assert "s3cret-value" not in shown.stdout and "pw@" not in shown.stdout


def test_cluster_role_needs_the_credentials(
    elanus_processes: Callable[[ElanusProcess], ElanusProcess], tmp_path: Path
) -> None:
    with EmbeddedNats(tmp_path / "nats") as server:
        common = ("run", "coord", "--nats", server.url, "--data-dir", str(tmp_path / "data"))
        refused = run_elanus(*common, timeout=60)
        assert refused.returncode != 0
        assert "UNAUTHENTICATED" in refused.stderr + refused.stdout
        assert "Traceback" not in refused.stderr

        # With ELANUS_NATS_USER / ELANUS_NATS_PASSWORD in its environment the role joins.
        coord = elanus_processes(
            ElanusProcess(*common, log_path=tmp_path / "coord.log", env=server.client_env())
        ).start()
        port = free_port()
        proxy = elanus_processes(
            ElanusProcess(
                "run", "proxy", "--nats", server.url, "--data-dir", str(tmp_path / "data"),
                "--port", str(port), log_path=tmp_path / "proxy.log",
                uri=f"grpc://127.0.0.1:{port}", env=server.client_env(),
            )
        ).start().wait_ready()  # fmt: skip
        assert proxy.uri is not None
        client = Client(proxy.uri, timeout=30)
        try:
            bare_collection(client, "spread", 4)  # no query node here to load into
            assert "spread" in client.list_collections()
        finally:
            client.close()
        for p in (proxy, coord):
            assert server.credentials.password not in " ".join(psutil.Process(p.pid).cmdline())
            p.send(signal.SIGTERM)
            wait_for(lambda p=p: p.proc.poll() is not None, 20, "the role to stop")  # type: ignore[union-attr]
