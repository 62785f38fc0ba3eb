"""A field's properties (issue 36, item 3), as Milvus 2.6's ``alter_collection_field``
answers them: ``max_length`` (VarChar, Array of VarChar) and ``max_capacity`` (Array)
raised and lowered, later writes checked against the new limit, describe showing it;
``mmap.enabled`` and the warm-up keys stored and described with the field's params, set
or dropped only while the collection is released; every other key, a field of the wrong
type, a value out of range and the primary key refused with Milvus's code, naming the
problem, changing nothing. An index's properties likewise (``alter_index_properties``:
Milvus's configurable index params only). On the Milvus port (pymilvus) and through the
Elanus SDK; a second proxy sees the new limit at once, and a restarted coord keeps it.

Milvus Lite does not serve AlterCollectionField (UNIMPLEMENTED), so these follow Milvus's
source (the proxy's AlterCollectionField task: the keys it allows, its messages, its
codes) and its documentation where the two part: the documented ``max_length`` range
[1, 65535] (the proxy checks only the upper bound) and the primary key's properties not
alterable (the proxy does not check it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack, StandaloneProcess, cli, cli_json, own_stack, run_elanus
from milvus_stack import MilvusStack, milvus_stack
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException

from elanus import indexprops
from elanus.errors import ElanusError, ErrorCode
from elanus.fieldprops import check_keys, is_stored_key, of_field, plan, stored_key
from elanus.mmapsettings import public
from elanus.schema import Field, Schema

INVALID = 1100  # Milvus's ErrParameterInvalid


@pytest.fixture
def mstack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MilvusStack]:
    yield from milvus_stack(request, tmp_path)


@contextlib.contextmanager
def fp_client(stack: MilvusStack) -> Iterator[MilvusClient]:
    """A pymilvus client on ``stack``, which holds the collection ``fp``."""
    c = MilvusClient(uri=stack.milvus_uri, timeout=30)
    try:
        schema = c.create_schema()
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
        schema.add_field("t", DataType.VARCHAR, max_length=4)
        schema.add_field("a", DataType.ARRAY, element_type=DataType.INT64, max_capacity=2)
        schema.add_field(
            "s", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=2, max_length=3
        )
        c.create_collection("fp", schema=schema)
        yield c
    finally:
        c.close()


@pytest.fixture
def mc(mstack: MilvusStack) -> Iterator[MilvusClient]:
    with fp_client(mstack) as c:
        yield c


@pytest.fixture(scope="module")
def refusing_mc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusClient]:
    """``mc`` on one stack for every refused change: each asserts it changed nothing."""
    tmp = tmp_path_factory.mktemp("refusals")
    with own_stack(tmp, "field-props-refusals", kind=MilvusStack) as stack:
        stack.add_indexnode()  # as ``milvus_stack`` gives
        with fp_client(stack) as c:
            yield c


def _row(i: int, t: str = "x", a: list[int] | None = None, s: list[str] | None = None) -> Any:
    return {"id": i, "v": [0.1, 0.2], "t": t, "a": a or [1], "s": s or ["x"]}


def _params(c: MilvusClient, name: str) -> dict[str, Any]:
    fields = c.describe_collection("fp")["fields"]
    return dict(next(f for f in fields if f["name"] == name)["params"])


def _refused(call: Any) -> tuple[int, str]:
    with pytest.raises(MilvusException) as err:
        call()
    return err.value.code, err.value.message


def test_max_length_raised_then_lowered(mc: MilvusClient) -> None:
    code, _ = _refused(lambda: mc.insert("fp", [_row(1, t="abcdef")]))
    mc.alter_collection_field("fp", "t", {"max_length": 8})
    assert _params(mc, "t")["max_length"] == 8
    assert mc.insert("fp", [_row(1, t="abcdef")])["insert_count"] == 1
    mc.flush("fp")  # a sealed segment written under the old schema version
    mc.alter_collection_field("fp", "t", {"max_length": 2})  # lowering: allowed, as Milvus
    assert _params(mc, "t")["max_length"] == 2
    again, message = _refused(lambda: mc.insert("fp", [_row(2, t="abc")]))
    assert again == code and "max_length" in message
    assert mc.insert("fp", [_row(3, t="ab")])["insert_count"] == 1
    # an Array of VarChar takes max_length too: its elements' bound
    _refused(lambda: mc.insert("fp", [_row(4, s=["abcd"])]))
    mc.alter_collection_field("fp", "s", {"max_length": 5})
    assert _params(mc, "s") == {"max_length": 5, "max_capacity": 2}
    assert mc.insert("fp", [_row(4, s=["abcd"])])["insert_count"] == 1
    mc.flush("fp")
    mc.create_index("fp", _flat(mc))
    mc.load_collection("fp")  # what was written before and after is all there
    rows = mc.query("fp", "id >= 0", ["t"], consistency_level="Strong")
    assert sorted(r["t"] for r in rows) == ["ab", "abcdef", "x"]


def test_max_capacity_raised_then_lowered(mc: MilvusClient) -> None:
    code, _ = _refused(lambda: mc.insert("fp", [_row(1, a=[1, 2, 3])]))
    mc.alter_collection_field("fp", "a", {"max_capacity": "3"})  # text, as Milvus takes it
    assert _params(mc, "a")["max_capacity"] == 3
    assert mc.insert("fp", [_row(1, a=[1, 2, 3])])["insert_count"] == 1
    mc.alter_collection_field("fp", "a", {"max_capacity": 1})
    again, message = _refused(lambda: mc.insert("fp", [_row(2, a=[1, 2])]))
    assert again == code and "max_capacity" in message


@pytest.mark.parametrize(
    ("field", "params", "words"),
    [
        ("t", {"nullable": True}, "nullable does not allow update in collection field param"),
        ("t", {"dim": 8}, "dim does not allow update"),
        ("id", {"max_length": 8}, "primary key"),
        ("a", {"max_length": 8}, "can not modify the maxlength for non-string types"),
        ("t", {"max_capacity": 8}, "can not modify the maxcapacity for non-array types"),
        ("t", {"max_length": 65536}, "out of range [1, 65535]"),
        ("t", {"max_length": 0}, "out of range [1, 65535]"),
        ("t", {"max_length": "ten"}, "should be an integer"),
        ("a", {"max_capacity": 4097}, "should be in (0, 4096]"),
        ("a", {"max_capacity": 0}, "should be in (0, 4096]"),
        ("t", {"mmap.enabled": "maybe"}, "must be true or false"),
        ("t", {"warmup": "eager"}, "must be one of sync, disable"),
        ("nope", {"max_length": 8}, "field nope does not exist"),
    ],
)
def test_refused_with_milvus_code_and_nothing_changed(
    refusing_mc: MilvusClient, field: str, params: dict[str, Any], words: str
) -> None:
    mc = refusing_mc
    before = mc.describe_collection("fp")
    code, message = _refused(lambda: mc.alter_collection_field("fp", field, params))
    assert code == INVALID and words in message
    assert mc.describe_collection("fp") == before


def test_description(mc: MilvusClient) -> None:
    """Milvus's ``field.description`` key: any field's, the primary key's too."""
    mc.alter_collection_field("fp", "id", {"field.description": "the key"})
    mc.alter_collection_field("fp", "t", {"field.description": "a title"})
    fields = {f["name"]: f for f in mc.describe_collection("fp")["fields"]}
    assert (fields["id"]["description"], fields["t"]["description"]) == ("the key", "a title")
    assert _params(mc, "t") == {"max_length": 4}


