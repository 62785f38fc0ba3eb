"""Partition keys (Milvus's ``is_partition_key`` with ``num_partitions``): the schema rules,
rows routed to the partition their key hashes to (insert, upsert, import), reads equal to an
exact computation with and without key filters, key filters pruning partitions, and the
refusals of partition names — through the SDK on a real stack, across flush and restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import raises_code, wait_for
from lite_oracle import lite_answers
from segment_reader import SEGMENT_COLUMN, read_rows

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.api.base import Call
from elanus.api.querynode import QueryNodeAPI, ReadShard, Rows
from elanus.channels.dml import MsgType
from elanus.expr import parse
from elanus.expr.keypins import pinned_values, read_partitions
from elanus.ops.reads import ReadOptions
from elanus.partitionkey import (
    check_num_partitions,
    key_partition_names,
    partition_index,
)
from elanus.validation import conform_insert

if TYPE_CHECKING:
    from conftest import Stack

    from elanus.client.client import Client

STRONG = "Strong"
DIM = 4
PARTS = 8
N = 400


def key_schema(key_type: DataType) -> Schema:
    s = Schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    kw = {"max_length": 32} if key_type == DataType.VARCHAR else {}
    s.add_field("key", key_type, is_partition_key=True, **kw)
    s.add_field("n", DataType.INT64)
    return s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)


class Data:
    """Rows as the test wrote them: the exact answer every read is compared with."""

    def __init__(self, key_type: DataType, seed: int = 5) -> None:
        self.rng = np.random.default_rng(seed)
        self.varchar = key_type == DataType.VARCHAR
        self.rows: dict[int, dict[str, Any]] = {}

    def key(self, k: int) -> Any:
        return f"tenant-{k}" if self.varchar else k

    def make(self, ids: range, shift: int = 0) -> list[dict[str, Any]]:
        vecs = self.rng.random((len(ids), DIM), dtype=np.float32)
        out = [
            {"id": i, "key": self.key((i * 7 + shift) % 23), "n": i % 10, "vector": v.tolist()}
            for i, v in zip(ids, vecs, strict=True)
        ]
        self.rows.update({r["id"]: r for r in out})
        return out

    def ids(self, pred: Callable[[dict[str, Any]], bool]) -> list[int]:
        return sorted(i for i, r in self.rows.items() if pred(r))

    def top(self, q: list[float], pred: Callable[[dict[str, Any]], bool], k: int) -> list[int]:
        ids = self.ids(pred)
        X = np.array([self.rows[i]["vector"] for i in ids], dtype=np.float32)
        d = ((X - np.array(q, dtype=np.float32)) ** 2).sum(axis=1)
        return [ids[j] for j in np.argsort(d, kind="stable")[:k]]


def _create(client: Client, name: str, key_type: DataType, **kw: Any) -> dict[str, Any]:
    return client.create_collection(
        name, schema=key_schema(key_type), properties={"metric_type": "L2"}, **kw
    )


def _key_lit(data: Data, k: int) -> str:
    return f'"{data.key(k)}"' if data.varchar else str(data.key(k))


def _partition_rows(stack: Stack, name: str) -> dict[str, list[int]]:
    """Each partition's ids, read from that partition alone (a read the proxy refuses to
    clients of a partition key collection, asked of the delegators directly)."""
    query = stack.proxy.query
    info = stack.proxy.dml.collection("default", name)
    guarantee, _ = query.times.read_at(info, ReadOptions(consistency_level=STRONG))
    out = {}
    for pname, pid in info.partitions.items():

        def read(node: QueryNodeAPI, v: str, pid: int = pid) -> Call[Rows]:
            return node.query(
                ReadShard(
                    vchannel=v,
                    filter="id >= 0",
                    guarantee_ts=guarantee,
                    partition_ids=[pid],
                    output_fields=["id"],
                )
            )

        replies = query.fan_out(info, [pid], read)
        out[pname] = sorted(i for r in replies for i in r.rows.column("id").to_pylist())
    return out


def _expected_partitions(data: Data, num: int) -> dict[str, list[int]]:
    ids = sorted(data.rows)
    keys = [data.rows[i]["key"] for i in ids]
    arr = pa.array(keys, pa.string() if data.varchar else pa.int64())
    index = partition_index(arr, num)
    names = key_partition_names(num)
    out: dict[str, list[int]] = {n: [] for n in names}
    for i, p in zip(ids, index.tolist(), strict=True):
        out[names[p]].append(i)
    return out


def _check_reads(client: Client, name: str, data: Data) -> None:
    """Queries, counts and searches with and without key filters equal the exact answers."""
    k3, k4, k9 = (_key_lit(data, k) for k in (3, 4, 9))
    cases: list[tuple[str, Callable[[dict[str, Any]], bool]]] = [
        ("", lambda r: True),
        (f"key == {k3}", lambda r: r["key"] == data.key(3)),
        (f"key in [{k3}, {k9}]", lambda r: r["key"] in (data.key(3), data.key(9))),
        (
            f"(key == {k4} or key == {k9}) and n < 5",
            lambda r: r["key"] in (data.key(4), data.key(9)) and r["n"] < 5,
        ),
        (f"key != {k3} and n == 2", lambda r: r["key"] != data.key(3) and r["n"] == 2),
    ]
    q = data.rng.random(DIM, dtype=np.float32).tolist()
    for text, pred in cases:
        rows = client.query(name, text or "id >= 0", ["id"], consistency_level=STRONG)
        assert sorted(r["id"] for r in rows) == data.ids(pred), text
        (counted,) = client.query(name, text, ["count(*)"], consistency_level=STRONG)
        assert counted["count(*)"] == len(data.ids(pred)), text
        hits = client.search(name, [q], filter=text, limit=10, consistency_level=STRONG)[0]
        assert [h["id"] for h in hits] == data.top(q, pred, 10), text


@pytest.mark.slow
@pytest.mark.parametrize("key_type", [DataType.INT64, DataType.VARCHAR])
def test_rows_routed_by_key_reads_exact_across_flush_and_restart(
    stack: Stack, key_type: DataType
) -> None:
    client = stack.client()
    data = Data(key_type)
    desc = _create(client, "kc", key_type, num_partitions=PARTS)
    assert desc["num_partitions"] == PARTS
    (key_field,) = [f for f in desc["fields"] if f["name"] == "key"]
    assert key_field.get("is_partition_key") is True
    assert client.list_partitions("kc") == key_partition_names(PARTS)
    client.load_collection("kc")

    client.insert("kc", data.make(range(N // 2)))
    client.insert("kc", data.make(range(N // 2, N)))
    client.upsert("kc", data.make(range(0, 60), shift=5))  # keys change: rows move partition
    want = _expected_partitions(data, PARTS)
    assert sum(1 for ids in want.values() if ids) >= PARTS - 1  # the keys spread
    assert _partition_rows(stack, "kc") == want
    _check_reads(client, "kc", data)

    # Delete by a key filter and by ids reaches the rows, wherever they are.
    k5 = _key_lit(data, 5)
    gone = data.ids(lambda r: r["key"] == data.key(5))
    assert client.delete("kc", filter=f"key == {k5}")["delete_count"] == len(gone) > 0
    client.delete("kc", ids=[70, 71])
    for i in [*gone, 70, 71]:
        data.rows.pop(i, None)
    _check_reads(client, "kc", data)

    client.flush("kc", timeout=30)
    segs = [s for s in client.get_segment_info("kc") if s["state"] == "Flushed"]
    info = stack.proxy.dml.collection("default", "kc")
    names = {pid: n for n, pid in info.partitions.items()}
    stored = read_rows(stack.settings.storage_path, segs)
    seg_part = {s["segment_id"]: names[s["partition_id"]] for s in segs}
    written: dict[str, set[int]] = {}
    for i, sid in zip(
        stored.column("id").to_pylist(), stored.column(SEGMENT_COLUMN).to_pylist(), strict=True
    ):
        written.setdefault(seg_part[sid], set()).add(i)
    for pname, ids in want.items():  # every stored version sits where its key sends it
        assert set(ids) <= written.get(pname, set()), pname

    stack.restart()
    client = stack.client()
    client.load_collection("kc")
    desc = client.describe_collection("kc")
    assert desc["num_partitions"] == PARTS and client.list_partitions("kc") == list(want)
    wait_for(
        lambda: _partition_rows(stack, "kc") == _expected_partitions(data, PARTS),
        30,
        "the reloaded partitions",
    )
    _check_reads(client, "kc", data)
    client.insert("kc", data.make(range(N, N + 50)))  # routing after the restart
    assert _partition_rows(stack, "kc") == _expected_partitions(data, PARTS)
    _check_reads(client, "kc", data)


def test_key_filters_prune_partitions(stack: Stack) -> None:
    """The proxy asks only the partitions a key filter pins; shown end to end by a row
    placed (by the test, bypassing routing) in a partition its key does not hash to."""
    client = stack.client()
    data = Data(DataType.INT64)
    _create(client, "pr", DataType.INT64, num_partitions=PARTS)
    client.load_collection("pr")
    client.insert("pr", data.make(range(100)))
    info = stack.proxy.dml.collection("default", "pr")
    ids = [info.partitions[n] for n in key_partition_names(PARTS)]

    def parts_of(keys: list[int]) -> list[int]:
        index = partition_index(pa.array(keys, pa.int64()), PARTS)
        return sorted({ids[i] for i in index.tolist()})

    pruned = stack.proxy.query.partition_ids
    assert pruned(info, None, "key == 3", {}) == parts_of([3])
    assert pruned(info, None, "key in [3, 4, 5]", {}) == parts_of([3, 4, 5])
    assert pruned(info, None, "key in {ks} and n > 2", {"ks": [1, 2]}) == parts_of([1, 2])
    assert pruned(info, None, "key == 1 or key in [6]", {}) == parts_of([1, 6])
    for unpruned in ("", "n > 2", "key != 3", "key == 3 or n == 1", "not (key == 3)"):
        assert pruned(info, None, unpruned, {}) is None, unpruned

    # A row with key 3 put into a partition key 3 does not hash to.
    home = parts_of([3])[0]
    stray = next(pid for pid in ids if pid != home)
    row = {"id": 10_000, "key": 3, "n": 0, "vector": [9.0] * DIM}
    table = conform_insert(pa.Table.from_pylist([row]), info.schema)
    dml = stack.proxy.dml
    pieces = dml.publisher.pieces(MsgType.INSERT, info.vchannels, table.column("id"), table)
    stack.call(dml.publish(info, [(stray, p) for p in pieces]))

    def ids_of(text: str) -> set[int]:
        rows = client.query("pr", text, ["id"], consistency_level=STRONG)
        return {r["id"] for r in rows}

    unpruned = ids_of("key + 0 == 3")  # arithmetic pins nothing: every partition is read
    assert 10_000 in unpruned
    assert ids_of("key == 3") == unpruned - {10_000}  # pruned: the stray's partition is not
    hits = client.search(
        "pr", [[9.0] * DIM], filter="key in [3]", limit=1, consistency_level=STRONG
    )[0]
    assert hits[0]["id"] != 10_000
    hits = client.search(
        "pr", [[9.0] * DIM], filter="key * 1 == 3", limit=1, consistency_level=STRONG
    )[0]
    assert hits[0]["id"] == 10_000


def test_import_routes_rows_by_key(stack: Stack, tmp_path: Path) -> None:
    client = stack.client()
    data = Data(DataType.VARCHAR, seed=9)
    _create(client, "imp", DataType.VARCHAR, num_partitions=5)
    client.load_collection("imp")
    rows = data.make(range(300))
    table = pa.Table.from_pylist(rows)
    vec = pa.FixedSizeListArray.from_arrays(
        pa.array([x for r in rows for x in r["vector"]], pa.float32()), DIM
    )
    table = table.set_column(3, "vector", vec)
    path = tmp_path / "rows.parquet"
    pq.write_table(table, path)
    job = client.wait_import(client.bulk_import("imp", [str(path)]), timeout=60)
    assert job["state"] == "Completed" and job["rows"] == 300
    assert _partition_rows(stack, "imp") == _expected_partitions(data, 5)
    _check_reads(client, "imp", data)
    raises_code(
        ErrorCode.INVALID_ARGUMENT,
        lambda: client.bulk_import("imp", [str(path)], partition_name="_default_0"),
        "an import",
        "partition key",
    )


def test_staged_writes_route_rows_by_key(stack: Stack) -> None:
    client = stack.client()
    data = Data(DataType.INT64, seed=3)
    _create(client, "stg", DataType.INT64, num_partitions=4)
    client.load_collection("stg")
    client.stage_insert("stg", data.make(range(120)), "w-stg")
    assert client.commit_write("stg", "w-stg")["rows"] == 120
    assert _partition_rows(stack, "stg") == _expected_partitions(data, 4)
    _check_reads(client, "stg", data)


def test_bad_inputs_are_refused_with_clear_errors(stack: Stack) -> None:
    client = stack.client()
    inv = ErrorCode.INVALID_ARGUMENT

    def schema_with(**key: Any) -> Schema:
        s = Schema()
        s.add_field("id", DataType.INT64, is_primary=True, is_partition_key=key.pop("on_pk", False))
        s.add_field("a", key.pop("dtype", DataType.INT64), is_partition_key=True, **key)
        return s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)

    two = schema_with().add_field("b", DataType.INT64, is_partition_key=True)
    raises_code(inv, lambda: client.create_collection("x", schema=two), "partition key", "a, b")
    raises_code(
        inv, lambda: client.create_collection("x", schema=schema_with(on_pk=True)), "primary"
    )
    raises_code(
        inv,
        lambda: client.create_collection("x", schema=schema_with(dtype=DataType.FLOAT)),
        "Int64 or VarChar",
    )
    raises_code(
        inv,
        lambda: client.create_collection("x", schema=schema_with(nullable=True)),
        "nullable",
    )
    for bad in (0, 1025, -1):
        raises_code(
            inv,
            lambda b=bad: client.create_collection("x", schema=schema_with(), num_partitions=b),
            "num_partitions",
        )
    raises_code(
        inv,
        lambda: client.create_collection("x", dimension=DIM, num_partitions=4),
        "num_partitions",
        "partition key",
    )
    assert not client.has_collection("x")

    desc = client.create_collection("x", schema=schema_with())  # the default count
    assert desc["num_partitions"] == 16
    assert client.list_partitions("x") == key_partition_names(16)
    raises_code(
        inv, lambda: client.create_partition("x", "p1"), "create a partition", "partition key"
    )
    raises_code(inv, lambda: client.drop_partition("x", "_default_3"), "drop a partition")
    assert client.list_partitions("x") == key_partition_names(16)
    row = {"id": 1, "a": 2, "vector": [0.0] * DIM}
    raises_code(inv, lambda: client.insert("x", [row], partition_name="_default_0"), "an insert")
    raises_code(inv, lambda: client.upsert("x", [row], partition_name="_default_0"), "an upsert")
    client.insert("x", [row])
    client.load_collection("x")
    raises_code(
        inv,
        lambda: client.query("x", "a == 2", partition_names=["_default_0"]),
        "a search or query",
        "partition key",
    )
    raises_code(
        inv,
        lambda: client.search("x", [[0.0] * DIM], partition_names=["_default_1"]),
        "a search or query",
    )
    raises_code(inv, lambda: client.delete("x", ids=[1], partition_name="_default_0"), "a delete")
    rows = client.query("x", "a == 2", ["id"], consistency_level=STRONG)
    assert [r["id"] for r in rows] == [1]  # nothing refused was written or deleted


def test_pinned_values_and_partition_counts() -> None:
    """The pure pieces: which values a filter pins, and the num_partitions rules."""
    schema = key_schema(DataType.VARCHAR)
    key = schema.field("key")

    def pins(text: str, params: dict[str, Any] | None = None) -> Any:
        return pinned_values(parse(text, schema, params), key)

    assert pins('key == "a"') == {"a"}
    assert pins('"a" == key') == {"a"}
    assert pins('key in ["a", "b"] and n > 1') == {"a", "b"}
    assert pins('key in ["a", "b"] and key == "b"') == {"b"}
    assert pins('key == "a" or (key == "c" and n == 1)') == {"a", "c"}
    assert pins("key in {ks}", {"ks": ["x"]}) == {"x"}
    for text in ('key != "a"', 'not (key == "a")', 'key == "a" or n == 1', "n == 1", 'key > "a"'):
        assert pins(text) is None, text
    assert check_num_partitions(None, True) == 16
    assert check_num_partitions(1024, True) == 1024
    assert check_num_partitions(None, False) is None
    for bad, has_key in ((0, True), (1025, True), (4, False), (True, True)):
        with pytest.raises(ElanusError):
            check_num_partitions(bad, has_key)
    parts = {n: 100 + i for i, n in enumerate(key_partition_names(4))}
    got = read_partitions(schema, parts, "c", 'key in ["a", "b"]', {})
    index = partition_index(pa.array(["a", "b"]), 4)
    assert got == sorted({100 + i for i in index.tolist()})
    assert read_partitions(schema, parts, "c", "n > 1", {}) is None


@pytest.mark.slow
def test_key_filter_answers_match_milvus_lite(stack: Stack, tmp_path: Path) -> None:
    """The same rows and key filters in Milvus Lite and Elanus give the same keys. (Lite
    names its key partitions ``_pk_i`` and takes partition names where Milvus refuses them,
    so only answers are compared, not partition names or refusals.)"""
    fields = [
        {"name": "pk", "type": "INT64", "is_primary": True},
        {"name": "tenant", "type": "VARCHAR", "max_length": 16, "is_partition_key": True},
        {"name": "n", "type": "INT64"},
        {"name": "v", "type": "FLOAT_VECTOR", "dim": 2},
    ]
    rows = [{"pk": i, "tenant": f"t{i % 6}", "n": i % 4, "v": [float(i), 1.0]} for i in range(60)]
    filters = [
        'tenant == "t1"',
        'tenant in ["t2", "t5"]',
        'tenant == "t3" and n > 1',
        '(tenant == "t0" or tenant == "t4") and pk < 40',
        'tenant != "t1" and n == 0',
        'tenant == "nobody"',
    ]
    lite = lite_answers(tmp_path, fields, rows, [("filter", f) for f in filters])
    client = stack.client()
    schema = Schema()
    for f in fields:
        kw = {k: v for k, v in f.items() if k not in ("name", "type")}
        schema.add_field(f["name"], getattr(DataType, f["type"]), **kw)
    client.create_collection("lite", schema=schema, num_partitions=4)
    client.load_collection("lite")
    client.insert("lite", rows)
    for text, want in zip(filters, lite, strict=True):
        got = client.query("lite", text, ["pk"], consistency_level=STRONG)
        assert sorted(r["pk"] for r in got) == want, text
    desc = client.describe_collection("lite")
    (tenant,) = [f for f in desc["fields"] if f["name"] == "tenant"]
    assert tenant["is_partition_key"] is True and desc["num_partitions"] == 4
