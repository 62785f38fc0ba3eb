"""Operation records of ``query`` and ``delete`` (``elanus/ops/reads.py``, ``writes.py``), as
tests/test_operations.py holds partitions and aliases: each action's keys come from its
record, a bad body is refused with the words the dict checkers used, a face's record is
checked as a body, and the SDK's wire bodies are what they were."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import orjson
import pytest
from opcheck import RecordingClient, declaration_test, decoded, refusal_test, sent_bodies

from elanus.client.read import ReadAPI
from elanus.errors import ElanusError
from elanus.ops import checked
from elanus.ops.reads import PlanRead, Query, ReadOptions
from elanus.ops.writes import MAX_DELETE_KEYS, Delete

test_an_operations_action_is_declared_by_its_record = declaration_test([Query, Delete, PlanRead])


def test_a_body_decodes_into_the_record_once() -> None:
    got = decoded("query", {"collection": "c", "filter": "a > 1", "output_fields": ["a"]})
    assert got == Query(collection="c", filter="a > 1", output_fields=["a"])
    assert isinstance(got, ReadOptions)  # the read options every read takes
    assert (got.offset, got.limit, got.as_of, got.consistency_level) == (None, None, None, None)
    assert decoded("query", {"collection": "c", "output_fields": ["count(*)"]}).outputs == [
        "count(*)"
    ]
    grouped = decoded("query", {"collection": "c", "group_by_fields": ["g", 3]})
    assert (grouped.grouping, grouped.groups) == (True, ["g", "3"])
    got = decoded("delete", {"collection": "c", "ids": [1, 2], "partition": "p"})
    assert got == Delete(collection="c", ids=[1, 2], partition="p")


BAD_BODIES = [
        ("query", {"collection": "c"}, "query: an empty filter needs a 'limit' (or give a "
         "'filter' or 'ids'; only count(*) may go without)"),
        ("query", {"collection": "c", "filter": ""}, "query: an empty filter needs a 'limit'"),
        ("query", {"collection": "c", "filter": "a > 1", "ids": [1]},
         "query: give either 'filter' or 'ids', not both"),
        ("query", {"collection": "c", "output_fields": ["count(*)", "a", "b", "c", "d"]},
         "query: 'count(*)' must be the only output field (also asked for: 'a', 'b', 'c', "
         "...); count in one query and fetch fields in another"),
        ("query", {"collection": "c", "limit": 0},
         "query: 'limit' = 0 is out of range [1, 10000000]"),
        ("query", {"collection": "c", "limit": 5, "offset": -1},
         "query: 'offset' = -1 is out of range [0, None]"),
        ("query", {"collection": "c", "limit": 5, "output_fields": "a"},
         "query: 'output_fields' must be a JSON array"),
        ("query", {"collection": "c", "limit": 5, "filter_params": []},
         "query: 'filter_params' must be a JSON object"),
        ("query", {"collection": "c", "limit": 5, "filter": 3},
         "query: 'filter' must be a string, got int"),
        ("query", {"collection": "c", "limit": 5, "consistency_level": "Sometimes"},
         "consistency level 'Sometimes'"),
        ("query", {"collection": "c", "limit": 5, "guarantee_timestamp": -1},
         "query: 'guarantee_timestamp' = -1 is out of range [0, None]"),
        ("query", {"collection": "c", "limit": 5, "partition_names": ["9p"]},
         "partition name '9p' is invalid"),
        ("query", {"collection": "9c", "limit": 5}, "collection name '9c' is invalid"),
        ("query", {"collection": "c", "limit": 5, "read_ts": 7},
         "query: unknown key(s) 'read_ts'"),  # the proxy's own pin: never a client's key
        ("read_plan", {"collection": "c", "columns": []},
         "read_plan: 'columns' must be a non-empty list of field names"),
        ("read_plan", {"collection": "c", "columns": ["a", 1]},
         "read_plan: 'columns' must be a non-empty list of field names"),
        ("read_plan", {"collection": "c", "columns": ["a", "a"]},
         "read_plan: 'columns' names a field twice"),
        ("read_plan", {"collection": "c", "snapshot_ts": -1},
         "read_plan: 'snapshot_ts' = -1 is out of range [0, None]"),
        ("read_plan", {"collection": "c", "files_only": 1},
         "read_plan: 'files_only' must be true or false, got 1"),
        ("read_plan", {"collection": "c", "partition_names": ["9p"]},
         "partition name '9p' is invalid"),
        ("read_plan", {"collection": "c", "filter_params": "x"},
         "read_plan: 'filter_params' must be a JSON object"),
        ("delete", {"collection": "c"}, "delete: give exactly one of 'ids' and 'filter'"),
        ("delete", {"collection": "c", "filter": "", "ids": None},
         "delete: give exactly one of 'ids' and 'filter'"),
        ("delete", {"collection": "c", "filter": "a > 1", "ids": [1]},
         "delete: give exactly one of 'ids' and 'filter'"),
        ("delete", {"collection": "c", "ids": []}, "delete: 'ids' is empty"),
        ("delete", {"collection": "c", "ids": {"a": 1}}, "delete: 'ids' must be a JSON array"),
        ("delete", {"collection": "c", "ids": [1], "partition": "9p"},
         "partition name '9p' is invalid"),
        ("delete", {"collection": "c", "filter": "a > 1", "filter_params": 3},
         "delete: 'filter_params' must be a JSON object"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_delete_holds_at_most_a_million_keys() -> None:
    with pytest.raises(ElanusError, match=f"at most {MAX_DELETE_KEYS} ids per request"):
        checked(Delete(collection="c", ids=list(range(MAX_DELETE_KEYS + 1))))


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    assert checked(Query(collection="c", ids=[1])).ids == [1]
    with pytest.raises(ElanusError, match="collection name must be a non-empty string"):
        checked(Query(collection="", ids=[1]))  # an unset proto field
    with pytest.raises(ElanusError, match=r"'limit' = 0 is out of range"):
        checked(Query(collection="c", limit=0))
    with pytest.raises(ElanusError, match="give exactly one of 'ids' and 'filter'"):
        checked(Delete(collection="c", filter=""))  # an empty expr from the Milvus face


REPLIES: dict[str, dict[str, Any]] = {"query": {"rows": [], "ts": 1}, "delete": {"ts": 5}}


def _client() -> RecordingClient:
    client = RecordingClient(REPLIES)
    client._last_write_ts = 0
    client.retry_deadline_s, client.on_retry = 0.0, None  # a delete's retry: not here
    return client


def _sent(call: Callable[[RecordingClient], object]) -> list[tuple[str, dict[str, Any]]]:
    return sent_bodies(_client(), call)


@pytest.mark.parametrize(
    ("call", "bodies"),
    [
        (lambda c: c.query("c", "a > 1"), [("query", {
            "db": "own", "collection": "c", "output_fields": ["*"], "offset": 0,
            "filter": "a > 1"})]),
        (lambda c: c.query("c", ids=7, output_fields=["a"], limit=3, db="d",
                           consistency_level="strong", partition_names=["p"]),
         [("query", {"db": "d", "collection": "c", "output_fields": ["a"], "offset": 0,
                     "ids": [7], "limit": 3, "consistency_level": "Strong",
                     "partition_names": ["p"]})]),
        (lambda c: c.query("c", "", group_by_fields=["g"], order_by_fields=[],
                           filter_params={"x": 1}, as_of=9),
         [("query", {"db": "own", "collection": "c", "output_fields": ["g"], "offset": 0,
                     "group_by_fields": ["g"], "filter": "", "filter_params": {"x": 1},
                     "as_of": 9})]),
        (lambda c: c.delete("c", [1, 2]), [("delete", {
            "db": "own", "collection": "c", "ids": [1, 2]})]),
        (lambda c: c.delete("c", filter="a > 1", filter_params={"x": 1}, partition_name="p"),
         [("delete", {"db": "own", "collection": "c", "filter": "a > 1",
                      "filter_params": {"x": 1}, "partition": "p"})]),
        (lambda c: c.delete("c", "k", partition_name="", db="d"), [("delete", {
            "db": "d", "collection": "c", "ids": ["k"]})]),
    ],
)  # fmt: skip
def test_the_sdk_sends_the_bodies_it_always_sent(
    call: Callable[[RecordingClient], object], bodies: list[tuple[str, dict[str, Any]]]
) -> None:
    """The keys and values of the SDK's bodies before its records (empty ones left out)."""
    assert _sent(call) == bodies


