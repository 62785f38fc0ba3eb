"""Code written for pymilvus's ``MilvusClient`` runs on ``elanus.connect``: one script
body is run on Milvus Lite and on a real Elanus server and the answers compared; the
signatures of the methods both clients have match parameter for parameter."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import bare_collection

import elanus
from elanus import ElanusError, ErrorCode
from elanus.client.client import Client

if TYPE_CHECKING:
    from conftest import Stack

pymilvus = pytest.importorskip("pymilvus")

ROWS = [{"id": i, "f": i, "title": f"t{i}", "v": [float(i)] * 4} for i in range(5)]


def script(client: Any, data_type: Any) -> dict[str, Any]:
    """The same calls, positional where a pymilvus user writes them positionally."""
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", data_type.INT64, is_primary=True)
    schema.add_field("f", data_type.INT64)
    schema.add_field("title", data_type.VARCHAR, max_length=32)
    schema.add_field("v", data_type.FLOAT_VECTOR, dim=4)
    index_params = client.prepare_index_params()
    index_params.add_index("v", index_type="FLAT", metric_type="L2", index_name="v")
    client.create_collection(
        "shape", schema=schema, index_params=index_params, consistency_level="Strong"
    )
    out: dict[str, Any] = {
        "insert": client.insert("shape", ROWS),
        "upsert": client.upsert("shape", [{"id": 1, "f": 10, "title": "x", "v": [1.0] * 4}]),
        "delete": client.delete("shape", [4]),
        "load_state": client.get_load_state("shape"),
        "search": client.search(
            "shape", [[1.0] * 4], "f > 1", 2, ["f", "title"], {"metric_type": "L2"}
        ),
        "search_index_metric": client.search("shape", [[1.0] * 4], "f > 1", 2),
        "query": client.query("shape", "f > 1", ["f"]),
        "get": client.get("shape", [1, 2]),
        "describe": client.describe_collection("shape"),
        "indexes": client.list_indexes("shape"),
        "index": client.describe_index("shape", "v"),
        "pages": [],
    }
    it = client.query_iterator("shape", 2, -1, "f >= 0", ["f"])
    while page := it.next():
        out["pages"].append([r["id"] for r in page])
    it.close()
    out["hit_pages"] = []
    hits = client.search_iterator("shape", [[1.0] * 4], 2, "f >= 0", -1, ["f"])
    while page := hits.next():
        out["hit_pages"].append(
            [(h["id"], round(h["distance"], 4), h["entity"]["f"]) for h in page]
        )
    hits.close()
    return out


def _plain(rows: Any) -> list[dict[str, Any]]:
    """Rows as plain dicts of plain values (pymilvus wraps them; vectors may be numpy)."""
    out = []
    for row in rows:
        out.append(
            {k: [float(x) for x in v] if isinstance(v, list) else v for k, v in dict(row).items()}
        )
    return sorted(out, key=lambda r: r["id"])


def _describe(d: dict[str, Any]) -> dict[str, Any]:
    fields = [
        {
            "name": f["name"],
            "type": f["type"].name,
            "params": dict(f["params"]),
            "is_primary": bool(f.get("is_primary")),
        }
        for f in d["fields"]
    ]
    keys = ("collection_name", "auto_id", "num_shards", "description", "enable_dynamic_field")
    return {
        **{k: d[k] for k in keys},
        "fields": fields,
        "consistency_level_name": d["consistency_level_name"],
        "num_partitions": d["num_partitions"],
    }


def normalise(out: dict[str, Any]) -> dict[str, Any]:
    hits = [
        [(h["id"], round(h["distance"], 4), dict(h["entity"])) for h in q] for q in out["search"]
    ]
    index = out["index"]
    return {
        "insert": (out["insert"]["insert_count"], list(out["insert"]["ids"])),
        "upsert": out["upsert"]["upsert_count"],
        "load_state": str(getattr(out["load_state"]["state"], "name", out["load_state"]["state"])),
        "search": hits,
        "query": sorted(r["f"] for r in out["query"]),
        "get": sorted(r["id"] for r in out["get"]),
        "describe": _describe(out["describe"]),
        "indexes": out["indexes"],
        "index": {k: index[k] for k in ("index_type", "metric_type", "field_name", "index_name")},
        "pages": out["pages"],
        "hit_pages": out["hit_pages"],
    }


def run_both(stack: Stack, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The script's answers from Milvus Lite and from Elanus."""
    lite = pymilvus.MilvusClient(str(tmp_path / "lite.db"))
    try:
        milvus = script(lite, pymilvus.DataType)
    finally:
        lite.close()
    return milvus, script(elanus.connect(stack.uri, timeout=30), elanus.DataType)


def test_a_milvus_client_script_gives_milvus_answers(stack: Stack, tmp_path: Path) -> None:
    milvus, ours = run_both(stack, tmp_path)
    assert normalise(ours) == normalise(milvus)
    # Milvus Lite answers a delete with the deleted keys (pre-2.3.2 Milvus); pymilvus's
    # documented answer from Milvus 2.3.2 on is {"delete_count": n}: Elanus follows the docs.
    assert ours["delete"]["delete_count"] == 1
    assert normalise(ours)["pages"] == [[0, 1], [2, 3]]
    assert [[h[0] for h in p] for p in normalise(ours)["hit_pages"]] == [[1, 0], [2, 3]]


def test_query_and_get_rows_are_shaped_as_milvus_rows(stack: Stack, tmp_path: Path) -> None:
    milvus, ours = run_both(stack, tmp_path)
    assert _plain(ours["query"]) == _plain(milvus["query"])
    assert _plain(ours["get"]) == _plain(milvus["get"])