def test_drop_only_the_settings(mc: MilvusClient, mstack: MilvusStack) -> None:
    """``max_length`` cannot be dropped (Milvus's allowed drop keys: mmap and warm-up)."""
    client = mstack.client()
    with pytest.raises(ElanusError) as err:
        client.drop_collection_field_properties("fp", "t", ["max_length"])
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    assert "max_length is not allowed to drop in collection field param" in err.value.message
    code, _ = _refused(lambda: mc.alter_collection_field("nope", "t", {"max_length": 8}))
    assert code == 100  # Milvus's ErrCollectionNotFound


def test_settings_stored_described_and_only_while_released(
    mc: MilvusClient, mstack: MilvusStack
) -> None:
    mc.alter_collection_field("fp", "v", {"mmap_enabled": True, "warmup": "disable"})
    # Milvus keeps mmap.enabled among the field's type params; pymilvus shows it as this
    assert _params(mc, "v") == {"dim": 2, "mmap_enabled": True, "warmup": "disable"}
    assert "warmup" not in mc.describe_collection("fp")["properties"]  # the field's own
    client = mstack.client()  # the SDK describes them the same way
    [v] = [f for f in client.describe_collection("fp")["fields"] if f["name"] == "v"]
    assert v["params"] == {"dim": 2, "mmap_enabled": True, "warmup": "disable"}
    client.drop_collection_field_properties("fp", "v", ["warmup"])
    assert _params(mc, "v") == {"dim": 2, "mmap_enabled": True}

    mc.create_index("fp", _flat(mc))
    mc.load_collection("fp")
    code, message = _refused(lambda: mc.alter_collection_field("fp", "v", {"warmup": "sync"}))
    assert code == INVALID and "collection loaded" in message
    mc.alter_collection_field("fp", "t", {"max_length": 9})  # a limit: loaded or not
    assert _params(mc, "t")["max_length"] == 9
    assert _params(mc, "v") == {"dim": 2, "mmap_enabled": True}
    mc.release_collection("fp")
    client.alter_collection_field("fp", "v", {"warmup.vectorField": "sync"})
    assert _params(mc, "v")["warmup.vectorField"] == "sync"


