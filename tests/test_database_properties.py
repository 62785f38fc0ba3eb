"""A database's properties (issue 36, item 3), as Milvus 2.6 documents them: stored with
the database and described back (pymilvus's ``create_database(properties=)``,
``describe_database``, ``alter_database_properties``, ``drop_database_properties``) on
the Milvus port, the same as Milvus Lite answers; one request sets or drops, never both;
``database.max.collections``, ``database.force.deny.writing`` / ``.reading`` and
``database.replica.number`` are enforced as Milvus enforces them (Milvus Lite stores them
and enforces none: these follow Milvus's source, ``rootcoord`` and the quota center);
the keys Elanus cannot honour are refused, naming the key, and nothing is stored. The
Elanus SDK and Flight actions, and a coord restart, too."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack, StandaloneProcess, cli, cli_json, own_stack, raises_code, run_elanus
from database_property_steps import described_steps
from milvus_stack import MilvusStack, milvus_stack
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from elanus.dbproperties import check_database_property, denies, max_collections
from elanus.errors import ElanusError, ErrorCode

# Milvus's codes (merr): its quota error, the collection limit, an invalid parameter
QUOTA_EXCEEDED, COLLECTION_LIMIT, INVALID = 9, 102, 1100


@pytest.fixture
def mstack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MilvusStack]:
    yield from milvus_stack(request, tmp_path)


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusStack]:
    """One stack for the refusals below, each on a database of its own (``new_db``)."""
    tmp = tmp_path_factory.mktemp("refusals")
    with own_stack(tmp, "db-props-refusals", kind=MilvusStack) as stack:
        stack.add_indexnode()  # as ``milvus_stack`` gives
        yield stack


_DB_NUMBERS = itertools.count(1)


def new_db() -> str:
    """A database name no test of this file used before (on the shared stack)."""
    return f"d{next(_DB_NUMBERS)}"


def _milvus(mstack: MilvusStack) -> MilvusClient:
    return MilvusClient(uri=mstack.milvus_uri, timeout=30)


def _code(call: Any) -> tuple[int, str]:
    with pytest.raises(MilvusException) as err:
        call()
    return err.value.code, err.value.message


# -- stored and described, as Milvus Lite answers ------------------------------------------
_LITE = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from pymilvus import MilvusClient
from database_property_steps import described_steps
json.dump(described_steps(MilvusClient(sys.argv[1])), sys.stdout)
"""


def _lite_answers(tmp_path: Path) -> list[dict[str, Any]]:
    """``described_steps`` against Milvus Lite, in a child Python (a process with
    gRPC threads must not fork, and the fixtures fork nats-server)."""
    pytest.importorskip("milvus_lite")
    done = subprocess.run(
        [sys.executable, "-c", _LITE, str(tmp_path / "lite.db"), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_stored_and_described_as_milvus_lite(mstack: MilvusStack, tmp_path: Path) -> None:
    expected = _lite_answers(tmp_path)
    c = _milvus(mstack)
    got = described_steps(c)
    assert got == expected
    assert got[-2] == {
        "name": "d1",
        "database.max.collections": "5",
        "database.force.deny.writing": "false",
        "x.y": "1",
    }
    code, message = _code(lambda: c.describe_database("nodb"))
    assert code == 800 and "nodb" in message  # Milvus's ErrDatabaseNotFound (Lite: 6)
    code, _ = _code(lambda: c.alter_database_properties("nodb", {"a": "b"}))
    assert code == 800


def test_one_request_sets_or_drops(refusing: MilvusStack) -> None:
    """Milvus's root coord refuses both in one ``AlterDatabase`` (pymilvus never sends
    both; a raw request does), and one with neither."""
    c, d1 = _milvus(refusing), new_db()
    c.create_database(d1, properties={"a": "1"})
    stub = c._get_connection()._stub
    both = milvus_pb2.AlterDatabaseRequest(
        db_name=d1,
        properties=[common_pb2.KeyValuePair(key="b", value="2")],
        delete_keys=["a"],
    )
    status = stub.AlterDatabase(both, timeout=10)
    assert status.code == INVALID
    assert "cannot modify properties and delete keys at the same time" in status.reason
    status = stub.AlterDatabase(milvus_pb2.AlterDatabaseRequest(db_name=d1), timeout=10)
    assert status.code == INVALID and "either properties or delete keys" in status.reason
    assert c.describe_database(d1) == {"name": d1, "a": "1"}


@pytest.mark.parametrize(
    "key",
    ["database.resource_groups", "database.diskQuota.mb", "database.force.deny.ddl"],
)
def test_keys_elanus_cannot_honour_are_refused(refusing: MilvusStack, key: str) -> None:
    c, d1 = _milvus(refusing), new_db()
    code, message = _code(lambda: c.create_database(d1, properties={key: "1"}))
    assert code == INVALID and key in message
    assert d1 not in c.list_databases()
    c.create_database(d1, properties={"keep": "me"})
    code, message = _code(lambda: c.alter_database_properties(d1, {key: "1", "b": "2"}))
    assert code == INVALID and key in message
    assert c.describe_database(d1) == {"name": d1, "keep": "me"}  # nothing stored
    c.drop_database_properties(d1, [key])  # never set: no change, as Milvus
    assert c.describe_database(d1) == {"name": d1, "keep": "me"}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("database.max.collections", "many"),
        ("database.max.collections", "-1"),
        ("database.force.deny.writing", "maybe"),
        ("database.force.deny.reading", ""),
        ("database.replica.number", "0"),
    ],
)
def test_values_elanus_could_not_use_are_refused(
    refusing: MilvusStack, key: str, value: str
) -> None:
    """Milvus stores these and fails the create or load that reads them later; Elanus
    refuses them when set, so a stored value always works."""
    c, d1 = _milvus(refusing), new_db()
    c.create_database(d1)
    code, message = _code(lambda: c.alter_database_properties(d1, {key: value}))
    assert code == INVALID and key in message
    assert c.describe_database(d1) == {"name": d1}