def test_search_without_a_metric_uses_the_index_metric(stack: Stack) -> None:
    ours = script(elanus.connect(stack.uri, timeout=30), elanus.DataType)
    assert [h["distance"] for h in ours["search_index_metric"][0]] == [0.0, 4.0]


def test_upsert_and_delete_return_counts_and_positional_partition(stack: Stack) -> None:
    client = stack.client()
    client.create_collection("p", 4, consistency_level="Strong")
    client.create_partition("p", "part")
    # insert(collection_name, data, timeout, partition_name): the 4th positional is the
    # partition, as in pymilvus.
    rows = [{"id": 7, "vector": [0.5] * 4}]
    assert client.insert("p", rows, None, "part")["insert_count"] == 1
    client.load_collection("p")
    assert client.query("p", "id == 7", ["id"], None, None, ["part"]) == [{"id": 7}]
    assert client.query("p", "id == 7", ["id"], partition_names=["_default"]) == []
    assert client.delete("p", None, None, "id == 7", "part")["delete_count"] == 1


def test_unknown_keywords_are_refused_by_name(stack: Stack) -> None:
    client = stack.client()
    client.create_collection("k", 4)
    with pytest.raises(ElanusError) as err:
        client.search("k", [[0.0] * 4], round_decimal=2)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and "'round_decimal'" in err.value.message
    with pytest.raises(ElanusError) as err:
        client.compact("k", is_l0=True)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and "'is_l0'" in err.value.message
    with pytest.raises(ElanusError) as err:  # "k" has no clustering key
        client.compact("k", is_clustering=True)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and "clustering key" in err.value.message
    for size, unit, words in ((1, "kb", "under 1 MB"), (2, "eb", "'eb'"), (0, "mb", "positive")):
        with pytest.raises(ElanusError) as err:
            client.compact("k", target_size=size, target_size_unit=unit)
        assert err.value.code == ErrorCode.INVALID_ARGUMENT and words in err.value.message
    assert client.compact("k", target_size=1, target_size_unit="GB") > 0  # a force merge
    schema = client.create_schema().add_field("x", elanus.DataType.INT64, is_clustering_key=True)
    assert schema.clustering_key is not None and schema.clustering_key.name == "x"
    assert client.list_collections() == ["k"]


def test_pymilvus_data_types_are_accepted() -> None:
    """A schema built with pymilvus's own ``DataType`` members maps onto Elanus's."""
    schema = Client.create_schema(auto_id=True)
    schema.add_field("pk", pymilvus.DataType.INT64, is_primary=True)
    schema.add_field("emb", pymilvus.DataType.FLOAT_VECTOR, dim=8)
    assert [f.dtype for f in schema.fields] == [elanus.DataType.INT64, elanus.DataType.FLOAT_VECTOR]
    assert schema.fields[0].auto_id
    with pytest.raises(ElanusError) as err:
        schema.add_field("b", pymilvus.DataType.INT8_VECTOR, dim=8)
    assert "INT8_VECTOR" in err.value.message


# Methods both clients have whose positional parameters differ on purpose (Elanus has no
# such argument); every other shared method must match pymilvus name for name.
ALLOWED_DIFFERENCES: dict[str, str] = {
    "search": "stops after anns_field: no ranker, function_chains, highlighter, ids or "
    "search_aggregation (refused by name if given as keywords)",
}


def _positional(fn: Any) -> list[str]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.kind in kinds and p.name not in ("self", "cls")]


def _has_kwargs(fn: Any) -> bool:
    params = inspect.signature(fn).parameters.values()
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def test_shared_methods_take_pymilvus_parameters_in_pymilvus_order() -> None:
    theirs_cls = pymilvus.MilvusClient
    shared = sorted(
        n
        for n in dir(Client)
        if not n.startswith("_") and callable(getattr(Client, n)) and hasattr(theirs_cls, n)
    )
    expected = {
        "compact", "create_collection", "create_database", "create_index", "create_partition",
        "create_schema", "delete", "describe_collection", "describe_index", "drop_collection",
        "drop_database", "drop_index", "drop_partition", "flush", "get",
        "get_collection_stats", "get_compaction_state", "get_load_state", "has_collection",
        "has_partition", "insert", "list_collections", "list_databases", "list_indexes",
        "list_partitions", "load_collection", "load_partitions", "prepare_index_params",
        "query", "query_iterator", "release_collection", "rename_collection", "search",
        "search_iterator", "upsert", "use_database", "using_database", "close",
    }  # fmt: skip
    assert expected <= set(shared), sorted(expected - set(shared))
    wrong = {}
    for name in shared:
        ours, theirs = getattr(Client, name), getattr(theirs_cls, name)
        mine, pm = _positional(ours), _positional(theirs)
        if name in ALLOWED_DIFFERENCES:
            ok = mine == pm[: len(mine)] and "timeout" in mine
        else:
            ok = mine == pm
        if not ok or (_has_kwargs(theirs) and not _has_kwargs(ours)):
            wrong[name] = (mine, pm)
    assert wrong == {}


def test_errors_name_collections_by_name(stack: Stack) -> None:
    """A Milvus user never sees collection ids: errors say which collection by name."""
    client = stack.client()
    bare_collection(client, "unloaded_books", 4)  # quick setup would load it
    with pytest.raises(ElanusError) as err:
        client.search("unloaded_books", [[0.0] * 4])
    assert err.value.code == ErrorCode.COLLECTION_NOT_LOADED
    assert "'unloaded_books'" in err.value.message, err.value.message
    with pytest.raises(ElanusError) as err:
        client.describe_index("unloaded_books", "nope")
    assert err.value.code == ErrorCode.INDEX_NOT_FOUND
    assert err.value.message == "collection 'unloaded_books' has no index 'nope'"
