"""Requests that used to be accepted and must be refused: a stable code, a message naming
the problem, and nothing changed. Every case goes through a real Flight server (a bare
pyarrow Flight client where the wire matters, the SDK otherwise).

Milvus Lite 3.2.2 accepts several of these (an Int8 default of 1000, any dynamic key but
``$meta``, ``["*", "count(*)"]``); Milvus's documentation and server refuse them, and
Elanus follows the documentation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.flight as flight
import pytest
from conftest import Stack, own_stack, wait_for

from elanus import DataType, ElanusError, ErrorCode, Schema
from elanus.client.client import Client
from elanus.flight import proxy
from elanus.wire.codec import from_flight_error

DIM = 2
STRONG = "Strong"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Client]]:
    with own_stack(tmp_path_factory.mktemp("refusals"), "refusals-loop") as stack:
        wait_for(
            lambda: stack.coord.sessions.of_role("querynode"),  # type: ignore[union-attr]
            what="the query node session",
        )
        client = stack.client()
        schema = (
            Schema(enable_dynamic_field=True)
            .add_field("id", DataType.INT64, is_primary=True)
            .add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
            .add_field("doc", DataType.JSON, nullable=True)
        )
        client.create_collection("dyn", schema=schema, properties={"metric_type": "L2"})
        client.insert("dyn", [{"id": i, "v": [0.1 * i, 0.2], "tag": i} for i in range(3)])
        client.load_collection("dyn")
        yield stack, client


def _count(client: Client) -> int:
    rows = client.query("dyn", output_fields=["count(*)"], consistency_level=STRONG)
    return int(rows[0]["count(*)"])


def _refused(code: ErrorCode, *words: str) -> Any:
    """Check a raised ElanusError: its code and that the message names the problem."""

    class _Check:
        def __enter__(self) -> None:
            return None

        def __exit__(self, et: Any, exc: BaseException | None, tb: Any) -> bool:
            assert isinstance(exc, ElanusError), f"expected ElanusError, got {exc!r}"
            assert exc.code == code, exc
            for w in words:
                assert w in exc.message, (w, exc.message)
            assert "Traceback" not in exc.message and "Detail" not in exc.message
            return True

    return _Check()


def _schema_with(**field: Any) -> Schema:
    name = field.pop("name", "f")
    return (
        Schema()
        .add_field("id", DataType.INT64, is_primary=True)
        .add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
        .add_field(name, **field)
    )


# -- default values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "words"),
    [
        (
            {"datatype": DataType.INT8, "default_value": 1000},
            ["1000", "'f'", "Int8", "[-128, 127]"],
        ),
        ({"datatype": DataType.INT16, "default_value": -40000}, ["-40000", "Int16"]),
        ({"datatype": DataType.INT32, "default_value": 2**31}, ["2147483648", "Int32"]),
        ({"datatype": DataType.INT64, "default_value": 1.5}, ["1.5", "integer"]),
        ({"datatype": DataType.INT8, "default_value": True}, ["True", "integer"]),
        ({"datatype": DataType.BOOL, "default_value": 1}, ["boolean", "Bool"]),
        ({"datatype": DataType.FLOAT, "default_value": 1e39}, ["1e+39", "finite Float"]),
        (
            {"datatype": DataType.VARCHAR, "max_length": 3, "default_value": "abcd"},
            ["4 bytes", "max_length is 3"],
        ),
        ({"datatype": DataType.VARCHAR, "max_length": 3, "default_value": 7}, ["string"]),
        ({"datatype": DataType.JSON, "default_value": {"a": 1}}, ["JSON fields do not support"]),
        (
            {
                "datatype": DataType.ARRAY,
                "element_type": DataType.INT64,
                "max_capacity": 4,
                "default_value": [1],
            },
            ["Array fields do not support"],
        ),
    ],
)
def test_default_value_that_does_not_fit_is_refused(
    env: tuple[Stack, Client], field: dict[str, Any], words: list[str]
) -> None:
    _, client = env
    with _refused(ErrorCode.INVALID_ARGUMENT, *words):
        client.create_collection("bad_default", schema=_schema_with(**field))
    assert not client.has_collection("bad_default")


def test_default_values_at_the_limits_are_accepted(env: tuple[Stack, Client]) -> None:
    _, client = env
    schema = (
        Schema()
        .add_field("id", DataType.INT64, is_primary=True)
        .add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
        .add_field("i8", DataType.INT8, default_value=-128)
        .add_field("f", DataType.FLOAT, default_value=3)
        .add_field("s", DataType.VARCHAR, max_length=3, default_value="abc")
    )
    client.create_collection("edge_default", schema=schema, properties={"metric_type": "L2"})
    try:
        schema_doc = client.describe_collection("edge_default")["schema"]
        fields = {f["name"]: f for f in schema_doc["fields"]}
        described = {name: fields[name]["default_value"] for name in ("i8", "f", "s")}
        assert described == {"i8": -128, "f": 3.0, "s": "abc"}
        client.insert("edge_default", [{"id": 1, "v": [0.0, 1.0]}])
        client.load_collection("edge_default")
        (row,) = client.query("edge_default", "id == 1", ["i8", "f", "s"], consistency_level=STRONG)
        assert (row["i8"], row["f"], row["s"]) == (-128, 3.0, "abc")
    finally:
        client.drop_collection("edge_default")


def test_nan_default_over_the_wire_is_refused(env: tuple[Stack, Client]) -> None:
    stack, client = env
    schema = _schema_with(datatype=DataType.DOUBLE).to_dict()
    schema["fields"][2]["default_value"] = float("nan")
    body = json.dumps({"name": "nan_default", "schema": schema}).encode()
    with _refused(ErrorCode.INVALID_ARGUMENT, "nan", "finite Double"):
        _do_action(stack, "create_collection", body)
    assert not client.has_collection("nan_default")


# -- dynamic field names --------------------------------------------------------------------


@pytest.mark.parametrize("key", ["_ts", "$meta", "_row_id", "_segment", ""])
def test_reserved_dynamic_field_name_is_refused(env: tuple[Stack, Client], key: str) -> None:
    _, client = env
    before = _count(client)
    with _refused(ErrorCode.INVALID_ARGUMENT, repr(key)):
        client.insert("dyn", [{"id": 10, "v": [0.0, 1.0], key: 5}])
    with _refused(ErrorCode.INVALID_ARGUMENT, repr(key)):  # inside an explicit $meta object
        client.insert("dyn", [{"id": 11, "v": [0.0, 1.0], "$meta": {key: 5}}])
    assert _count(client) == before


def test_ordinary_dynamic_keys_still_work(env: tuple[Stack, Client]) -> None:
    _, client = env
    client.upsert("dyn", [{"id": 2, "v": [0.2, 0.2], "tag": 2, "a-b": 1}])
    rows = client.query("dyn", ids=[2], output_fields=["tag", "a-b"], consistency_level=STRONG)
    assert len(rows) == 1 and rows[0]["tag"] == 2 and rows[0]["a-b"] == 1


# -- count(*) -------------------------------------------------------------------------------


@pytest.mark.parametrize("outputs", [["*", "count(*)"], ["count(*)", "id"], ["tag", "count(*)"]])
def test_count_with_other_output_fields_is_refused(
    env: tuple[Stack, Client], outputs: list[str]
) -> None:
    _, client = env
    with _refused(ErrorCode.INVALID_ARGUMENT, "'count(*)' must be the only output field"):
        client.query("dyn", filter="id >= 0", output_fields=outputs, consistency_level=STRONG)


# -- JSON bodies ----------------------------------------------------------------------------


def _do_action(stack: Stack, name: str, body: bytes) -> Any:
    fc = flight.FlightClient(stack.uri)
    try:
        return [r.body.to_pybytes() for r in fc.do_action(flight.Action(name, body))]
    except flight.FlightError as exc:
        assert str(exc).startswith("[")  # the code leads the status message
        assert json.loads(exc.extra_info)["code"]
        raise from_flight_error(exc) from None
    finally:
        fc.close()


def test_repeated_key_in_action_body_is_refused(env: tuple[Stack, Client]) -> None:
    stack, client = env
    with _refused(ErrorCode.INVALID_ARGUMENT, "'name'", "twice"):
        _do_action(stack, "create_collection", b'{"name": "a", "name": "b", "dimension": 4}')
    with _refused(ErrorCode.INVALID_ARGUMENT, "'metric_type'", "twice"):
        body = (
            b'{"collection": "dyn", "data": [[0.1, 0.2]], "search_params": '
            b'{"metric_type": "L2", "metric_type": "IP"}}'
        )
        _do_action(stack, "search", body)
    assert not client.has_collection("a") and not client.has_collection("b")
    # colons inside strings are not keys
    body = (
        b'{"collection": "dyn", "filter": "tag == 1 or doc[\\"k:v\\"] == 1", "limit": 5, '
        b'"consistency_level": "Strong"}'
    )  # Strong: the fixture's rows, however soon after the insert this test runs
    assert json.loads(_do_action(stack, "query", body)[0])["rows"][0]["id"] == 1


@pytest.mark.parametrize("depth", [100, 5000])
def test_deeply_nested_body_is_refused(env: tuple[Stack, Client], depth: int) -> None:
    stack, client = env
    nested = b"[" * depth + b"]" * depth
    body = b'{"collection": "dyn", "filter": "id >= 0", "filter_params": {"x": ' + nested + b"}}"
    with _refused(ErrorCode.INVALID_ARGUMENT, "nested", "max_json_depth"):
        _do_action(stack, "query", body)
    search = b'{"collection": "dyn", "data": [[0.1, 0.2]], "filter_params": {"x": ' + nested
    with _refused(ErrorCode.INVALID_ARGUMENT, "nested"):
        _do_action(stack, "search", search + b"}}")
    assert client.has_collection("dyn")


def test_many_query_vectors_are_not_deep(env: tuple[Stack, Client]) -> None:
    stack, _ = env
    data = json.dumps([[0.1, 0.2]] * 200).encode()
    body = b'{"collection": "dyn", "data": ' + data + b', "limit": 1}'
    assert len(json.loads(_do_action(stack, "search", body)[0])["results"]) == 200


# -- GetSchema ------------------------------------------------------------------------------


def test_get_schema_errors_carry_their_code(env: tuple[Stack, Client]) -> None:
    stack, client = env
    with _refused(ErrorCode.COLLECTION_NOT_FOUND, "'nope'"):
        client.read_schema("nope")
    with _refused(ErrorCode.INVALID_ARGUMENT, "'missing'"):
        client.read_schema("dyn", columns=["id", "missing"])
    assert client.read_schema("dyn", columns=["id"]).names == ["id"]
    fc = flight.FlightClient(stack.uri)
    try:
        unknown = flight.FlightDescriptor.for_command(b'{"collection": "nope"}')
        for descriptor, code in [
            (unknown, "COLLECTION_NOT_FOUND"),
            (flight.FlightDescriptor.for_path("dyn"), "INVALID_ARGUMENT"),
        ]:
            with pytest.raises(Exception) as err:
                fc.get_schema(descriptor)
            text = str(err.value)
            assert f"[{code}]" in text.split(". Detail")[0]
            # no file of the server, no source line and no traceback travel with the error
            assert str(Path(proxy.__file__).parent) not in text and '.py"' not in text
            assert "Traceback" not in text and ".pyx" not in text, text
            assert from_flight_error(err.value).code == code
    finally:
        fc.close()