# -- enforced ----------------------------------------------------------------------------------
def test_max_collections(mstack: MilvusStack) -> None:
    c = _milvus(mstack)
    c.create_database("d1", properties={"database.max.collections": "1"})
    c.use_database("d1")
    c.create_collection("a", dimension=2)
    code, message = _code(lambda: c.create_collection("b", dimension=2))
    assert code == COLLECTION_LIMIT
    assert "exceeded the limit number of collections[dbName=d1][limit=1]" in message
    assert c.list_collections() == ["a"]
    c.alter_database_properties("d1", {"database.max.collections": "2"})
    c.create_collection("b", dimension=2)
    c.drop_database_properties("d1", ["database.max.collections"])
    c.create_collection("c", dimension=2)
    assert sorted(c.list_collections()) == ["a", "b", "c"]
    c.use_database("default")
    c.create_collection("b", dimension=2)  # the default database has no such limit


def _rows(start: int) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [0.1 * i, 0.2]} for i in range(start, start + 3)]


def test_force_deny_writing_and_reading(mstack: MilvusStack) -> None:
    c = _milvus(mstack)
    c.create_database("d1")
    c.use_database("d1")
    c.create_collection("a", dimension=2)
    c.insert("a", _rows(0))

    c.alter_database_properties("d1", {"database.force.deny.writing": "true"})
    for call in (
        lambda: c.insert("a", _rows(10)),
        lambda: c.upsert("a", _rows(0)),
        lambda: c.delete("a", ids=[0]),
    ):
        code, message = _code(call)
        assert code == QUOTA_EXCEEDED
        assert "disabled by the administrator" in message
        assert "database.force.deny.writing" in message
    read = c.query("a", filter="id >= 0", output_fields=["id"], consistency_level="Strong")
    assert sorted(r["id"] for r in read) == [0, 1, 2]  # reads go on

    c.alter_database_properties("d1", {"database.force.deny.reading": "True"})
    for call in (
        lambda: c.query("a", filter="id >= 0"),
        lambda: c.search("a", [[0.1, 0.2]], limit=1),
        lambda: c.get("a", ids=[1]),
    ):
        code, message = _code(call)
        assert code == QUOTA_EXCEEDED and "database.force.deny.reading" in message

    c.use_database("default")
    c.create_collection("b", dimension=2)  # another database: not denied
    c.insert("b", _rows(0))
    assert c.query("b", filter="id >= 0", consistency_level="Strong")

    c.drop_database_properties("d1", ["database.force.deny.writing"])
    c.alter_database_properties("d1", {"database.force.deny.reading": "false"})
    c.use_database("d1")
    c.insert("a", _rows(10))
    read = c.query("a", filter="id >= 0", output_fields=["id"], consistency_level="Strong")
    assert len(read) == 6


def test_replica_number_is_a_loads_default(mstack: MilvusStack) -> None:
    mstack.add_querynode()
    client = mstack.client()
    client.create_database("d1", properties={"database.replica.number": 2})
    assert client.describe_database("d1")["database.replica.number"] == "2"
    client.create_collection("a", dimension=2, db="d1")
    client.release_collection("a", db="d1")
    client.load_collection("a", db="d1")
    assert len(client.describe_replica("a", db="d1")) == 2
    client.release_collection("a", db="d1")
    client.load_collection("a", db="d1", replica_number=1)  # the load's own wins
    assert len(client.describe_replica("a", db="d1")) == 1


