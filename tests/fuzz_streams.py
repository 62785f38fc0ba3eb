"""The stream-call cases of the malformed-request suite: DoPut (wrong schemas, wrong data,
FlightData that is not Arrow), DoGet tickets, GetFlightInfo/GetSchema commands, DoExchange,
and the oversized bodies and streams of the limits settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from fuzz_cases import (
    ABSENT,
    BIG,
    DIM,
    INV,
    MAIN,
    MIB,
    TOO_LARGE,
    VEC,
    Batches,
    Case,
    deep_array,
    deep_object,
    dumps,
)

# -- DoPut: wrong schemas and data -----------------------------------------------------------
VEC_TYPE = pa.list_(pa.float32(), DIM)
PUT = dumps({"collection": MAIN, "atomic": True})
PUT_STREAMING = dumps({"collection": MAIN})


def good_batch(n: int = 2, start: int = 500_000) -> pa.RecordBatch:
    """Rows ``MAIN`` would take (keys far from the stored ones)."""
    return pa.record_batch(
        {
            "id": pa.array(np.arange(start, start + n), pa.int64()),
            "vec": pa.array(np.full((n, DIM), 0.5, np.float32).tolist(), VEC_TYPE),
            "title": pa.array([f"r{i}" for i in range(n)]),
            "doc": pa.array([None] * n, pa.string()),
        }
    )


def _with(name: str, values: pa.Array) -> pa.RecordBatch:
    b = good_batch(len(values))
    i = b.schema.get_field_index(name)
    return b.set_column(i, name, values) if i >= 0 else b.append_column(name, values)


def _without(name: str) -> pa.RecordBatch:
    b = good_batch()
    return b.drop_columns([name])


def _one(make: Callable[[], pa.RecordBatch]) -> Batches:
    def batches() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        b = make()
        return b.schema, [b]

    return batches


F32 = pa.float32()
BAD_BATCHES: list[tuple[str, Callable[[], pa.RecordBatch]]] = [
    ("pk-utf8", lambda: _with("id", pa.array(["a", "b"]))),
    ("pk-float", lambda: _with("id", pa.array([1.5, 2.5]))),
    ("pk-bool", lambda: _with("id", pa.array([True, False]))),
    ("pk-null", lambda: _with("id", pa.array([None, 500_001], pa.int64()))),
    ("pk-uint64-over", lambda: _with("id", pa.array([2**64 - 1, 1], pa.uint64()))),
    ("pk-decimal", lambda: _with("id", pa.array([1, 2], pa.int64()).cast(pa.decimal128(20, 0)))),
    ("pk-timestamp", lambda: _with("id", pa.array([1, 2], pa.timestamp("s")))),
    ("pk-missing", lambda: _without("id")),
    ("pk-duplicate", lambda: _with("id", pa.array([500_000, 500_000], pa.int64()))),
    ("vec-missing", lambda: _without("vec")),
    ("vec-dim3", lambda: _with("vec", pa.array([[1, 2, 3]] * 2, pa.list_(F32, 3)))),
    ("vec-dim5", lambda: _with("vec", pa.array([[1, 2, 3, 4, 5]] * 2, pa.list_(F32, 5)))),
    ("vec-ragged", lambda: _with("vec", pa.array([[1, 2, 3], [1, 2, 3, 4, 5]], pa.list_(F32)))),
    ("vec-empty", lambda: _with("vec", pa.array([[], []], pa.list_(F32)))),
    ("vec-strings", lambda: _with("vec", pa.array([["a"] * DIM] * 2, pa.list_(pa.string(), DIM)))),
    ("vec-nan", lambda: _with("vec", pa.array([[float("nan")] * DIM] * 2, VEC_TYPE))),
    ("vec-inf", lambda: _with("vec", pa.array([[float("inf"), 0, 0, 0]] * 2, VEC_TYPE))),
    (
        "vec-f64-overflow",
        lambda: _with("vec", pa.array([[1e308] * DIM] * 2, pa.list_(pa.float64(), DIM))),
    ),
    ("vec-null", lambda: _with("vec", pa.array([None, [1, 2, 3, 4]], VEC_TYPE))),
    ("vec-null-element", lambda: _with("vec", pa.array([[None, 1, 2, 3]] * 2, VEC_TYPE))),
    ("vec-struct", lambda: _with("vec", pa.array([{"a": 1}] * 2))),
    ("vec-scalar", lambda: _with("vec", pa.array([1.0, 2.0]))),
    ("vec-binary", lambda: _with("vec", pa.array([b"\x00" * 16] * 2, pa.binary(16)))),
    ("title-int", lambda: _with("title", pa.array([1, 2]))),
    ("title-too-long", lambda: _with("title", pa.array(["x" * 17] * 2))),
    ("title-binary", lambda: _with("title", pa.array([b"\xff\xfe", b"a"], pa.binary()))),
    ("title-null", lambda: _with("title", pa.array([None, "a"], pa.string()))),
    ("doc-not-json", lambda: _with("doc", pa.array(["{", None]))),
    ("doc-int", lambda: _with("doc", pa.array([1, 2]))),
    ("extra-column", lambda: _with("extra", pa.array([1, 2]))),
    ("meta-column", lambda: _with("$meta", pa.array(["{}", "{}"]))),
    ("ts-column", lambda: _with("_ts", pa.array([1, 2], pa.uint64()))),
    ("nul-column-name", lambda: _with("ti\x00tle", pa.array(["a", "b"]))),
    (
        "duplicate-column",
        lambda: pa.RecordBatch.from_arrays(
            [*good_batch().columns, good_batch().column(0)],
            names=["id", "vec", "title", "doc", "id"],
        ),
    ),
]


def put_cases() -> list[Case]:
    out = []
    for label, make in BAD_BATCHES:
        for mode, command in (("atomic", PUT), ("streaming", PUT_STREAMING)):
            out.append(
                Case(
                    f"put/{mode}/{label}",
                    "put",
                    command,
                    batches=_one(make),
                    codes=frozenset({"INVALID_ARGUMENT", "SCHEMA_MISMATCH"}),
                    writes=MAIN,
                )
            )

    def good_then_bad() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        good = good_batch(2, 600_000)
        bad = good_batch(2, 600_002).set_column(
            1, "vec", pa.array([[float("nan")] * DIM] * 2, VEC_TYPE)
        )
        return good.schema, [good, bad]

    def split_duplicates() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        return good_batch().schema, [good_batch(2, 610_000), good_batch(2, 610_001)]

    def empty() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        return good_batch().schema, [good_batch().slice(0, 0)]

    def nothing() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        return good_batch().schema, []

    def no_columns() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        b = pa.RecordBatch.from_arrays([], names=[])
        return b.schema, [b]

    out += [
        Case("put/atomic/good-then-bad", "put", PUT, batches=good_then_bad, codes=INV, writes=MAIN),
        Case(
            "put/atomic/duplicate-across-batches",
            "put",
            PUT,
            batches=split_duplicates,
            codes=INV,
            writes=MAIN,
        ),
        Case("put/empty-batch", "put", PUT, batches=empty, ok=True, writes=MAIN),
        Case("put/no-batches", "put", PUT, batches=nothing, ok=True, writes=MAIN),
        Case("put/no-columns", "put", PUT, batches=no_columns, ok=True, writes=MAIN),
    ]
    good = _one(lambda: good_batch(1, 620_000))
    commands = [
        ("empty", b""),
        ("garbage", b"\x00\xffgarbage"),
        ("array", b"[]"),
        ("truncated", PUT[:10]),
        ("duplicate-key", b'{"collection":"fz","collection":"fz_absent"}'),
        ("op-delete", dumps({"collection": MAIN, "op": "delete"})),
        ("op-int", dumps({"collection": MAIN, "op": 1})),
        ("atomic-string", dumps({"collection": MAIN, "atomic": "yes"})),
        ("collection-int", dumps({"collection": 5})),
        ("collection-nul", dumps({"collection": "fz\x00"})),
        ("unknown-key", dumps({"collection": MAIN, "ttl": 5})),
        ("stage-dotdot", dumps({"collection": MAIN, "stage": "../../etc"})),
        ("stage-absolute", dumps({"collection": MAIN, "stage": "/srv/x"})),
        ("stage-part-dotdot", dumps({"collection": MAIN, "stage": "s1", "stage_part": "../x"})),
        ("stage-part-alone", dumps({"collection": MAIN, "stage_part": "p"})),
        ("deep", b'{"collection":"fz","x":' + deep_array(100) + b"}"),
        ("nan", b'{"collection":"fz","atomic":NaN}'),
        ("db-absent", dumps({"collection": MAIN, "db": "fzdb_absent"})),
    ]
    for label, command in commands:
        out.append(Case(f"put/command/{label}", "put", command, batches=good, writes=MAIN))
    out.append(Case("put/command/path-descriptor", "put", path=("fz",), batches=good, writes=MAIN))
    out.append(
        Case(
            "put/command/partition-absent",
            "put",
            dumps({"collection": MAIN, "partition": "nope"}),
            batches=good,
            codes=frozenset({"PARTITION_NOT_FOUND"}),
            writes=MAIN,
        )
    )
    out.append(
        Case(
            "put/command/collection-absent",
            "put",
            dumps({"collection": ABSENT}),
            batches=good,
            codes=frozenset({"COLLECTION_NOT_FOUND"}),
            writes=MAIN,
        )
    )
    return out


# -- DoPut below Arrow: FlightData frames that are not (valid) Arrow IPC ---------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def flight_data(descriptor: bytes | None = None, header: bytes = b"", body: bytes = b"") -> bytes:
    """A FlightData protobuf message: descriptor (1), data_header (2), data_body (1000)."""
    out = _field(1, descriptor) if descriptor is not None else b""
    out += _field(2, header) if header else b""
    return out + (_field(1000, body) if body else b"")


def command_descriptor(command: bytes) -> bytes:
    return _varint(1 << 3) + _varint(2) + _field(2, command)  # type CMD, cmd


LENIENT = {"body-without-header"}
"""A FlightData message with no IPC header carries no batch: Arrow's reader skips it."""


