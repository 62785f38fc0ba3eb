"""Partial upserts (Milvus 2.6's ``partial_update``, and the array operators of
``field_ops``): the proxy reads the current rows of the upserted keys, lays the given
columns over them and hands whole rows to the normal upsert (a delete and an insert of
the keys at one timestamp, ``DmlService.prepare``), as Milvus's proxy does.

The rows are read as a query by ids at Strong, in the partition the upsert writes to
(every partition with a partition key), so the collection must be loaded. Then, per key:

- it exists: each field given replaces the stored value (a null given is a null), each
  field left out keeps its value, vectors included; the dynamic field is merged key by
  key (the keys given replace those stored, the others stay), as Milvus documents.
- it does not: the row is inserted; a field left out takes its default value or null,
  and one that has neither refuses the whole request, naming the field and the key.

``field_ops`` (Milvus 2.6.17+) maps a field to ``replace`` (the default),
``array_append`` (the given elements go after the stored ones) or ``array_remove``
(every stored element equal to a given one goes). Only Array fields take the array
operators, and the field must be given; a null payload leaves the row's array as it
was, a null stored array takes the appended payload. A key that does not exist is
inserted with the payload as its value, as Milvus's insert branch takes the request's
data. The merged array is checked against ``max_capacity`` by the upsert's own checks.

All of it is vectorised: Arrow ``take`` for the stored columns, Arrow list kernels and
numpy for the operators, ``conform_json.merge_objects`` for ``$meta``; no Python loop
over rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from elanus.conform_common import first_true, mismatch, single_array
from elanus.conform_json import dynamic_column, merge_objects
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.functions import function_outputs
from elanus.ops.reads import Query
from elanus.schema import DEFAULT_PARTITION, DYNAMIC_FIELD, DataType, Field, Schema

if TYPE_CHECKING:
    from elanus.flight.metacache import CollectionInfo
    from elanus.flight.search import QueryService

REPLACE, APPEND, REMOVE = "replace", "array_append", "array_remove"
FIELD_OPS = (REPLACE, APPEND, REMOVE)
"""The operators of ``field_ops``, by the names pymilvus's ``FieldOp`` aliases use."""


def check_field_ops(ops: Any, what: str = "upsert") -> dict[str, str]:
    """``{field: operator}`` as sent (Flight body or Milvus request), operator names
    checked; ``replace`` entries dropped, as they mean what no entry means."""
    if not isinstance(ops, Mapping):
        raise invalid(f"{what}: 'field_ops' must map field names to operators")
    checked: dict[str, str] = {}
    for name, op in ops.items():
        if not isinstance(name, str) or not name:
            raise invalid(f"{what}: 'field_ops' names a field {name!r}; give a field name")
        if op not in FIELD_OPS:
            raise invalid(
                f"{what}: field_ops gives field {name!r} the operator {op!r}; Elanus has "
                f"{', '.join(FIELD_OPS)}"
            )
        if op != REPLACE:
            checked[name] = op
    return checked


def merge_partial(
    query: QueryService,
    info: CollectionInfo,
    partition: str | None,
    data: pa.Table,
    ops: Mapping[str, str],
) -> pa.Table:
    """``data`` (some of the collection's fields, the primary key among them) as whole
    rows: the stored values under what was not given (see the module doc)."""
    schema = info.schema
    pk = schema.primary
    if not data.num_rows:
        raise invalid("upsert request has no rows")
    if pk.name not in data.column_names:
        raise mismatch(f"a partial upsert needs the primary key field {pk.name!r}")
    _check_ops(schema, ops, data.column_names)
    keys = _keys(single_array(data.column(pk.name)), pk)
    stored = _stored(query, info, partition, keys)
    at = pc.index_in(keys, stored.column(pk.name))  # each key's stored row; null: a new key
    new = at.is_null()
    all_new, some_new = pc.all(new).as_py(), pc.any(new).as_py()
    outputs = function_outputs(schema)
    columns: dict[str, pa.Array] = {}
    for f in schema.fields:
        if f.name in outputs:  # computed again from the merged input text
            continue
        kept = f.name in stored.column_names and not all_new
        before = stored.column(f.name).take(at) if kept else None
        if f.name in data.column_names:
            given = single_array(data.column(f.name))
            op = ops.get(f.name)
            columns[f.name] = given if op is None else _array_op(op, f, before, given, new)
            continue
        if some_new and not f.nullable and f.default_value is None:
            key = keys[first_true(new)].as_py()
            raise mismatch(
                f"partial upsert: primary key {key!r} is not in the collection, so its row is "
                f"inserted, and it lacks field {f.name!r} (not nullable, no default value): "
                "give the field, or upsert keys that exist"
            )
        columns[f.name] = before if before is not None else pa.nulls(len(keys), f.arrow_type())
    if schema.enable_dynamic_field:
        columns[DYNAMIC_FIELD] = _dynamic(schema, data, stored, at)
    return pa.table(columns)