# -- the Elanus SDK, the Flight action, a coord restart --------------------------------------
def test_sdk_and_flight_action_and_restart(stack: Stack) -> None:
    client = stack.client()
    client.create_database("d1", properties={"database.max.collections": 3, "k": "v"})
    assert client.describe_database("d1") == {
        "name": "d1",
        "database.max.collections": "3",
        "k": "v",
    }
    described = client._action("describe_database", {"name": "d1"})
    assert described["name"] == "d1" and described["db_id"] > 0 and described["created_ts"] > 0
    raises_code(
        ErrorCode.INVALID_ARGUMENT,
        lambda: client._action(
            "alter_database_properties",
            {"name": "d1", "properties": {"a": "1"}, "delete_keys": ["k"]},
        ),
        "cannot modify properties and delete keys at the same time",
    )
    raises_code(
        ErrorCode.INVALID_ARGUMENT,
        lambda: client.alter_database_properties("d1", {"database.resource_groups": "rg"}),
        "database.resource_groups",
    )
    client.create_collection("a", dimension=2, db="d1")
    other = stack.client(stack.add_proxy().uri)  # caches d1's properties with this insert
    other.insert("a", [{"id": 1, "vector": [0.1, 0.2]}], db="d1")
    client.alter_database_properties("d1", {"database.force.deny.writing": True})
    client.drop_database_properties("d1", ["k"])
    for c in (client, other):  # every proxy dropped what it cached before the alter answered
        raises_code(
            ErrorCode.FORCE_DENIED,
            lambda c=c: c.insert("a", [{"id": 2, "vector": [0.1, 0.2]}], db="d1"),
            "database.force.deny.writing",
        )
    stack.restart()
    client = stack.client()
    assert client.describe_database("d1") == {
        "name": "d1",
        "database.max.collections": "3",
        "database.force.deny.writing": "true",
    }
    with pytest.raises(ElanusError) as err:
        client.insert("a", [{"id": 1, "vector": [0.1, 0.2]}], db="d1")
    assert err.value.code == ErrorCode.FORCE_DENIED
    raises_code(ErrorCode.DATABASE_NOT_FOUND, lambda: client.describe_database("nodb"), "nodb")


# -- the checks themselves ---------------------------------------------------------------------
def test_checks() -> None:
    check_database_property("database.max.collections", " 0 ", "t")
    check_database_property("database.force.deny.reading", "T", "t")
    check_database_property("anything.else", "", "t")
    with pytest.raises(ElanusError, match="cipher.enabled"):
        check_database_property("cipher.enabled", "true", "t")
    assert denies({"database.force.deny.writing": "1"}, "database.force.deny.writing")
    assert not denies({"database.force.deny.writing": "false"}, "database.force.deny.writing")
    assert not denies({}, "database.force.deny.reading")
    assert max_collections({"database.max.collections": "7"}) == 7
    assert max_collections({}) is None


# -- the CLI -------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli(server: StandaloneProcess) -> None:
    assert "created database" in cli(
        server, "database", "create", "clidb", "--set", "database.max.collections=4"
    )
    assert "clidb" in cli_json(server, "database", "list")
    assert cli_json(server, "database", "describe", "clidb") == {
        "name": "clidb",
        "database.max.collections": "4",
    }
    assert "database.max.collections" in cli(server, "database", "describe", "clidb")
    altered = cli_json(
        server, "database", "alter", "clidb", "--set", "database.force.deny.reading=true"
    )
    assert altered["database.force.deny.reading"] == "true"
    altered = cli_json(server, "database", "alter", "clidb", "--drop", "database.max.collections")
    assert altered == {"name": "clidb", "database.force.deny.reading": "true"}
    refused = run_elanus(
        "database", "alter", "clidb", "--set", "database.resource_groups=rg",
        "--uri", server.uri,
    )  # fmt: skip
    assert refused.returncode != 0 and "database.resource_groups" in refused.stderr
    both = run_elanus(
        "database", "alter", "clidb", "--set", "a=1", "--drop", "b",
        "--uri", server.uri,
    )  # fmt: skip
    assert both.returncode == 2
    assert "dropped database" in cli(server, "database", "drop", "clidb", "--yes")
    assert "clidb" not in cli_json(server, "database", "list")