def _flat(mc: MilvusClient) -> Any:
    index = mc.prepare_index_params()
    index.add_index("v", index_type="FLAT", metric_type="L2")
    return index


def short_text_schema() -> Schema:
    """A VARCHAR ``t`` of at most 2 characters, for the tests that raise the limit."""
    return Schema(
        [
            Field("id", DataType.INT64, is_primary=True),
            Field("v", DataType.FLOAT_VECTOR, dim=2),
            Field("t", DataType.VARCHAR, max_length=2),
        ]
    )


def test_sdk_raises_the_limit(mstack: MilvusStack) -> None:
    client = mstack.client()
    client.create_collection("sdk", schema=short_text_schema())
    with pytest.raises(ElanusError) as err:
        client.insert("sdk", [{"id": 1, "v": [0.0, 1.0], "t": "abc"}])
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    client.alter_collection_field("sdk", "t", {"max_length": 3})
    client.insert("sdk", [{"id": 1, "v": [0.0, 1.0], "t": "abc"}])
    [t] = [f for f in client.describe_collection("sdk")["fields"] if f["name"] == "t"]
    assert t["params"]["max_length"] == 3
    with pytest.raises(ElanusError) as err:
        client.alter_collection_field("sdk", "t", {"max_length": 3}, nope=1)
    assert "'nope'" in err.value.message


def test_every_proxy_and_a_coord_restart(stack: Stack) -> None:
    """A second proxy that cached the schema checks the new limit at once (the coord
    dropped every proxy's cache before it answered); a restarted coord keeps it all."""
    client = stack.client()
    client.create_collection("r", schema=short_text_schema())
    other = stack.client(stack.add_proxy().uri)
    other.insert("r", [{"id": 1, "v": [0.0, 1.0], "t": "ab"}])  # caches the schema
    client.alter_collection_field("r", "t", {"max_length": 4, "warmup": "sync"})
    other.insert("r", [{"id": 2, "v": [0.0, 1.0], "t": "abcd"}])
    client.alter_collection_field("r", "t", {"max_length": 3})
    with pytest.raises(ElanusError) as err:
        other.upsert("r", [{"id": 3, "v": [0.0, 1.0], "t": "abcd"}])
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and "max_length" in err.value.message
    stack.restart()
    client = stack.client()
    [t] = [f for f in client.describe_collection("r")["fields"] if f["name"] == "t"]
    assert t["params"] == {"max_length": 3, "warmup": "sync"}
    client.insert("r", [{"id": 3, "v": [0.0, 1.0], "t": "abc"}])
    with pytest.raises(ElanusError):
        client.insert("r", [{"id": 4, "v": [0.0, 1.0], "t": "abcd"}])


