"""Operation records of ``search`` and ``hybrid_search`` (``elanus/ops/search.py``), as
tests/test_operations_reads.py holds ``query``: each action is declared by its record, a bad
body is refused with the words the dict checkers used, a face's record and a DoExchange
command are checked as bodies are, and the SDK's wire bodies are what they were."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from opcheck import RecordingClient, declaration_test, decoded, refusal_test, sent_bodies

from elanus.errors import ElanusError
from elanus.flight.registry import catalogue
from elanus.flight.search import search_command
from elanus.ops import checked
from elanus.ops.reads import ReadOptions
from elanus.ops.search import HybridSearch, Search, SearchOptions, SubSearch
from elanus.rankers import AnnSearchRequest, RRFRanker

test_an_operations_action_is_declared_by_its_record = declaration_test([Search, HybridSearch])

DECAY = {"input_field_names": ["t"], "params": {"reranker": "decay", "function": "gauss",
                                                "origin": 0, "scale": 10}}  # fmt: skip


def test_search_checks_and_authorises_its_own_body() -> None:
    """A search reuses the checked plan of an earlier body of its shape: the proxy hands
    the executor the body as sent, and the record is decoded when no plan fits."""
    spec = catalogue()["search"]
    assert spec.self_checked and not catalogue()["hybrid_search"].self_checked


def test_a_body_decodes_into_the_record_once() -> None:
    got = decoded("search", {"collection": "c", "data": [[1.0, 2.0]], "filter": ""})
    assert got == Search(collection="c", data=[[1.0, 2.0]], filter="")
    assert isinstance(got, ReadOptions) and isinstance(got, SearchOptions)
    assert (got.top, got.skip, got.window, got.group, got.per_group, got.strict) == (
        10, 0, 10, None, 1, False
    )  # fmt: skip
    assert (got.filter or None, got.params, got.outputs) == (None, {}, [])
    grouped = decoded(
        "search",
        {"collection": "c", "ids": [1], "limit": 3, "offset": 2, "group_by_field": "g",
         "group_size": 2, "strict_group_size": True},
    )  # fmt: skip
    assert (grouped.window, grouped.group, grouped.per_group, grouped.strict) == (5, "g", 2, True)


def test_a_hybrid_searchs_requests_are_searches() -> None:
    got = decoded(
        "hybrid_search",
        {"collection": "c", "limit": 3, "offset": 2, "as_of": 5, "group_by_field": "g",
         "reqs": [{"data": [[1.0]], "param": {"metric_type": "L2"}},
                  {"ids": [7], "anns_field": "v", "limit": 4, "filter": "a > 1"}]},
    )  # fmt: skip
    assert got.searches == [
        Search(collection="c", data=[[1.0]], limit=5, search_params={"metric_type": "L2"},
               group_by_field="g", as_of=5),
        Search(collection="c", ids=[7], anns_field="v", limit=4, filter="a > 1",
               group_by_field="g", as_of=5),
    ]  # fmt: skip
    assert got.fusion.strategy == "rrf"  # no ranker: RRF


def test_a_search_with_a_ranker_is_a_hybrid_search_of_one_request() -> None:
    search = checked(Search(collection="c", data=[[1.0]], limit=3, offset=1, ranker=DECAY))
    hybrid = checked(search.as_hybrid())
    assert hybrid.reqs == [SubSearch(data=[[1.0]])]
    assert (hybrid.top, hybrid.skip, hybrid.ranker) == (3, 1, DECAY)
    assert hybrid.searches[0].limit == 4  # limit + offset candidates, reranked


BIG = 16_384
BAD_BODIES = [
        ("search", {"collection": "c"},
         "search: give the query vectors in 'data' or primary keys in 'ids'"),
        ("search", {"collection": "c", "data": [[1.0]], "ids": [1]},
         "search: give either 'data' or 'ids', not both"),
        ("search", {"collection": "c", "data": []}, "search: 'data' holds no query vectors"),
        ("search", {"collection": "c", "data": "v"}, "search: 'data' must be a JSON array"),
        ("search", {"collection": "c", "data": [[1.0]] * (BIG + 1)},
         f"search: at most {BIG} query vectors per request, got {BIG + 1}"),
        ("search", {"collection": "c", "ids": []}, "search: 'ids' holds no primary keys"),
        ("search", {"collection": "c", "ids": list(range(BIG + 1))},
         f"search: at most {BIG} primary keys per request, got {BIG + 1}"),
        ("search", {"collection": "c", "data": [[1.0]], "limit": 0},
         f"search: 'limit' = 0 is out of range [1, {BIG}]"),
        ("search", {"collection": "c", "data": [[1.0]], "offset": -1},
         f"search: 'offset' = -1 is out of range [0, {BIG}]"),
        ("search", {"collection": "c", "data": [[1.0]], "limit": BIG, "offset": 1},
         f"search: limit + offset must be at most {BIG}"),
        ("search", {"collection": "c", "data": [[1.0]], "search_params": {"nprobe": 8}},
         "search: unknown search_params key(s) nprobe"),
        ("search", {"collection": "c", "data": [[1.0]], "search_params": {"params": 3}},
         "search: search_params 'params' must be an object"),
        ("search", {"collection": "c", "data": [[1.0]], "search_params": {"radius": "a"}},
         "search: search_params 'radius' must be a number, got 'a'"),
        ("search", {"collection": "c", "data": [[1.0]],
                    "search_params": {"params": {"range_filter": True}}},
         "search: search_params 'range_filter' must be a number, got True"),
        ("search", {"collection": "c", "data": [[1.0]], "search_params": {"metric_type": 3}},
         "search: search_params 'metric_type' must be a string"),
        ("search", {"collection": "c", "data": [[1.0]], "search_params": []},
         "search: 'search_params' must be a JSON object"),
        ("search", {"collection": "c", "data": [[1.0]], "group_size": 2},
         "search: group_size and strict_group_size need a group_by_field"),
        ("search", {"collection": "c", "data": [[1.0]], "group_by_field": "",
                    "strict_group_size": True},
         "search: group_size and strict_group_size need a group_by_field"),
        ("search", {"collection": "c", "data": [[1.0]], "group_by_field": "g", "group_size": 2,
                    "limit": 10_000},
         f"search: (limit + offset) * group_size must be at most {BIG}, got 20000"),
        ("search", {"collection": "c", "data": [[1.0]], "filter": 3},
         "search: 'filter' must be a string, got int"),
        ("search", {"collection": "c", "data": [[1.0]], "filter_params": []},
         "search: 'filter_params' must be a JSON object"),
        ("search", {"collection": "c", "data": [[1.0]], "output_fields": "a"},
         "search: 'output_fields' must be a JSON array"),
        ("search", {"collection": "c", "data": [[1.0]], "consistency_level": "Sometimes"},
         "consistency level 'Sometimes'"),
        ("search", {"collection": "c", "data": [[1.0]], "as_of": -1},
         "search: 'as_of' = -1 is out of range [0, None]"),
        ("search", {"collection": "c", "data": [[1.0]], "partition_names": ["9p"]},
         "partition name '9p' is invalid"),
        ("search", {"collection": "9c", "data": [[1.0]]}, "collection name '9c' is invalid"),
        ("search", {"collection": "c", "data": [[1.0]], "read_ts": 7},
         "search: unknown key(s) 'read_ts'"),  # the proxy's own pin: never a client's key
        ("search", {"collection": "c", "data": [[1.0]], "ranker": DECAY,
                    "highlighter": {"highlight_search_text": True}},
         "search: a highlighter cannot go with a ranker"),
        ("search", {"collection": "c", "data": [[1.0]], "ranker": {"strategy": "rrf"}},
         "search: 'ranker' must be a function ranker"),
        ("search", {"collection": "c", "data": [[1.0]], "highlighter": {"tags": 1}},
         "highlighter: unknown key(s) 'tags'"),
        ("hybrid_search", {"collection": "c", "reqs": []},
         "hybrid_search: 'reqs' holds no search requests (minimum of ann search requests is 1)"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]]}] * 1025},
         "hybrid_search: maximum of ann search requests is 1024, got 1025"),
        ("hybrid_search", {"collection": "c"}, "hybrid_search: missing required key 'reqs'"),
        ("hybrid_search", {"collection": "c", "reqs": [3]},
         "hybrid_search: reqs[0] must be a JSON object with data, anns_field, param and limit"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]], "expr": "a"}]},
         "hybrid_search: reqs[0]: unknown key(s) 'expr'; allowed keys are anns_field, data, "
         "filter, filter_params, ids, limit, param, search_params"),
        ("hybrid_search", {"collection": "c",
                           "reqs": [{"data": [[1.0]], "param": {}, "search_params": {}}]},
         "hybrid_search: reqs[0]: give either 'param' or 'search_params', not both"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]]}, {"anns_field": "v"}]},
         "hybrid_search: reqs[1]: give the query vectors in 'data' or primary keys in 'ids'"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]], "limit": 0}]},
         f"hybrid_search: reqs[0]: 'limit' = 0 is out of range [1, {BIG}]"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]], "param": 3}]},
         "hybrid_search: reqs[0]: 'search_params' must be a JSON object"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]]}], "limit": BIG,
                           "offset": 1},
         f"hybrid_search: limit + offset must be at most {BIG}"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]]}], "group_size": 2},
         "hybrid_search: group_size and strict_group_size need a group_by_field"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]]}],
                           "group_by_field": "g", "group_size": 2, "limit": 10_000},
         f"hybrid_search: (limit + offset) * group_size must be at most {BIG}"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]]}], "ranker": 3},
         "hybrid_search: 'ranker' must be a JSON object"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]]}], "ranker": DECAY,
                           "group_by_field": "g"},
         "hybrid_search: the decay ranker does not support grouping searches"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]]}],
                           "consistency_level": "Sometimes"},
         "consistency level 'Sometimes'"),
        ("hybrid_search", {"collection": "c", "reqs": [{"data": [[1.0]]}], "data": [[1.0]]},
         "hybrid_search: unknown key(s) 'data'"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_do_exchange_command_is_a_search_without_its_queries() -> None:
    command = search_command(orjson.dumps({"collection": "c", "limit": 3}))
    assert type(command) is SearchOptions and command.top == 3
    with pytest.raises(ElanusError, match="DoExchange command: unknown key"):
        search_command(orjson.dumps({"collection": "c", "data": [[1.0]]}))
    with pytest.raises(ElanusError, match="search: limit \\+ offset must be at most"):
        search_command(orjson.dumps({"collection": "c", "limit": BIG, "offset": BIG}))
    with pytest.raises(ElanusError, match="DoExchange command must be a JSON object"):
        search_command(b"[]")


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    assert checked(Search(collection="c", ids=[1])).ids == [1]
    with pytest.raises(ElanusError, match="collection name must be a non-empty string"):
        checked(Search(collection="", data=[[1.0]]))  # an unset proto field
    with pytest.raises(ElanusError, match=r"'limit' = 0 is out of range"):
        checked(Search(collection="c", data=[[1.0]], limit=0))
    with pytest.raises(ElanusError, match=r"reqs\[0\]: give either 'data' or 'ids'"):
        checked(HybridSearch(collection="c", reqs=[SubSearch(data=[[1.0]], ids=[1])]))


REPLIES: dict[str, dict[str, Any]] = {
    "search": {"results": [[]], "ts": 1, "metric_type": "L2"},
    "hybrid_search": {"results": [[]], "ts": 1},
}


def _sent(call: Callable[[RecordingClient], object]) -> list[tuple[str, dict[str, Any]]]:
    client = RecordingClient(REPLIES)
    client._last_write_ts = 0
    return sent_bodies(client, call)


HIGHLIGHT = {"pre_tags": ["<b>"], "highlight_search_text": True}


@pytest.mark.parametrize(
    ("call", "bodies"),
    [
        (lambda c: c.search("c", [[1.0, 2.0]]), [("search", {
            "db": "own", "collection": "c", "data": [[1.0, 2.0]], "limit": 10, "offset": 0,
            "output_fields": []})]),
        (lambda c: c.search("c", ids=7, filter="a > 1", limit=3, offset=2, output_fields=["a"],
                            search_params={"metric_type": "L2"}, anns_field="v", db="d",
                            filter_params={"x": 1}, group_by_field="g", group_size=2,
                            strict_group_size=False, consistency_level="strong",
                            partition_names=["p"]),
         [("search", {"db": "d", "collection": "c", "ids": [7], "limit": 3, "offset": 2,
                      "output_fields": ["a"], "filter": "a > 1", "filter_params": {"x": 1},
                      "search_params": {"metric_type": "L2"}, "anns_field": "v",
                      "group_by_field": "g", "group_size": 2, "strict_group_size": False,
                      "consistency_level": "Strong", "partition_names": ["p"]})]),
        (lambda c: c.search("c", ["some text"], ranker=DECAY, as_of=9, filter="",
                            search_params={}, anns_field=""),
         [("search", {"db": "own", "collection": "c", "data": ["some text"], "limit": 10,
                      "offset": 0, "output_fields": [], "ranker": DECAY, "as_of": 9})]),
        (lambda c: c.search("c", [[1.0]], highlighter=HIGHLIGHT, guarantee_timestamp=4),
         [("search", {"db": "own", "collection": "c", "data": [[1.0]], "limit": 10,
                      "offset": 0, "output_fields": [], "highlighter": HIGHLIGHT,
                      "guarantee_timestamp": 4})]),
        (lambda c: c.hybrid_search("c", [{"data": [[1.0]], "anns_field": "v", "limit": 3}]),
         [("hybrid_search", {"db": "own", "collection": "c", "limit": 10, "offset": 0,
                             "output_fields": [],
                             "reqs": [{"data": [[1.0]], "anns_field": "v", "limit": 3}]})]),
        (lambda c: c.hybrid_search(
            "c", [AnnSearchRequest([[1.0]], "v", {"metric_type": "IP"}, 4, expr="a > 1",
                                   expr_params={"x": 1})],
            RRFRanker(30), limit=5, offset=1, output_fields=["a"], partition_names=["p"],
            group_by_field="g", group_size=2, db="d", consistency_level="Bounded"),
         [("hybrid_search", {"db": "d", "collection": "c", "limit": 5, "offset": 1,
                             "output_fields": ["a"], "ranker": RRFRanker(30).dict(),
                             "group_by_field": "g", "group_size": 2,
                             "consistency_level": "Bounded", "partition_names": ["p"],
                             "reqs": [{"data": [[1.0]], "anns_field": "v", "limit": 4,
                                       "search_params": {"metric_type": "IP"},
                                       "filter": "a > 1", "filter_params": {"x": 1}}]})]),
    ],
)  # fmt: skip
def test_the_sdk_sends_the_bodies_it_always_sent(
    call: Callable[[RecordingClient], object], bodies: list[tuple[str, dict[str, Any]]]
) -> None:
    """The keys and values of the SDK's bodies before its records (empty ones left out),
    each one a body its action takes."""
    assert _sent(call) == bodies
    for name, body in bodies:
        decoded(name, body)


def test_the_sdk_reads_its_own_writes_when_it_names_no_level() -> None:
    client = RecordingClient(REPLIES)
    client._last_write_ts = 5
    client.search("c", [[1.0]])
    client.hybrid_search("c", [{"data": [[1.0]]}], consistency_level="Session")
    search, hybrid = (orjson.loads(raw) for _, raw in client.sent)
    assert search["session_ts"] == 5 and "guarantee_timestamp" not in search
    assert hybrid["guarantee_timestamp"] == 5 and "session_ts" not in hybrid
