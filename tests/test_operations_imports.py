"""Operation records of import jobs, staged writes, the change stream
(``elanus/ops/imports.py``) and the console's cluster reads (``elanus/ops/console.py``), as
tests/test_operations.py holds partitions and aliases: each action's keys come from its
record, a bad body is refused with the words the dict checkers used, a face's record is
checked as a body, the privilege is checked where it was, and the SDK's wire bodies are what
they were (no ``db`` where it sent none)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from opcheck import RecordingClient, declaration_test, decoded, refusal_test

from elanus.errors import ElanusError
from elanus.flight.auth import need_for
from elanus.flight.registry import lookup
from elanus.ops import checked, scope_of
from elanus.ops import console as console_ops
from elanus.ops import imports as ops
from elanus.privileges import Need
from elanus.wire.codec import encode_json

RECORDS = [
    ops.Import, ops.GetImportState, ops.ListImportJobs, ops.CommitWrite, ops.AbortWrite,
    ops.WatchCollection,
    console_ops.ListCompactions, console_ops.ListBackupTasks, console_ops.ListRequests,
    console_ops.DescribeConfig,
]  # fmt: skip


test_an_operations_action_is_declared_by_its_record = declaration_test(RECORDS)


def test_an_imports_files_are_grouped_into_units_by_name_once() -> None:
    got = decoded("import", {"collection": "c", "files": ["a.parquet", "v.npy", "id.npy",
                                                        ["x.npy", "y.npy"]]})  # fmt: skip
    assert got.units == [
        {"format": "parquet", "paths": ["a.parquet"]},
        {"format": "numpy", "paths": ["x.npy", "y.npy"]},
        {"format": "numpy", "paths": ["v.npy", "id.npy"]},  # the loose ones: one set
    ]
    assert got.units is got.units  # grouped when checked, kept for the executor
    assert (got.partition, got.options) == (None, None)


def test_a_body_decodes_into_the_record_once() -> None:
    assert decoded("get_import_state", {"job_id": 3}) == ops.GetImportState(job_id=3)
    assert decoded("list_import_jobs", {"collection": ""}).collection == ""  # "": every one
    got = decoded("commit_write", {"collection": "c", "write_id": "w", "wait_s": 5})
    assert got == ops.CommitWrite(collection="c", write_id="w", wait_s=5.0)
    assert (got.upsert, got.parts, got.expected_rows, got.waits()) == (False, None, None, 5.0)
    assert decoded("commit_write", {"collection": "c", "write_id": "w"}).waits() == 60.0
    assert decoded("abort_write", {"write_id": "w-1"}) == ops.AbortWrite(write_id="w-1")
    assert decoded("watch_collection", {"collection": "c"}).db == "default"
    assert decoded("list_compactions", {}).limit == 100
    assert decoded("list_requests", {"limit": 1000}).limit == 1000
    assert decoded("describe_config", {"db": "d"}) == console_ops.DescribeConfig(db="d")


BAD_BODIES = [
        ("import", {"collection": "c"}, "import: missing required key 'files'"),
        ("import", {"collection": "c", "files": []}, "import: 'files' is empty"),
        ("import", {"collection": "c", "files": "a.csv"}, "import: 'files' must be a JSON array"),
        ("import", {"collection": "c", "files": [f"{i}.csv" for i in range(1025)]},
         "import: at most 1024 files per job"),
        ("import", {"collection": "c", "files": [["a.csv", "b.csv"]]},
         "import: a list entry holds one row-based file or a set of .npy files"),
        ("import", {"collection": "c", "files": ["a.txt"]}, "a.txt: unknown file type"),
        ("import", {"collection": "c", "files": [3]},
         "import: each entry of 'files' is a path or a non-empty list of paths"),
        ("import", {"collection": "c", "files": ["a.csv"], "options": {"delim": ";"}},
         "import: unknown option(s) 'delim'"),
        ("import", {"collection": "c", "files": ["a.csv"], "options": {"sep": '"'}},
         "import: option 'sep' must be one character (not a quote), got '\"'"),
        ("import", {"collection": "c", "files": ["a.csv"], "partition": "9p"},
         "partition name '9p' is invalid"),
        ("get_import_state", {}, "get_import_state: missing required key 'job_id'"),
        ("get_import_state", {"job_id": 0},
         "get_import_state: 'job_id' = 0 is out of range [1, None]"),
        ("get_import_state", {"job_id": "5"},
         "get_import_state: 'job_id' must be an integer, got '5'"),
        ("get_import_state", {"job_id": 1, "db": "9d"}, "database name '9d' is invalid"),
        ("list_import_jobs", {"collection": 5},
         "list_import_jobs: 'collection' must be a string, got int"),
        ("list_import_jobs", {"collection": "bad name"},
         "collection name 'bad name' is invalid"),
        ("commit_write", {"write_id": "w"}, "commit_write: missing required key 'collection'"),
        ("commit_write", {"collection": "c"}, "commit_write: missing required key 'write_id'"),
        ("commit_write", {"collection": "c", "write_id": "w/x"},
         "write id 'w/x' must be 1 to 128 letters, digits, underscores or hyphens"),
        ("commit_write", {"collection": "c", "write_id": 7},
         "commit_write: 'write_id' must be a string, got int"),
        ("commit_write", {"collection": "c", "write_id": "w", "parts": "p"},
         "commit_write: 'parts' must be a JSON array"),
        ("commit_write", {"collection": "c", "write_id": "w", "parts": ["ok", 3]},
         "part 3 must be 1 to 128 letters, digits, underscores or hyphens"),
        ("commit_write", {"collection": "c", "write_id": "w", "wait_s": 111},
         "commit_write: 'wait_s' must be within [0, 110.0]"),
        ("commit_write", {"collection": "c", "write_id": "w", "wait_s": -1},
         "commit_write: 'wait_s' must be within [0, 110.0]"),
        ("commit_write", {"collection": "c", "write_id": "w", "wait_s": "@"},
         "commit_write: 'wait_s' must be a number, got '@'"),
        ("commit_write", {"collection": "c", "write_id": "w", "upsert": 1},
         "commit_write: 'upsert' must be true or false, got 1"),
        ("commit_write", {"collection": "c", "write_id": "w", "expected_rows": -1},
         "commit_write: 'expected_rows' = -1 is out of range [0, None]"),
        ("commit_write", {"collection": "9c", "write_id": "w"}, "collection name '9c' is "
         "invalid"),
        # the dict checker's order: the types of parts and wait_s before the collection
        ("commit_write", {"write_id": "w", "parts": {}},
         "commit_write: 'parts' must be a JSON array"),
        ("commit_write", {"write_id": "w", "wait_s": True},
         "commit_write: 'wait_s' must be a number, got True"),
        ("abort_write", {}, "abort_write: missing required key 'write_id'"),
        ("abort_write", {"write_id": ""}, "write id '' must be 1 to 128 letters"),
        ("watch_collection", {}, "watch_collection: missing required key 'collection'"),
        ("watch_collection", {"collection": "a b"}, "collection name 'a b' is invalid"),
        ("list_compactions", {"limit": 0},
         "list_compactions: 'limit' = 0 is out of range [1, 1000]"),
        ("list_requests", {"limit": 1001},
         "list_requests: 'limit' = 1001 is out of range [1, 1000]"),
        ("list_requests", {"limit": 2.5}, "list_requests: 'limit' must be an integer, got 2.5"),
        ("list_backup_tasks", {"limit": 5},
         "list_backup_tasks: unknown key(s) 'limit'; allowed keys are db"),
        ("describe_config", {"db": ""}, "database name must be a non-empty string"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    assert checked(ops.GetImportState(db="d", job_id=4)).job_id == 4
    with pytest.raises(ElanusError, match=r"'job_id' = 0 is out of range \[1, None\]"):
        checked(ops.GetImportState(db="d", job_id=0))  # an unset proto field
    with pytest.raises(ElanusError, match="collection name '9c' is invalid"):
        checked(ops.ListImportJobs(collection="9c"))
    assert checked(ops.ListImportJobs(collection=None)).collection is None
    with pytest.raises(ElanusError, match="database name 'bad db' is invalid"):
        checked(ops.ListImportJobs(db="bad db"))  # a Milvus call's dbname header


class _Caller:
    user = "u"


@pytest.mark.parametrize(
    ("name", "body", "need"),
    [
        # DescribeCluster was checked in the default database, the old requests holding no db
        ("list_compactions", {"db": "d", "limit": 5}, Need("DescribeCluster", "default")),
        ("list_backup_tasks", {"db": "d"}, Need("DescribeCluster", "default")),
        ("list_requests", {"db": "d"}, Need("DescribeCluster", "default")),
        ("describe_config", {"db": "d"}, Need("DescribeCluster", "default")),
        ("list_import_jobs", {"db": "d"}, Need("Import", "d", "*")),
        ("list_import_jobs", {"db": "d", "collection": ""}, Need("Import", "d", "*")),
        ("list_import_jobs", {"collection": "c"}, Need("Import", "default", "c")),
        ("commit_write", {"db": "d", "collection": "c", "write_id": "w"},
         Need("Insert", "d", "c")),
        ("commit_write", {"collection": "c", "write_id": "w", "upsert": True},
         Need("Upsert", "default", "c")),
        ("watch_collection", {"db": "d", "collection": "c"}, Need("Query", "d", "c")),
        ("get_import_state", {"db": "d", "job_id": 1}, None),
        ("abort_write", {"write_id": "w"}, None),
    ],
)  # fmt: skip
def test_the_privilege_is_checked_where_it_was(
    name: str, body: dict[str, Any], need: Need | None
) -> None:
    got = need_for(_Caller(), lookup(name), scope_of(decoded(name, body)))  # type: ignore[arg-type]
    assert got == need


REPLIES: dict[str, dict[str, Any]] = {
    "get_import_state": {"state": "Completed"},
    "list_import_jobs": {"jobs": []},
    "commit_write": {"job_id": 1, "state": "Completed", "rows": 0, "ts": 0},
    "abort_write": {"removed": True},
    "watch_collection": {
        "collection": "c", "collection_id": 1, "schema": {"fields": [
            {"name": "id", "type": "Int64", "is_primary": True},
            {"name": "v", "type": "FloatVector", "dim": 2},
        ]}, "servers": "nats://x", "type_header": "t", "ts_header": "s", "vchannels": [],
    },
}  # fmt: skip


def _sent(call: Callable[[RecordingClient], object]) -> tuple[str, bytes]:
    client = RecordingClient(REPLIES)
    client._last_write_ts = 0  # a commit remembers its write's timestamp
    call(client)
    (sent,) = client.sent
    return sent


@pytest.mark.parametrize(
    ("call", "name", "body"),
    [
        # each body as the dict-building SDK wrote it, in its key order
        (lambda c: c.get_import_state(7), "get_import_state", {"job_id": 7}),
        (lambda c: c.list_import_jobs(), "list_import_jobs", {"db": "own"}),
        (lambda c: c.list_import_jobs("", db="d"), "list_import_jobs", {"db": "d"}),
        (lambda c: c.list_import_jobs("c"), "list_import_jobs", {"db": "own", "collection": "c"}),
        (lambda c: c.commit_write("c", "w"), "commit_write",
         {"db": "own", "collection": "c", "write_id": "w", "upsert": False}),
        (lambda c: c.commit_write("c", "w", upsert=True, expected_rows=3, db="d"),
         "commit_write", {"db": "d", "collection": "c", "write_id": "w", "upsert": True,
                          "expected_rows": 3}),
        (lambda c: c.abort_write("w"), "abort_write", {"write_id": "w"}),
        (lambda c: c.watch_coordinates("c"), "watch_collection", {"db": "own", "collection": "c"}),
        (lambda c: c.watch_coordinates("c", db="d"), "watch_collection",
         {"db": "d", "collection": "c"}),
    ],
)  # fmt: skip
def test_the_sdk_sends_the_bodies_it_always_sent(
    call: Callable[[RecordingClient], object], name: str, body: dict[str, Any]
) -> None:
    assert _sent(call) == (name, encode_json(body))


def test_the_sdk_sends_an_import_with_the_keys_it_always_sent() -> None:
    client = RecordingClient({"import": {"job_id": 4}})
    client.uri = "grpc://127.0.0.1:1"  # the paths are not here: the server's, sent as named
    assert client.bulk_import("c", ["/srv/a.parquet"], "p", options={"sep": ";"}) == 4
    assert client.bulk_import("c", ["/srv/b.csv"], db="d", upload=False) == 4
    assert client.bodies() == [
        ("import", {"db": "own", "collection": "c", "files": ["/srv/a.parquet"],
                    "partition": "p", "options": {"sep": ";"}}),
        ("import", {"db": "d", "collection": "c", "files": ["/srv/b.csv"]}),
    ]  # fmt: skip


def test_a_commit_of_some_parts_sends_the_same_keys_parts_first() -> None:
    """The record's fields are in the order the dict checker read them (so a body with two
    mistakes is refused for the same one): ``parts`` now comes before the collection in the
    JSON text; the keys and values are the ones the SDK always sent."""
    name, raw = _sent(lambda c: c.commit_write("c", "w", parts=("p1", "p2"), expected_rows=0))
    assert name == "commit_write"
    assert orjson.loads(raw) == {
        "db": "own", "collection": "c", "write_id": "w", "upsert": False,
        "parts": ["p1", "p2"], "expected_rows": 0,
    }  # fmt: skip