def _check_ops(schema: Schema, ops: Mapping[str, str], given: list[str]) -> None:
    """Milvus's checks of an array operator: an Array field of the schema, not the key,
    and given in the request."""
    fields = {f.name: f for f in schema.fields}
    for name, op in ops.items():
        f = fields.get(name)
        if f is None:
            raise invalid(f"upsert: field_ops names field {name!r}, which is not in the schema")
        if f.is_primary:
            raise invalid(f"upsert: field {name!r} is the primary key; it takes no {op}")
        if f.dtype is not DataType.ARRAY:
            raise invalid(f"upsert: {op} needs an Array field; {name!r} is {f.dtype.value}")
        if name not in given:
            raise invalid(f"upsert: field_ops gives {name!r} {op}, but the rows do not give it")


def _keys(column: pa.Array, pk: Field) -> pa.Array:
    """The primary keys as the key's type, one per row (the upsert's checks refuse
    repeated keys later, with the rest of the input)."""
    if column.null_count:
        row = first_true(column.is_null())
        raise invalid(f"primary key field {pk.name!r} has a null at row {row}")
    try:
        return pc.cast(column, pk.arrow_type())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise mismatch(
            f"primary key field {pk.name!r} is {pk.dtype.value}; the upsert gives {column.type}"
        ) from None


def _stored(
    query: QueryService, info: CollectionInfo, partition: str | None, keys: pa.Array
) -> pa.Table:
    """The stored rows of ``keys`` (every output field, dynamic ones in ``$meta``), read
    where the upsert's delete of them reaches, as Milvus's retrieve before a merge."""
    by_key = info.schema.partition_key is not None
    request = Query(
        db=info.db,
        collection=info.name,
        ids=keys.to_pylist(),
        output_fields=["*"],
        consistency_level="Strong",
        partition_names=None if by_key else [partition or DEFAULT_PARTITION],
    )
    try:
        table, _, _ = query.query_table(info, request)
    except ElanusError as exc:
        if exc.code is not ErrorCode.COLLECTION_NOT_LOADED:
            raise
        message = f"a partial upsert reads the stored rows: {exc.message}"
        raise ElanusError(exc.code, message) from None
    return table


def _array_op(
    op: str, f: Field, before: pa.Array | None, given: pa.Array, new: pa.Array
) -> pa.Array:
    """An array operator applied to every row at once; new keys take the payload."""
    if before is None:  # every key is new
        return given
    before = single_array(before)
    try:
        payload = pc.cast(given, before.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise mismatch(
            f"field {f.name!r} is an Array of {f.element_type}; the upsert gives {given.type}"
        ) from None
    merged = _appended(before, payload) if op == APPEND else _removed(before, payload)
    return pc.if_else(new, payload, merged)


def _appended(before: pa.Array, payload: pa.Array) -> pa.Array:
    """Each row's stored elements, then its payload's (a null list adds none; two nulls
    stay null)."""
    values = pa.concat_arrays([pc.list_flatten(before), pc.list_flatten(payload)])
    rows = np.concatenate(
        [_parents(before) * 2, _parents(payload) * 2 + 1]  # a row's stored ones first
    )
    order = np.argsort(rows, kind="stable")
    lengths = _lengths(before) + _lengths(payload)
    both_null = pc.and_(before.is_null(), payload.is_null())
    return _lists(lengths, values.take(pa.array(order)), both_null)


def _removed(before: pa.Array, payload: pa.Array) -> pa.Array:
    """Each row's stored elements less every one equal to an element of its payload
    (matched as ``row|value`` text, so one hash lookup per element)."""
    values = pc.list_flatten(before)
    parents = _parents(before)
    gone = pc.is_in(
        _row_keys(parents, values), value_set=_row_keys(_parents(payload), pc.list_flatten(payload))
    )
    keep = pc.invert(gone).to_numpy(zero_copy_only=False)
    lengths = np.bincount(parents[keep], minlength=len(before))
    return _lists(lengths, values.filter(pa.array(keep)), before.is_null())


def _parents(lists: pa.Array) -> np.ndarray:
    return pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)


def _lengths(lists: pa.Array) -> np.ndarray:
    return pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)


def _row_keys(parents: np.ndarray, values: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(
        pc.cast(pa.array(parents), pa.string()), pc.cast(values, pa.string()), "|"
    )


def _lists(lengths: np.ndarray, values: pa.Array, null: pa.Array) -> pa.Array:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=null)


def _dynamic(schema: Schema, data: pa.Table, stored: pa.Table, at: pa.Array) -> pa.Array:
    """``$meta``: the stored object with the given keys laid over it (one level, as
    Milvus merges a partial update's dynamic field); no dynamic keys given: as stored."""
    static = {f.name for f in schema.fields}
    unknown = [name for name in data.column_names if name not in static]
    before = (
        single_array(stored.column(DYNAMIC_FIELD).take(at))
        if DYNAMIC_FIELD in stored.column_names
        else pa.nulls(len(at), pa.string())
    )
    if not unknown:
        return before
    columns = {name: single_array(data.column(name)) for name in data.column_names}
    return merge_objects(before, dynamic_column(schema, columns, unknown, data.num_rows))