def raw_put_cases() -> list[Case]:
    batch = good_batch(2, 630_000)
    schema_msg = pa.ipc.read_message(batch.schema.serialize())
    batch_msg = pa.ipc.read_message(batch.serialize())
    header, body = batch_msg.metadata.to_pybytes(), batch_msg.body.to_pybytes()
    first = flight_data(command_descriptor(PUT), schema_msg.metadata.to_pybytes())
    frames: list[tuple[str, tuple[bytes, ...]]] = [
        ("garbage-schema", (flight_data(command_descriptor(PUT), b"\x00garbage" * 8),)),
        ("garbage-batch-header", (first, flight_data(None, b"garbage" * 5, b"x" * 64))),
        ("truncated-body", (first, flight_data(None, header, body[:10]))),
        ("body-without-header", (first, flight_data(None, b"", b"x" * 64))),
        ("batch-before-schema", (flight_data(command_descriptor(PUT), header, body),)),
    ]
    offsets = body.find(np.array([0, 2, 4], np.int32).tobytes())  # the title offsets
    for label, values in [
        ("negative", [0, -5, 4]),
        ("past-end", [0, 2, 100_000]),
        ("decreasing", [0, 4, 2]),
        ("not-from-zero", [7, 2, 4]),
    ]:
        broken = bytearray(body)
        broken[offsets : offsets + 12] = np.array(values, np.int32).tobytes()
        frames.append((f"utf8-offsets-{label}", (first, flight_data(None, header, bytes(broken)))))
    rng = np.random.default_rng(13)
    for i in range(24):  # a few bytes of the batch header changed at random
        mutated = bytearray(header)
        for pos in rng.integers(0, len(header), 3):
            mutated[pos] = int(rng.integers(0, 256))
        frames.append((f"mutated-header-{i}", (first, flight_data(None, bytes(mutated), body))))
    return [
        Case(
            f"raw-put/{label}",
            "raw_put",
            frames=f,
            ok=label in LENIENT or label.startswith("mutated"),
            writes=MAIN,
        )
        for label, f in frames
    ]


