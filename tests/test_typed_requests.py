"""Typed requests (``elanus.requests.request``): a dataclass's fields are a body's schema,
checked once where the body arrives, with the words ``Body`` uses; and the coordinator's
handlers, served by ``Role.serve``, refuse malformed bodies over NATS naming the key."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import field
from typing import Annotated, Any

import numpy as np
import pyarrow as pa
import pytest
from nats_settings import settings_on

from elanus import DataType, Schema
from elanus.api.base import as_body
from elanus.api.indexcoord import ClaimIndexTasks, IndexReport
from elanus.api.rootcoord import CreateCollection, TsoAlloc
from elanus.channels import frames
from elanus.channels.bus import Bus
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.loop import LoopThread
from elanus.channels.runtime.role import at_edge
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.coord import Coordinator
from elanus.requests import Body, Range, decode, request, request_type


@request("probe")
class Probe:
    n: int
    ratio: float = 0.5
    name: str = "x"
    flag: bool = False
    shards: Annotated[int, Range(1, 16)] = 1
    limit: Annotated[int | None, Range(1)] = None
    ids: list[int] = field(default_factory=list)
    tags: list[str] | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    note: str | None = None
    anything: Any = None
    vectors: np.ndarray | None = None
    column: pa.Array | None = None
    table: pa.Table | None = None


@request("probe.empty")
class Empty:
    pass


def refused(cls: type, raw: Any) -> str:
    with pytest.raises(ElanusError) as err:
        decode(cls, raw)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    return err.value.message


# -- decoding ---------------------------------------------------------------------------------


def test_every_field_kind_decodes() -> None:
    vectors = np.ones((2, 3), dtype=np.float32)
    column, table = pa.array([1, 2]), pa.table({"a": [1]})
    raw = {
        "n": 3, "ratio": 2, "name": "a", "flag": True, "shards": 16, "limit": 1,
        "ids": [1, 2], "tags": ["t"], "rows": [{"k": 1}], "options": {"o": [1]},
        "counts": {"c": 4}, "note": "hi", "anything": {"deep": [None]},
        "vectors": vectors, "column": column, "table": table,
    }  # fmt: skip
    got = decode(Probe, raw)
    assert (got.n, got.name, got.flag, got.shards, got.limit) == (3, "a", True, 16, 1)
    assert got.ratio == 2.0 and isinstance(got.ratio, float)  # ints are numbers, as in Body
    assert got.ids == [1, 2] and got.tags == ["t"] and got.rows == [{"k": 1}]
    assert got.options == {"o": [1]} and got.counts == {"c": 4} and got.note == "hi"
    assert got.anything == {"deep": [None]}
    assert got.vectors is vectors and got.column is column and got.table is table
    assert as_body(got) == {**raw, "ratio": 2.0}


def test_absent_and_null_keys_take_the_defaults() -> None:
    a, b = decode(Probe, {"n": 1}), decode(Probe, {"n": 1, "ids": None, "note": None})
    assert (a.ratio, a.name, a.flag, a.shards, a.limit, a.note, a.tags) == (
        0.5, "x", False, 1, None, None, None,
    )  # fmt: skip
    assert a.ids == [] and b.ids == [] and a.ids is not b.ids  # a fresh list each time
    assert decode(Empty, {}) == Empty()


def test_a_request_is_frozen_and_an_instance_passes_as_is() -> None:
    probe = Probe(n=2)
    assert decode(Probe, probe) is probe
    with pytest.raises(dataclasses.FrozenInstanceError):
        probe.n = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        Probe(2)  # type: ignore[misc]  # keyword-only, like a body


# -- the words of Body ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "probe: missing required key 'n'"),
        ({"n": None}, "probe: missing required key 'n'"),
        ({"n": True}, "probe: 'n' must be an integer, got True"),
        ({"n": 1.5}, "probe: 'n' must be an integer, got 1.5"),
        ({"n": "1"}, "probe: 'n' must be an integer, got '1'"),
        ({"n": 1, "ratio": False}, "probe: 'ratio' must be a number, got False"),
        ({"n": 1, "ratio": "x"}, "probe: 'ratio' must be a number, got 'x'"),
        ({"n": 1, "name": 5}, "probe: 'name' must be a string, got int"),
        ({"n": 1, "flag": 1}, "probe: 'flag' must be true or false, got 1"),
        ({"n": 1, "shards": 0}, "probe: 'shards' = 0 is out of range [1, 16]"),
        ({"n": 1, "shards": 17}, "probe: 'shards' = 17 is out of range [1, 16]"),
        ({"n": 1, "limit": 0}, "probe: 'limit' = 0 is out of range [1, None]"),
        ({"n": 1, "ids": "1,2"}, "probe: 'ids' must be a JSON array"),
        ({"n": 1, "ids": [1, True]}, "probe: 'ids'[1] must be an integer, got True"),
        ({"n": 1, "tags": ["a", 2]}, "probe: 'tags'[1] must be a string, got int"),
        ({"n": 1, "rows": [{}, []]}, "probe: 'rows'[1] must be a JSON object"),
        ({"n": 1, "options": []}, "probe: 'options' must be a JSON object"),
        ({"n": 1, "counts": {"a": "b"}}, "probe: 'counts'['a'] must be an integer, got 'b'"),
        ({"n": 1, "vectors": [[1.0]]}, "probe: 'vectors' must be of type ndarray, got list"),
        ({"n": 1, "table": {"a": [1]}}, "probe: 'table' must be of type Table, got dict"),
        ({"n": 1, "colour": 1, "age": 2}, "probe: unknown key(s) 'age', 'colour'"),
        ([1], "probe body must be a JSON object, got list"),
    ],
)
def test_refusals_use_the_words_of_body(raw: Any, message: str) -> None:
    assert refused(Probe, raw) == message


def test_the_same_body_gets_the_same_words_from_body_and_decode() -> None:
    """The coord's typed handlers answer as the Body-reading ones did."""

    def by_body(raw: Any) -> Any:
        b = Body(raw, "index.claim")
        b.str("node_id"), b.int("collection_id", None), b.int("limit", None, lo=1)
        b.bool("retry_failed", False)
        b.done()

    for raw in (
        {},
        {"node_id": 3},
        {"node_id": "n", "collection_id": False},
        {"node_id": "n", "limit": 0},
        {"node_id": "n", "retry_failed": "yes"},
        {"node_id": "n", "lease": 1},
    ):
        with pytest.raises(ElanusError) as old:
            by_body(raw)
        assert refused(ClaimIndexTasks, raw) == old.value.message


