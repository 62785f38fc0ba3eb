"""Ordered queries (``order_by_fields``) and aggregating queries (Milvus 2.6's
``group_by_fields`` with ``count(*)``, ``sum``, ``avg``, ``min``, ``max``) through pymilvus
against the Milvus face and through the Elanus SDK, on a two-shard collection so that the
proxy must combine shards (an average over all rows, not an average of shards' averages).
Milvus Lite 3.2 silently ignores both (grouped counts come back as one total, ordered rows
in primary-key order), departing from Milvus's docs, so the expected values are computed
here from the inserted rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from milvus_stack import MilvusStack, milvus_stack
from pymilvus import DataType, MilvusClient, MilvusException

ROWS = [
    {"id": i, "v": [float(i), 1.0], "brand": f"b{i % 3}", "price": i * 1.5, "qty": i % 5}
    for i in range(40)
]


@pytest.fixture
def mstack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MilvusStack]:
    yield from milvus_stack(request, tmp_path)


def _expected(rows: list[dict[str, object]]) -> dict[str, tuple[int, float, float, int, int]]:
    out = {}
    for brand in sorted({str(r["brand"]) for r in rows}):
        group = [r for r in rows if r["brand"] == brand]
        prices = [float(r["price"]) for r in group]  # type: ignore[arg-type]
        qty = [int(r["qty"]) for r in group]  # type: ignore[call-overload]
        out[brand] = (len(group), sum(prices), sum(prices) / len(group), min(qty), max(qty))
    return out


def test_aggregating_query(mstack: MilvusStack) -> None:
    client = MilvusClient(uri=mstack.milvus_uri, timeout=60)
    try:
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
        schema.add_field("brand", DataType.VARCHAR, max_length=8)
        schema.add_field("price", DataType.DOUBLE)
        schema.add_field("qty", DataType.INT32)
        params = client.prepare_index_params()
        params.add_index("v", index_type="FLAT", metric_type="L2")
        client.create_collection("agg", schema=schema, index_params=params, num_shards=2)
        client.insert("agg", ROWS)
        outputs = ["brand", "count(*)", "sum(price)", "avg(price)", "min(qty)", "max(qty)"]
        got = client.query(
            "agg", "", output_fields=outputs, group_by_fields=["brand"], consistency_level="Strong"
        )
        want = _expected(ROWS)
        assert [r["brand"] for r in got] == sorted(want)
        for r in got:
            count, total, mean, lo, hi = want[r["brand"]]
            assert r["count(*)"] == count and r["min(qty)"] == lo and r["max(qty)"] == hi
            assert r["sum(price)"] == pytest.approx(total)
            assert r["avg(price)"] == pytest.approx(mean)

        # a filter first, then the groups; limit pages over groups
        filtered = client.query(
            "agg",
            "id >= 20",
            output_fields=["brand", "count(*)"],
            group_by_fields=["brand"],
            limit=2,
            consistency_level="Strong",
        )
        want = _expected([r for r in ROWS if int(r["id"]) >= 20])  # type: ignore[call-overload]
        assert [(r["brand"], r["count(*)"]) for r in filtered] == [
            (b, want[b][0]) for b in sorted(want)[:2]
        ]

        # aggregates with no grouping: one row over the whole collection
        (whole,) = client.query(
            "agg", "", output_fields=["sum(qty)", "max(price)"], consistency_level="Strong"
        )
        assert whole["sum(qty)"] == sum(int(r["qty"]) for r in ROWS)  # type: ignore[call-overload]
        assert whole["max(price)"] == pytest.approx(39 * 1.5)

        bad = {
            "sum of a VarChar field": (["sum(brand)"], ["qty"], "numeric"),
            "grouping by a vector": (["count(*)"], ["v"], "group_by_field 'v'"),
            "an unknown field": (["avg(nope)"], ["brand"], "'nope' is not a field"),
            "a plain field outside the grouping": (["qty", "count(*)"], ["brand"], "'qty'"),
        }
        for case, (outs, keys, words) in bad.items():
            with pytest.raises(MilvusException) as err:
                client.query("agg", "id > 0", output_fields=outs, group_by_fields=keys)
            assert err.value.code == 1100 and words in err.value.message, case

        # order_by_fields: several fields, asc and desc, then offset and limit
        ordered = client.query(
            "agg",
            "id < 30",
            output_fields=["qty"],
            order_by_fields=[{"field": "qty", "order": "desc"}, {"field": "id", "order": "asc"}],
            offset=2,
            limit=5,
            consistency_level="Strong",
        )
        rows = [r for r in ROWS if int(r["id"]) < 30]  # type: ignore[call-overload]
        rows.sort(key=lambda r: (-int(r["qty"]), int(r["id"])))  # type: ignore[call-overload]
        assert [(r["id"], r["qty"]) for r in ordered] == [(r["id"], r["qty"]) for r in rows[2:7]]
        for order, words in {
            ("v", "asc"): "cannot order by 'v'",
            ("qty", "up"): "'asc' or 'desc'",
            ("nope", "asc"): "'nope' is not a field",
        }.items():
            with pytest.raises(MilvusException) as err:
                client.query(
                    "agg", "id > 0", order_by_fields=[{"field": order[0], "order": order[1]}]
                )
            assert err.value.code == 1100 and words in err.value.message, order

        # the same operations through the Elanus SDK
        with mstack.client() as sdk:
            rows = sdk.query(
                "agg",
                output_fields=["brand", "count(*)", "avg(price)"],
                group_by_fields=["brand"],
                consistency_level="Strong",
            )
            want = _expected(ROWS)
            assert [(r["brand"], r["count(*)"]) for r in rows] == [
                (b, want[b][0]) for b in sorted(want)
            ]
            assert rows[0]["avg(price)"] == pytest.approx(want["b0"][2])
            top = sdk.query("agg", "id >= 0", ["price"], order_by_fields=["price:desc"], limit=3)
            assert [r["id"] for r in top] == [39, 38, 37]
    finally:
        client.close()