# -- DoGet tickets ----------------------------------------------------------------------------
DROP = "__drop__"
"""In a ticket's ``tamper``: remove the key."""


def get_cases() -> list[Case]:
    out = [
        Case(f"get/{label}", "get", raw)
        for label, raw in [
            ("empty", b""),
            ("garbage", b"\x00\x01garbage"),
            ("utf16", '{"read":"segments"}'.encode("utf-16")),
            ("array", b"[]"),
            ("string", b'"fz"'),
            ("number", b"1e308"),
            ("null", b"null"),
            ("truncated", b'{"collection":"fz","filter":"id'),
            ("duplicate-key", b'{"collection":"fz","collection":"fz_absent","limit":1}'),
            ("deep", deep_array(5000)),
            ("read-int", b'{"read":5}'),
            ("read-unknown", b'{"read":"files","path":"/etc/passwd"}'),
            ("read-missing-keys", b'{"read":"segments"}'),
            ("query-absent", dumps({"collection": ABSENT, "limit": 1})),
            ("query-unknown-key", dumps({"collection": MAIN, "limit": 1, "path": "/etc"})),
            ("query-bad-filter", dumps({"collection": MAIN, "filter": "id >"})),
            ("query-limit-string", dumps({"collection": MAIN, "limit": "5"})),
            ("query-ids-nested", dumps({"collection": MAIN, "ids": [[1]]})),
            (
                "query-output-nul",
                dumps({"collection": MAIN, "limit": 1, "output_fields": ["\x00"]}),
            ),
        ]
    ]
    tampered: list[tuple[str, dict[str, Any]]] = [
        ("collection-id-other", {"collection_id": 1}),
        ("collection-id-huge", {"collection_id": 2**64 - 1}),
        ("collection-id-negative", {"collection_id": -1}),
        ("collection-id-string", {"collection_id": "1001"}),
        ("collection-absent", {"collection": ABSENT}),
        ("vchannel-unknown", {"vchannel": "dml_99_1v0"}),
        ("vchannel-path", {"vchannel": "../../etc/passwd"}),
        ("vchannel-int", {"vchannel": 0}),
        ("segment-unknown", {"segment_ids": [123_456_789]}),
        ("segment-huge", {"segment_ids": [2**64 - 1]}),
        ("segment-negative", {"segment_ids": [-1]}),
        ("segment-strings", {"segment_ids": ["a"]}),
        ("segment-bool", {"segment_ids": [True]}),
        ("segment-empty", {"segment_ids": []}),
        ("segment-many", {"segment_ids": list(range(5000))}),
        ("ts-zero", {"ts": 0}),
        ("ts-huge", {"ts": 2**64 - 1}),
        ("ts-future", {"ts": "future"}),
        ("ts-float", {"ts": 1.5}),
        ("columns-unknown", {"columns": ["nope"]}),
        ("columns-internal", {"columns": ["_ts", "$meta"]}),
        ("columns-empty", {"columns": []}),
        ("columns-duplicate", {"columns": ["id", "id"]}),
        ("filter-bad", {"filter": "id >"}),
        ("filter-int", {"filter": 5}),
        ("filter-params-list", {"filter_params": []}),
        ("sealed-list", {"sealed": []}),
        ("unknown-key", {"path": "/etc/passwd"}),
        ("no-ts", {"ts": DROP}),
        ("no-columns", {"columns": DROP}),
        ("deletes-no-segment", {"read": "deletes"}),
        ("deletes-segment-string", {"read": "deletes", "segment_id": "x"}),
        ("deletes-segment-unknown", {"read": "deletes", "segment_id": 123_456_789}),
    ]
    for label, tamper in tampered:
        out.append(Case(f"get/ticket/{label}", "get", dumps(tamper)))
    return out


