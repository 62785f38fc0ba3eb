"""``elanus standalone`` as a real process: it serves, stops cleanly on SIGTERM/SIGINT, and
never leaves its nats-server child behind, not even when it is killed with -9."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    ElanusProcess,
    StandaloneProcess,
    bare_schema_file,
    process_gone,
    run_elanus,
    wait_gone,
)
from role_processes import proxy_process, role_process

from elanus.channels.nats_server import EmbeddedNats
from elanus.client.client import Client

pytestmark = pytest.mark.timeout(90)

Factory = Callable[..., StandaloneProcess]


def sessions(uri: str) -> list[dict[str, Any]]:
    result = run_elanus("status", "--json", "--uri", uri)
    assert result.returncode == 0, result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)
    return found


def live_roles(uri: str) -> list[str]:
    return sorted(s["role"] for s in sessions(uri))


def one_nats_child(sp: StandaloneProcess) -> int:
    kids = sp.nats_children()
    assert len(kids) == 1, f"expected one nats-server child, got {kids}"
    assert sp.info()["nats_pid"] == kids[0].pid
    return kids[0].pid


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_everything(standalone_factory: Factory, sig: signal.Signals) -> None:
    sp = standalone_factory().start().wait_ready()
    nats_pid = one_nats_child(sp)
    info = sp.info()
    assert info["pid"] == sp.proc.pid  # type: ignore[union-attr]
    assert info["flight_uri"] == sp.uri
    assert info["nats_url"].startswith("nats://127.0.0.1:")
    assert live_roles(sp.uri) == ["coord", "datanode", "indexnode", "proxy", "querynode"]
    if sig is signal.SIGINT:  # a new segment is normal operation: nothing warns of it
        with Client(sp.uri) as client:
            client.create_collection("quiet", dimension=4)
            client.insert("quiet", [{"id": 1, "vector": [0.1] * 4}])
            client.flush("quiet")

    sp.send(sig)
    assert sp.wait(15) == 0, sp.log()
    assert wait_gone(nats_pid, 2), "nats-server outlived a clean stop"
    assert not sp.info_path.exists(), "standalone.json must be removed on exit"
    said = sp.log()  # a start (auth off: the root password is no news) and a clean stop
    assert "Traceback" not in said and " ERROR " not in said and "WARN" not in said, said


def test_second_standalone_on_same_data_dir_is_refused(standalone_factory: Factory) -> None:
    sp = standalone_factory().start().wait_ready()
    result = run_elanus("standalone", "--data-dir", str(sp.data_dir), "--nats-port", "0")
    assert result.returncode == 1
    assert "in use by elanus pid" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sp.proc is not None and sp.proc.poll() is None, "the first one must keep running"


@pytest.mark.chaos
def test_kill9_takes_nats_down_and_restart_works(standalone_factory: Factory) -> None:
    lease = {"ELANUS_COORD_LEASE_TTL_S": "2"}  # the restart waits out the killed coord's lease
    sp = standalone_factory(env=lease).start().wait_ready()
    nats_pid = one_nats_child(sp)

    sp.send(signal.SIGKILL)
    assert sp.wait(5) == -signal.SIGKILL
    assert wait_gone(nats_pid, 10), "nats-server outlived its kill -9'd parent"

    # The stale standalone.json of the killed process must not block a restart.
    assert sp.info_path.exists()
    again = standalone_factory(data_dir=sp.data_dir, env=lease).start().wait_ready()
    assert live_roles(again.uri) == ["coord", "datanode", "indexnode", "proxy", "querynode"]
    assert again.stop() == 0


def test_external_nats_starts_no_child(standalone_factory: Factory, tmp_path: Path) -> None:
    with EmbeddedNats(tmp_path / "external-nats") as nats:
        sp = standalone_factory("--nats", nats.url, env=nats.client_env()).start().wait_ready()
        assert sp.nats_children() == []
        assert sp.info()["nats_url"] == nats.url
        assert sp.info()["nats_pid"] is None
        assert live_roles(sp.uri) == ["coord", "datanode", "indexnode", "proxy", "querynode"]

        sp.send(signal.SIGTERM)
        assert sp.wait(15) == 0, sp.log()
        assert nats.pid is not None and not process_gone(nats.pid), (
            "standalone must not stop a NATS server it did not start"
        )


def test_roles_run_on_their_own(
    elanus_processes: Callable[[ElanusProcess], ElanusProcess], tmp_path: Path
) -> None:
    with EmbeddedNats(tmp_path / "nats") as nats:
        data_dir, env = tmp_path / "data", nats.client_env()
        coord = role_process("coord", nats.url, data_dir, tmp_path / "coord.log", env)
        elanus_processes(coord).start()
        proxy = proxy_process(nats.url, data_dir, tmp_path / "proxy.log", env)
        elanus_processes(proxy).start().wait_ready()
        assert proxy.uri is not None

        assert {s["role"]: s["pid"] for s in sessions(proxy.uri)} == {
            "coord": coord.pid,
            "proxy": proxy.pid,
        }
        schema = bare_schema_file(tmp_path / "spread.json", 4)  # no query node to load into
        created = run_elanus(
            "collection", "create", "spread", "--schema", str(schema), "--uri", proxy.uri
        )
        assert created.returncode == 0, created.stderr
        assert coord.children() == [] and proxy.children() == []

        proxy.send(signal.SIGTERM)
        assert proxy.wait(15) == 0, proxy.log()
        coord.send(signal.SIGTERM)
        assert coord.wait(15) == 0, coord.log()