def test_bad_annotations_are_refused_as_programming_errors() -> None:
    @request("odd")
    class Odd:
        both: int | str

    with pytest.raises(TypeError, match="one type, or X | None"):
        decode(Odd, {"both": 1})

    class Handlers:
        async def typed(self, req: IndexReport) -> None: ...

        async def raw(self, raw: dict[str, Any]) -> None: ...

        async def hidden(self, req: NotImported) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    h = Handlers()
    assert request_type(h.typed) is IndexReport
    assert request_type(h.raw) is None and at_edge(h.raw) == h.raw
    with pytest.raises(TypeError, match="NotImported"):
        request_type(h.hidden)


def test_decode_is_cheap() -> None:
    """Checkers are compiled once per type; a decode is a few microseconds, a long id
    list one scan."""
    import time

    raw = {"build_id": 1, "version": 2, "ok": True, "files": ["a", "b"], "node_id": "n"}
    decode(IndexReport, raw)
    started = time.perf_counter()
    for _ in range(10_000):
        decode(IndexReport, raw)
    assert (time.perf_counter() - started) / 10_000 < 200e-6
    many = {"n": 1, "ids": list(range(200_000))}
    started = time.perf_counter()
    assert decode(Probe, many).ids is many["ids"]
    assert time.perf_counter() - started < 1.0


# -- at the coord's edge, over NATS -----------------------------------------------------------