# -- GetFlightInfo and GetSchema ------------------------------------------------------------
def plan_cases() -> list[Case]:
    commands = [
        ("empty", b""),
        ("garbage", b"\xff\x00"),
        ("array", b"[]"),
        ("null", b"null"),
        ("truncated", b'{"collection":'),
        ("duplicate-key", b'{"collection":"fz","collection":"fz"}'),
        ("deep", b'{"collection":"fz","filter_params":' + deep_object(500) + b"}"),
        ("unknown-key", dumps({"collection": MAIN, "path": "/etc"})),
        ("collection-absent", dumps({"collection": ABSENT})),
        ("collection-int", dumps({"collection": 1})),
        ("columns-unknown", dumps({"collection": MAIN, "columns": ["nope"]})),
        ("columns-int", dumps({"collection": MAIN, "columns": [1]})),
        ("columns-empty", dumps({"collection": MAIN, "columns": []})),
        ("columns-internal", dumps({"collection": MAIN, "columns": ["_ts"]})),
        ("snapshot-negative", dumps({"collection": MAIN, "snapshot_ts": -1})),
        ("snapshot-huge", dumps({"collection": MAIN, "snapshot_ts": 2**64 - 1})),
        ("snapshot-old", dumps({"collection": MAIN, "snapshot_ts": 1})),
        ("snapshot-float", dumps({"collection": MAIN, "snapshot_ts": 1e308})),
        ("filter-bad", dumps({"collection": MAIN, "filter": "id >"})),
        ("partition-absent", dumps({"collection": MAIN, "partition_names": ["nope"]})),
        ("partition-int", dumps({"collection": MAIN, "partition_names": [1]})),
    ]
    out = []
    for call in ("info", "schema"):
        for label, command in commands:
            # GetSchema takes no snapshot and reads no data: it may accept what only
            # a plan would refuse (a bad filter, an absent partition, an old snapshot)
            lenient = call == "schema" and label in (
                "filter-bad",
                "partition-absent",
                "snapshot-huge",
                "snapshot-old",
            )
            out.append(Case(f"{call}/{label}", call, command, ok=lenient))
        out.append(Case(f"{call}/path-descriptor", call, path=("fz",), codes=INV))
        out.append(Case(f"{call}/path-traversal", call, path=("..", "etc", "passwd"), codes=INV))
    return out


