"""Operation records of loads, indexes, flush and segments (``elanus/ops/loads.py``,
``indexes.py``, ``segments.py``), as tests/test_operations.py holds partitions and aliases:
each action's keys come from its record, a bad body is refused with the words the dict
checkers used, a face's record is checked as a body, and the SDK's wire bodies are what they
were (keys it left out when empty still left out)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opcheck import RecordingClient, declaration_test, decoded, refusal_test, sent_bodies

from elanus.api import querycoord
from elanus.errors import ElanusError
from elanus.ops import checked
from elanus.ops import indexes as index_ops
from elanus.ops import loads as load_ops
from elanus.ops import segments as segment_ops

RECORDS = [
    load_ops.LoadCollection, load_ops.ReleaseCollection, load_ops.GetLoadState,
    load_ops.DescribeReplica,
    index_ops.CreateIndex, index_ops.DropIndex, index_ops.DescribeIndex, index_ops.ListIndexes,
    segment_ops.GetCollectionStats, segment_ops.Flush, segment_ops.GetFlushState,
    segment_ops.GetSegmentInfo, segment_ops.Compact, segment_ops.GetCompactionState,
]  # fmt: skip


test_an_operations_action_is_declared_by_its_record = declaration_test(RECORDS)


def test_the_replica_bound_is_the_query_coords() -> None:
    assert querycoord.MAX_REPLICAS is load_ops.MAX_REPLICAS  # one bound, for both


def test_a_body_decodes_into_the_record_once() -> None:
    got = decoded("load_collection", {"collection": "c", "partition_names": ["p"]})
    assert got == load_ops.LoadCollection(collection="c", partition_names=["p"])
    assert decoded("create_index", {"collection": "c", "field_name": "v", "index_name": ""}) == (
        index_ops.CreateIndex(collection="c", field_name="v", index_name="")  # "": not given
    )
    assert decoded("get_flush_state", {"segment_ids": [1, 2]}).db is None  # no database
    assert decoded("get_segment_info", {"collection": "c"}).collection == "c"
    assert decoded("compact", {"collection": "c"}).target_size_mb is None


BAD_BODIES = [
        ("load_collection", {}, "load_collection: missing required key 'collection'"),
        ("load_collection", {"collection": "c", "partition_names": "p"},
         "load_collection: 'partition_names' must be a JSON array"),
        ("load_collection", {"collection": "c", "partition_names": ["9p"]},
         "partition name '9p' is invalid"),
        ("load_collection", {"collection": "c", "partition_names": [7]},
         "partition name must be a non-empty string"),
        ("load_collection", {"collection": "c", "replica_number": 0},
         "load_collection: 'replica_number' = 0 is out of range [1, 100]"),
        ("load_collection", {"collection": "c", "replica_number": True},
         "load_collection: 'replica_number' must be an integer, got True"),
        ("release_collection", {"collection": "bad name"}, "collection name 'bad name' is "
         "invalid"),
        ("get_load_state", {"collection": 5},
         "get_load_state: 'collection' must be a string, got int"),
        ("describe_replica", {"collection": "c", "partition": "p"},
         "describe_replica: unknown key(s) 'partition'; allowed keys are collection, db"),
        ("create_index", {"collection": "c"}, "create_index: 'field_name' is required"),
        ("create_index", {"collection": "c", "field_name": ""},
         "create_index: 'field_name' is required"),
        ("create_index", {"collection": "c", "field_name": "v", "index_name": "9i"},
         "index name '9i' is invalid"),
        ("create_index", {"collection": "c", "field_name": "v", "params": []},
         "create_index: 'params' must be a JSON object"),
        ("create_index", {"collection": "c", "field_name": "v", "metric_type": 2},
         "create_index: 'metric_type' must be a string, got int"),
        # the names in the dict checker's order: the collection's before the index's
        ("drop_index", {"collection": "", "index_name": "9i"},
         "collection name must be a non-empty string"),
        ("describe_index", {"collection": "c", "field_name": "9f"}, "field name '9f' is invalid"),
        ("describe_index", {"collection": "c", "index_name": 3},
         "describe_index: 'index_name' must be a string, got int"),
        ("list_indexes", {"collection": "c", "field_name": "v"},
         "list_indexes: unknown key(s) 'field_name'; allowed keys are collection, db"),
        ("get_collection_stats", {"collection": ""}, "collection name must be a non-empty"),
        ("flush", {"db": "", "collection": "c"}, "database name must be a non-empty string"),
        ("get_flush_state", {}, "get_flush_state: missing required key 'segment_ids'"),
        ("get_flush_state", {"segment_ids": [1, True]},
         "get_flush_state: 'segment_ids' must be a list of integers"),
        ("get_flush_state", {"segment_ids": ["1"]},
         "get_flush_state: 'segment_ids' must be a list of integers"),
        ("get_segment_info", {},
         "get_segment_info: give exactly one of 'collection' and 'segment_ids'"),
        ("get_segment_info", {"collection": "c", "segment_ids": [1]},
         "get_segment_info: give exactly one of 'collection' and 'segment_ids'"),
        ("get_segment_info", {"collection": "9c"}, "collection name '9c' is invalid"),
        ("get_segment_info", {"segment_ids": {}},
         "get_segment_info: 'segment_ids' must be a JSON array"),
        ("compact", {"collection": "c", "target_size_mb": 0},
         "compact: 'target_size_mb' = 0 is out of range [1, None]"),
        ("get_compaction_state", {"compaction_id": 0},
         "get_compaction_state: 'compaction_id' = 0 is out of range [1, None]"),
        ("get_compaction_state", {"compaction_id": "5"},
         "get_compaction_state: 'compaction_id' must be an integer, got '5'"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    assert checked(load_ops.GetLoadState(collection="c")).collection == "c"
    with pytest.raises(ElanusError, match="collection name must be a non-empty string"):
        checked(load_ops.ReleaseCollection(collection=""))  # an unset proto field
    with pytest.raises(ElanusError, match=r"'replica_number' = 101 is out of range \[1, 100\]"):
        checked(load_ops.LoadCollection(collection="c", replica_number=101))
    with pytest.raises(ElanusError, match="'field_name' is required"):
        checked(index_ops.CreateIndex(collection="c", field_name=""))
    with pytest.raises(ElanusError, match="'metric_type' must be a string, got int"):
        checked(index_ops.CreateIndex(collection="c", field_name="v", metric_type=3))  # type: ignore[arg-type]
    with pytest.raises(ElanusError, match="out of range"):
        checked(segment_ops.GetCompactionState(db="default", compaction_id=0))  # unset id


REPLIES: dict[str, dict[str, Any]] = {
    "describe_replica": {"replicas": []},
    "get_load_state": {"state": "NotLoad"},
    "get_collection_stats": {"row_count": 0},
    "flush": {"segment_ids": []},
    "get_flush_state": {"flushed": True},
    "get_segment_info": {"segments": []},
    "compact": {"compaction_id": 1},
    "get_compaction_state": {"state": "completed"},
    "create_index": {"index_id": 1},
    "describe_index": {"indexes": []},
    "list_indexes": {"names": []},
}


@pytest.mark.parametrize(
    ("call", "bodies"),
    [
        (lambda c: c.load_collection("c"), [("load_collection", {"db": "own", "collection": "c"})]),
        (lambda c: c.load_collection("c", partition_names=[], replica_number=2, db="d"),
         [("load_collection", {"db": "d", "collection": "c", "replica_number": 2})]),
        (lambda c: c.load_partitions("c", "p"), [("load_collection", {
            "db": "own", "collection": "c", "partition_names": ["p"]})]),
        (lambda c: c.release_collection("c"), [("release_collection", {
            "db": "own", "collection": "c"})]),
        (lambda c: c.get_load_state("c", db="d"), [("get_load_state", {
            "db": "d", "collection": "c"})]),
        (lambda c: c.describe_replica("c"), [("describe_replica", {
            "db": "own", "collection": "c"})]),
        (lambda c: c.get_collection_stats("c"), [("get_collection_stats", {
            "db": "own", "collection": "c"})]),
        (lambda c: c.flush("c"), [("flush", {"db": "own", "collection": "c"})]),
        (lambda c: c.get_flush_state([3, 4]), [("get_flush_state", {"segment_ids": [3, 4]})]),
        (lambda c: c.get_segment_info(segment_ids=[5]), [("get_segment_info", {
            "segment_ids": [5]})]),
        (lambda c: c.get_segment_info("c"), [("get_segment_info", {
            "db": "own", "collection": "c"})]),
        (lambda c: c.compact("c"), [("compact", {"db": "own", "collection": "c"})]),
        (lambda c: c.compact("c", target_size=2, target_size_unit="gb"), [("compact", {
            "db": "own", "collection": "c", "target_size_mb": 2048})]),
        (lambda c: c.get_compaction_state(9), [("get_compaction_state", {"compaction_id": 9})]),
        (lambda c: c.create_index("c", field_name="v"), [("create_index", {
            "db": "own", "collection": "c", "field_name": "v", "index_type": "AUTOINDEX"})]),
        (lambda c: c.create_index("c", field_name="v", index_type="HNSW", metric_type="L2",
                                  params={"M": 8}, index_name="i"),
         [("create_index", {"db": "own", "collection": "c", "field_name": "v",
                            "index_type": "HNSW", "index_name": "i", "metric_type": "L2",
                            "params": {"M": 8}})]),
        (lambda c: c.drop_index("c"), [("drop_index", {"db": "own", "collection": "c"})]),
        (lambda c: c.drop_index("c", "i", field_name="v"), [("drop_index", {
            "db": "own", "collection": "c", "index_name": "i", "field_name": "v"})]),
        (lambda c: c.describe_index("c", field_name="v"), [("describe_index", {
            "db": "own", "collection": "c", "field_name": "v"})]),
        (lambda c: c.list_indexes("c"), [("list_indexes", {"db": "own", "collection": "c"})]),
        (lambda c: c.list_loaded_segments("c"), [("get_load_state", {
            "db": "own", "collection": "c"})]),
        (lambda c: c.list_persistent_segments("c", db="d"), [("get_segment_info", {
            "db": "d", "collection": "c"})]),
    ],
)  # fmt: skip
def test_the_sdk_sends_the_bodies_it_always_sent(
    call: Callable[[RecordingClient], object], bodies: list[tuple[str, dict[str, Any]]]
) -> None:
    """The keys and values of the SDK's bodies before its records (empty ones left out)."""
    assert sent_bodies(RecordingClient(REPLIES), call) == bodies