@pytest.fixture(scope="module")
def coord_bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopThread, Bus]]:
    """A coordinator on its own NATS server, and a second connection to ask it; one for the
    file: a refused body changes nothing."""
    tmp_path = tmp_path_factory.mktemp("typed")
    with EmbeddedNats(tmp_path / "nats") as nats_server:
        loop_thread = LoopThread("typed-requests").start()
        try:
            creds = nats_server.credentials
            settings = settings_on(nats_server, tmp_path / "data", session_ttl_s=2)
            connect = Bus(nats_server.url, name="coord", credentials=creds).connect()
            coord_bus = loop_thread.call(connect)
            coord = Coordinator(settings, coord_bus)
            loop_thread.call(coord.start(), timeout=30)
            asker = loop_thread.call(
                Bus(nats_server.url, name="asker", credentials=creds).connect()
            )
            try:
                yield loop_thread, asker
            finally:
                loop_thread.call(asker.close())
                loop_thread.call(coord.stop(), timeout=30)
                loop_thread.call(coord_bus.close())
        finally:
            loop_thread.stop()


def _over_nats(loop: LoopThread, bus: Bus, method: str, body: Any) -> dict[str, Any]:
    """The reply to a raw frame message through the NATS server (no in-process shortcut)."""
    msg = loop.call(bus.nc.request(f"elanus.coord.{method}", frames.encode(body), 10))
    return dict(frames.decode(msg.data))


@pytest.mark.parametrize(
    ("method", "body", "words"),
    [
        ("tso.alloc", {"count": True}, "tso.alloc: 'count' must be an integer, got True"),
        ("tso.alloc", {"count": 0}, "tso.alloc: 'count' = 0 is out of range [1, 262144]"),
        ("collection.create", {"schema": {}}, "collection.create: missing required key 'name'"),
        ("index.report", {"build_id": 1, "version": 1, "ok": "yes"}, "'ok' must be true or false"),
        ("flush.state", {"segment_ids": [1, "2"]}, "'segment_ids'[1] must be an integer"),
        ("database.list", {"verbose": True}, "database.list: unknown key(s) 'verbose'"),
        ("auth.user.create", {"user": "ann", "password": 7}, "'password' must be a string"),
    ],
)
def test_coord_refuses_a_malformed_body_over_nats(
    coord_bus: tuple[LoopThread, Bus], method: str, body: Any, words: str
) -> None:
    loop, bus = coord_bus
    reply = _over_nats(loop, bus, method, body)
    assert reply["ok"] is False
    assert reply["error"]["code"] == "INVALID_ARGUMENT"
    assert words in reply["error"]["message"]


def test_coord_serves_typed_handlers_both_ways(coord_bus: tuple[LoopThread, Bus]) -> None:
    loop, bus = coord_bus
    over_nats = _over_nats(loop, bus, "tso.alloc", {"count": 3})
    assert over_nats["ok"] and over_nats["result"].count == 3
    # In process, Bus.request reaches the same decoding edge (and takes an instance as is).
    assert loop.call(bus.request("elanus.coord.tso.alloc", {"count": 2})).count == 2
    assert loop.call(bus.request("elanus.coord.tso.alloc", TsoAlloc(count=4))).count == 4
    with pytest.raises(ElanusError) as err:
        loop.call(bus.request("elanus.coord.tso.alloc", {"count": 1 << 19}))
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and "'count'" in err.value.message
    # A request built by a caller in another package.
    schema = (
        Schema()
        .add_field("id", DataType.INT64, is_primary=True)
        .add_field("v", DataType.FLOAT_VECTOR, dim=2)
        .to_dict()
    )
    made = CreateCollection(name="typed", schema=schema)
    info = loop.call(bus.request("elanus.coord.collection.create", made))
    assert info.name == "typed"
    described = _over_nats(loop, bus, "collection.describe", {"name": "typed"})
    assert described["result"].collection_id == info.collection_id
    # The coord's own calls are typed too: one without arguments refuses a stray key.
    assert _over_nats(loop, bus, "session.list", {})["ok"]
    stray = _over_nats(loop, bus, "session.list", {"anything": 1})
    assert stray["error"]["code"] == "INVALID_ARGUMENT"