def test_the_sdk_reads_its_own_writes_when_it_names_no_level() -> None:
    client = _client()
    client.delete("c", [1])  # the reply's ts: this client's newest write
    client.query("c", "a > 1")
    client.query("c", "a > 1", consistency_level="Session")
    bodies = [orjson.loads(raw) for _, raw in client.sent[1:]]
    assert bodies[0]["session_ts"] == 5 and "guarantee_timestamp" not in bodies[0]
    assert bodies[1]["guarantee_timestamp"] == 5 and "session_ts" not in bodies[1]


class _Planned(Exception):
    """Stops a read at its descriptor: no server here."""


def test_the_sdk_sends_the_read_plan_commands_it_always_sent() -> None:
    client = _client()
    sent: list[bytes] = []

    def planned(command: Any) -> NoReturn:
        sent.append(ReadAPI._plan_command(client, command).command)
        raise _Planned

    client._plan_command = planned  # type: ignore[method-assign]
    calls: list[Callable[[], object]] = [
        lambda: client.read_plan("c"),
        lambda: client.read_plan(
            "c", db="d", columns=["a"], filter="a > 1", filter_params={"x": 1},
            partition_names=["p"], snapshot_ts=9, files_only=True,
        ),
        lambda: client.read_schema("c", columns=["a"]),
    ]  # fmt: skip
    for call in calls:
        with pytest.raises(_Planned):
            call()
    plain, full, schema = sent
    assert orjson.loads(plain) == {"db": "own", "collection": "c"}
    assert orjson.loads(schema) == {"db": "own", "collection": "c", "columns": ["a"]}
    assert orjson.loads(full) == {
        "db": "d", "collection": "c", "columns": ["a"], "filter": "a > 1",
        "filter_params": {"x": 1}, "partition_names": ["p"], "snapshot_ts": 9,
        "files_only": True,
    }  # fmt: skip
    assert decoded("read_plan", orjson.loads(full)).files_only is True