# -- DoExchange -------------------------------------------------------------------------------
SEARCH_STREAM = dumps({"collection": MAIN, "limit": 3})


def _queries(values: pa.Array, name: str = "q") -> Batches:
    def batches() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        b = pa.record_batch({name: values})
        return b.schema, [b]

    return batches


def exchange_cases() -> list[Case]:
    good = _queries(pa.array([VEC], VEC_TYPE))
    bad = [
        ("utf8", pa.array(["abcd"])),
        ("int", pa.array([5])),
        ("dim3", pa.array([[1, 2, 3]], pa.list_(F32, 3))),
        ("dim5", pa.array([[1, 2, 3, 4, 5]], pa.list_(F32, 5))),
        ("nan", pa.array([[float("nan")] * DIM], VEC_TYPE)),
        ("inf", pa.array([[float("-inf")] * DIM], VEC_TYPE)),
        ("null", pa.array([None], VEC_TYPE)),
        ("null-element", pa.array([[None, 1, 2, 3]], VEC_TYPE)),
        ("ragged", pa.array([[1, 2, 3, 4], [1]], pa.list_(F32))),
        ("struct", pa.array([{"a": 1}])),
        ("strings", pa.array([["a"] * DIM], pa.list_(pa.string(), DIM))),
        ("f64-overflow", pa.array([[1e308] * DIM], pa.list_(pa.float64(), DIM))),
        ("dictionary", pa.array(["a"]).dictionary_encode()),
        ("map", pa.array([[(1, 0.5)]], pa.map_(pa.uint32(), F32))),
    ]
    out = [
        Case(f"exchange/{label}", "exchange", SEARCH_STREAM, batches=_queries(values), codes=INV)
        for label, values in bad
    ]

    def two_columns() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        b = pa.record_batch({"q": pa.array([VEC], VEC_TYPE), "r": pa.array([1])})
        return b.schema, [b]

    def no_columns() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        b = pa.RecordBatch.from_arrays([], names=[])
        return b.schema, [b]

    def empty() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        b = pa.record_batch({"q": pa.array([], VEC_TYPE)})
        return b.schema, [b]

    def nothing() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        return pa.schema([("q", VEC_TYPE)]), []

    out += [
        Case("exchange/two-columns", "exchange", SEARCH_STREAM, batches=two_columns, codes=INV),
        Case("exchange/no-columns", "exchange", SEARCH_STREAM, batches=no_columns, ok=True),
        Case("exchange/empty-batch", "exchange", SEARCH_STREAM, batches=empty, ok=True),
        Case("exchange/no-batches", "exchange", SEARCH_STREAM, batches=nothing, ok=True),
    ]
    commands = [
        ("empty", b""),
        ("garbage", b"\x00garbage"),
        ("array", b"[]"),
        ("with-data", dumps({"collection": MAIN, "data": [VEC]})),
        ("limit-zero", dumps({"collection": MAIN, "limit": 0})),
        ("limit-huge", b'{"collection":"fz","limit":18446744073709551616}'),
        ("offset-negative", dumps({"collection": MAIN, "offset": -1})),
        ("filter-bad", dumps({"collection": MAIN, "filter": "id >"})),
        ("anns-absent", dumps({"collection": MAIN, "anns_field": "nope"})),
        ("output-absent", dumps({"collection": MAIN, "output_fields": ["nope"]})),
        ("metric-wrong", dumps({"collection": MAIN, "search_params": {"metric_type": "JACCARD"}})),
        ("collection-absent", dumps({"collection": ABSENT})),
        ("deep", b'{"collection":"fz","search_params":' + deep_object(100) + b"}"),
        ("duplicate-key", b'{"collection":"fz","limit":1,"limit":2}'),
    ]
    for label, command in commands:
        out.append(Case(f"exchange/command/{label}", "exchange", command, batches=good))
    out.append(Case("exchange/command/path-descriptor", "exchange", path=("fz",), batches=good))
    return out


