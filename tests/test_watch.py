"""The change stream (``Client.watch``, ``elanus watch``): a real standalone server, read
from its log. Every insert, upsert and delete once, in timestamp order; the starting
points; the errors."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import StandaloneProcess, bare_collection, cli_env, run_elanus

from elanus import ElanusError, ErrorCode
from elanus.client.changes import OP, TS, ChangeLog
from elanus.client.client import Client

DIM = 4


def nats_login(server: StandaloneProcess) -> dict[str, str]:
    """The log's credentials (the embedded NATS server's, kept in the data dir)."""
    found = next(server.data_dir.rglob("credentials.json"))
    creds = json.loads(found.read_text())
    return {"nats_user": creds["user"], "nats_password": creds["password"]}


def rows(n: int, start: int = 0, tag: str = "a") -> list[dict[str, Any]]:
    vec = np.ones(DIM, np.float32)
    return [{"id": i, "vector": vec * i, "tag": tag} for i in range(start, start + n)]


@pytest.fixture(scope="module", name="server")
def retaining_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """A standalone server whose log keeps flushed changes a while (``log_retention_s``)."""
    data = tmp_path_factory.mktemp("watched") / "data"
    sp = StandaloneProcess(data, env={**os.environ, "ELANUS_LOG_RETENTION_S": "600"})
    try:
        yield sp.start().wait_ready()
    finally:
        sp.stop()


@pytest.fixture(scope="module")
def changed(server: StandaloneProcess) -> Iterator[tuple[Client, dict[str, int]]]:
    """A collection with 5 inserts, an upsert of 2 keys (one new), a delete of one."""
    with Client(server.uri) as client:
        bare_collection(client, "watched", DIM)
        marks = {"before": client.insert("watched", rows(5))["ts"]}
        marks["insert"] = marks["before"]
        marks["upsert"] = client.upsert("watched", rows(2, start=4, tag="b"))["ts"]
        marks["delete"] = client.delete("watched", ids=[0])["ts"]
        client.flush("watched")  # the datanode's checkpoint passes every change
        yield client, marks


def changes(client: Client, server: StandaloneProcess, since: str | int) -> pa.Table:
    tables = list(client.watch("watched", since, follow=False, **nats_login(server)))
    return pa.concat_tables(tables) if tables else pa.table({OP: [], TS: []})


def test_every_change_once_in_timestamp_order(
    changed: tuple[Client, dict[str, int]], server: StandaloneProcess
) -> None:
    client, marks = changed
    got = changes(client, server, "earliest")
    ops = list(zip(got[OP].to_pylist(), got["id"].to_pylist(), got[TS].to_pylist(), strict=True))
    assert ops == sorted(ops, key=lambda o: o[2])
    assert [(o, i) for o, i, _ in ops] == [
        *[("insert", i) for i in range(5)],
        ("upsert", 4),
        ("upsert", 5),
        ("delete", 0),
    ]
    assert [t for _, _, t in ops] == [marks["insert"]] * 5 + [marks["upsert"]] * 2 + [
        marks["delete"]
    ]
    tags = [json.loads(m)["tag"] if m else None for m in got["$meta"].to_pylist()]
    assert tags == ["a"] * 5 + ["b", "b", None]
    assert got["vector"][6].as_py() == [5.0] * DIM


def test_flushed_changes_stay_for_log_retention_s(
    changed: tuple[Client, dict[str, int]], server: StandaloneProcess
) -> None:
    """The coord purges the log every 5 s below the flushed checkpoint; with
    ``log_retention_s`` it keeps what it could purge for that long."""
    client, _ = changed
    time.sleep(6.0)  # a purge round after the flush
    assert changes(client, server, "earliest").num_rows == 8


def test_since_a_timestamp_and_latest(
    changed: tuple[Client, dict[str, int]], server: StandaloneProcess
) -> None:
    client, marks = changed
    got = changes(client, server, marks["upsert"] - 1)
    assert got[OP].to_pylist() == ["upsert", "upsert", "delete"]
    assert changes(client, server, marks["upsert"])[OP].to_pylist() == ["delete"]
    assert changes(client, server, "latest").num_rows == 0


def test_bad_starting_point_and_no_credentials(
    changed: tuple[Client, dict[str, int]], server: StandaloneProcess
) -> None:
    client, _ = changed
    with pytest.raises(ElanusError) as bad:
        changes(client, server, "yesterday")
    assert bad.value.code == ErrorCode.INVALID_ARGUMENT and "since" in bad.value.message
    with pytest.raises(ElanusError) as refused:
        list(client.watch("watched", "earliest", follow=False, nats_user="x", nats_password="y"))
    assert refused.value.code == ErrorCode.UNAVAILABLE
    with pytest.raises(ElanusError) as missing:
        list(client.watch("nope", follow=False))
    assert missing.value.code == ErrorCode.COLLECTION_NOT_FOUND


@pytest.mark.slow
def test_cli_prints_json_lines(
    changed: tuple[Client, dict[str, int]], server: StandaloneProcess
) -> None:
    login = nats_login(server)
    env = {**cli_env(), "ELANUS_NATS_USER": login["nats_user"]}
    env["ELANUS_NATS_PASSWORD"] = login["nats_password"]
    args = ("watch", "watched", "--since", "earliest", "--no-follow", "--uri", server.uri)
    result = run_elanus(*args, env=env)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["_op"], r["id"]) for r in lines][-3:] == [
        ("upsert", 4),
        ("upsert", 5),
        ("delete", 0),
    ]
    assert lines[-1]["vector"] is None and len(lines[0]["vector"]) == DIM
    bad = run_elanus("watch", "watched", "--since", "soon", "--no-follow", "--uri", server.uri)
    assert bad.returncode != 0 and "since" in bad.stderr


def test_a_starting_point_the_log_no_longer_keeps_is_refused(tmp_path: Any) -> None:
    """Without ``log_retention_s`` the coord purges flushed changes: a watch from a timestamp
    before the purge fails naming the reason, rather than silently starting later."""
    sp = StandaloneProcess(tmp_path / "data").start().wait_ready()
    try:
        with Client(sp.uri) as client:
            bare_collection(client, "purged", DIM)
            ts = client.insert("purged", rows(3))["ts"]
            login = nats_login(sp)
            coords = client.watch_coordinates("purged")
            with ChangeLog(coords, user=login["nats_user"], password=login["nats_password"]) as log:
                earliest = log.starts("earliest")  # taken before the purge, read after it
                client.flush("purged")
                deadline = time.monotonic() + 60
                while True:  # the purge runs every 5 s (30 s were short once on CI)
                    try:
                        list(client.watch("purged", ts - 1, follow=False, **login))
                    except ElanusError as exc:
                        assert exc.code == ErrorCode.INVALID_ARGUMENT
                        assert "no longer keeps" in exc.message and "earliest" in exc.message
                        break
                    assert time.monotonic() < deadline, "the flushed changes were never purged"
                    time.sleep(0.5)
                # from the earliest it keeps: nothing of the purged writes, no error (also
                # for an ``earliest`` taken before the purge: ``elanus watch`` raced one)
                watched = client.watch("purged", follow=False, **login)
                assert sum(t.num_rows for t in watched) == 0
                ends = log.ends(earliest)
                assert all(not log.read(v, p, ends[v]).num_rows for v, p in earliest.items())
    finally:
        sp.stop()