@pytest.mark.slow
def test_cli_alter_field(server: StandaloneProcess) -> None:
    cli(server, "collection", "create", "cli_fp", "--dim", "4")  # loaded, too
    cli(server, "collection", "add-field", "cli_fp", "lang", "--type", "VarChar",
        "--max-length", "2")  # fmt: skip
    alter = ("collection", "alter-field", "cli_fp", "lang")
    altered = cli_json(server, *alter, "--set", "max_length=16")
    assert altered == {"collection": "cli_fp", "field": "lang", "params": {"max_length": 16}}
    for args, words in (
        (["--set", "nullable=true"], "nullable does not allow update in collection field param"),
        (
            ["--set", "warmup=sync"],
            "can not alter collection field properties if collection loaded",
        ),
        (["--drop", "max_length"], "max_length is not allowed to drop"),
    ):
        refused = run_elanus(*alter, *args, "--uri", server.uri)
        assert refused.returncode != 0 and words in refused.stderr


# -- the rules, without a server ------------------------------------------------------------
def test_plan_changes_one_field_and_the_version() -> None:
    schema = Schema(
        [
            Field("id", DataType.INT64, is_primary=True, field_id=100),
            Field("t", DataType.VARCHAR, max_length=4, field_id=101),
        ]
    )
    new, stored = plan(schema, "c", "t", {"max_length": "9", "warmup": "sync"})
    assert new is not None and new.version == schema.version + 1
    assert [f.max_length for f in new.fields] == [None, 9]
    assert schema.fields[1].max_length == 4  # the old one is untouched
    assert stored == {stored_key("t", "warmup"): "sync"}
    assert plan(schema, "c", "t", {"mmap_enabled": "TRUE"}) == (
        None,
        {"field.t.mmap.enabled": "true"},
    )
    assert is_stored_key("field.t.warmup") and not is_stored_key("field.t.other")
    assert of_field({"field.t.warmup": "sync", "field.u.warmup": "disable"}, "t") == {
        "warmup": "sync"
    }
    with pytest.raises(ElanusError):
        check_keys({}, [])
    assert indexprops.stored(7, {"mmap_enabled": "TRUE", "warmup": "sync"}) == {
        "index.7.mmap.enabled": "true",
        "index.7.warmup": "sync",
    }
    assert public({"index.7.warmup": "sync", "field.t.warmup": "sync", "a": "b"}) == {"a": "b"}


# -- an index's properties (alter_index_properties / drop_index_properties) ----------------
def test_index_properties_as_milvus_allows(mc: MilvusClient, mstack: MilvusStack) -> None:
    """Milvus's configurable index params: ``mmap.enabled``, ``indexoffsetcache.enabled``,
    ``warmup``, only while released; stored and shown among the index's params."""
    mc.create_index("fp", _flat(mc))
    [name] = mc.list_indexes("fp")
    mc.alter_index_properties("fp", name, {"warmup": "sync", "indexoffsetcache.enabled": True})
    described = mc.describe_index("fp", name)
    assert (described["warmup"], described["indexoffsetcache.enabled"]) == ("sync", "true")
    assert "warmup" not in mc.describe_collection("fp")["properties"]
    client = mstack.client()
    assert client.describe_index("fp", name)["params"]["warmup"] == "sync"
    client.drop_index_properties("fp", name, ["warmup"])
    assert "warmup" not in mc.describe_index("fp", name)
    for params, words in (
        ({"nlist": 8}, "nlist is not configable index param"),
        ({"lazyload.enabled": True}, "lazyload.enabled is not configable index param"),
        ({"warmup": "eager"}, "must be one of sync, disable"),
    ):
        before = mc.describe_index("fp", name)
        code, message = _refused(lambda p=params: mc.alter_index_properties("fp", name, p))
        assert code == INVALID and words in message
        assert mc.describe_index("fp", name) == before
    code, message = _refused(lambda: mc.drop_index_properties("fp", name, ["metric_type"]))
    assert code == INVALID and "metric_type is not configable index param" in message
    mc.load_collection("fp")
    code, message = _refused(lambda: mc.alter_index_properties("fp", name, {"warmup": "sync"}))
    assert "can't alter index on loaded collection" in message
    assert "warmup" not in mc.describe_index("fp", name)