# -- oversized bodies and streams (the limits branch) ------------------------------------
def _big_body(prefix: bytes, suffix: bytes = b'"}') -> bytes:
    return prefix + b"a" * (2 * MIB) + suffix


def oversized_cases() -> list[Case]:
    vectors = dumps({"collection": MAIN, "data": [[0.1234567890123456] * DIM] * 16_000, "limit": 1})
    assert len(vectors) > MIB

    def big_stream() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        batches = [good_batch(6000, 700_000 + 6000 * i) for i in range(8)]  # ~0.2 MiB each
        return batches[0].schema, batches

    def big_batch() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        b = good_batch(60_000, 800_000)  # ~2.2 MiB
        return b.schema, [b]

    def many_batches() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        batches = [good_batch(1, 900_000 + i) for i in range(20)]
        return batches[0].schema, batches

    big = dumps({"collection": BIG, "atomic": True})
    cases = [
        Case("oversized/action-body", "action", _big_body(b'{"name":"'), "has_collection"),
        Case("oversized/action-search-vectors", "action", vectors, "search"),
        Case(
            "oversized/get-ticket",
            "get",
            _big_body(b'{"collection":"fz","limit":1,"filter":"', b'"}'),
        ),
        Case("oversized/info-command", "info", _big_body(b'{"collection":"fz","filter":"')),
        Case("oversized/schema-command", "schema", _big_body(b'{"collection":"fz","filter":"')),
        Case(
            "oversized/put-command",
            "put",
            _big_body(b'{"collection":"fzbig","x":"'),
            batches=_one(lambda: good_batch(1, 990_000)),
            writes=BIG,
        ),
        Case(
            "oversized/exchange-command",
            "exchange",
            _big_body(b'{"collection":"fz","filter":"'),
            batches=_queries(pa.array([VEC], VEC_TYPE)),
        ),
        Case("oversized/put-stream-bytes", "put", big, batches=big_stream, writes=BIG),
        Case(
            "oversized/put-one-batch",
            "put",
            dumps({"collection": BIG}),
            batches=big_batch,
            writes=BIG,
        ),
        Case("oversized/put-stream-batches", "put", big, batches=many_batches, writes=BIG),
    ]
    return [Case(**{**c.__dict__, "codes": TOO_LARGE, "oversized": True}) for c in cases]
