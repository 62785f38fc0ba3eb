"""Column access for filter evaluation: list helpers and JSON decoding, all vectorised.

JSON columns (and the dynamic ``$meta`` column) are Arrow strings holding JSON text. A filter
needs typed views of values at paths (``meta["a"][0]`` as a number, a string, a list...), so
a JSON column is decoded once per evaluation into :class:`JsonValues`.

The column is first dictionary-encoded (one hash pass in C++), so each *distinct* JSON
text is decoded once; path steps work on the distinct values only, and a typed view is
built over the distinct values and expanded to rows with one ``take``. Decoding:

* **Fast path** (:class:`ArrowJson`): every distinct text is wrapped as ``{"v": <text>}``
  with one vectorised string kernel, joined into one newline-delimited buffer and decoded
  by Arrow's C++ JSON reader (``pyarrow.json.read_json``) into a struct/list column. Path
  steps are ``struct_field`` and offset arithmetic on list arrays.
* **Fallback** (:class:`PyJson`): when Arrow cannot give the column one type (a key that
  holds a number in one row and a string in another, mixed-type arrays, invalid JSON, or
  strings that Arrow would turn into timestamps), each distinct text is decoded with
  ``json.loads`` and path steps walk the decoded values. No work is done per row in Python.

Both give the same answers. A value that is missing, JSON ``null``, of another type than
the view asks for, or an undecodable text is NULL in a view.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

_MISSING: Any = object()
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_FAST_TYPES = (pa.types.is_boolean, pa.types.is_int64, pa.types.is_float64, pa.types.is_string)


# ---- plain Arrow helpers -----------------------------------------------------------------------
def normalize(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array; dictionary and view types decoded to their plain equivalents."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        arr = arr.cast(pa.string())
    elif pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        arr = arr.cast(pa.list_(t.value_type))
    return arr


def list_offsets(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, lengths, valid)`` of a list array, indexes into ``arr.values``."""
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    starts = offsets[:-1]
    valid = np.asarray(arr.is_valid(), dtype=bool)
    lengths = np.where(valid, offsets[1:] - starts, 0)
    return starts, lengths, valid


def list_parts(arr: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Flatten a list array: ``(elements, parent row of each element, row is a list)``.

    (``pc.list_parent_indices`` is not used: it counts the hidden values of NULL slots and
    ignores slicing, so it does not line up with ``flatten``.)
    """
    starts, lengths, valid = list_offsets(arr)
    parents = np.repeat(np.arange(len(arr), dtype=np.int64), lengths)
    if arr.null_count == 0:
        return arr.flatten(), parents, valid
    row_first = np.cumsum(lengths) - lengths  # position of each row's first element in output
    elem = np.repeat(starts - row_first, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
    return arr.values.take(pa.array(elem, pa.int64())), parents, valid


def list_element(arr: pa.Array, i: int) -> pa.Array:
    """Element ``i`` of every list; NULL where the list is NULL or too short."""
    starts, lengths, valid = list_offsets(arr)
    ok = valid & (lengths > i)
    idx = pa.array(np.where(ok, starts + i, 0), pa.int64(), mask=~ok)
    return arr.values.take(idx)


def list_length(arr: pa.Array) -> pa.Array:
    return pc.list_value_length(arr).cast(pa.int64())


def mask_array(hits: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """A BooleanArray from a numpy mask, NULL where ``valid`` is false."""
    if valid is None or bool(valid.all()):
        return pa.array(hits, pa.bool_())
    return pa.array(hits, pa.bool_(), mask=~valid)


# ---- JSON ---------------------------------------------------------------------------------------
class JsonValues(Protocol):
    """The JSON values at one path, one per row, with typed views."""

    def get(self, key: str) -> JsonValues: ...

    def index(self, i: int) -> JsonValues: ...

    def number(self) -> pa.Array:
        """int64 if every number here is an integer that fits, else float64; NULL otherwise."""
        ...

    def string(self) -> pa.Array: ...

    def boolean(self) -> pa.Array: ...

    def is_null(self) -> pa.Array:
        """True where the path is missing or holds JSON null (never NULL itself)."""
        ...

    def array_length(self) -> pa.Array:
        """int64 length where the value is a JSON array, else NULL."""
        ...

    def array_parts(self) -> tuple[JsonValues, np.ndarray, np.ndarray]:
        """``(elements, parent row of each element, row holds an array)``."""
        ...


def decode_json(arr: pa.Array | pa.ChunkedArray, *, use_arrow: bool = True) -> JsonValues:
    """Decode a column of JSON text (see the module docstring for the two strategies).

    ``use_arrow=False`` forces the ``json.loads`` fallback (for tests and comparisons).
    """
    arr = normalize(arr)
    if not pa.types.is_string(arr.type):
        arr = arr.cast(pa.string())
    encoded = pc.dictionary_encode(arr)
    # distinct texts, plus a NULL slot at the end that NULL rows point at
    texts = pa.concat_arrays([encoded.dictionary, pa.nulls(1, pa.string())])
    idx = np.asarray(pc.fill_null(encoded.indices, len(texts) - 1), dtype=np.int64)
    fast = _arrow_decode(texts) if use_arrow else None
    if fast is not None:
        return ArrowJson(fast, idx)
    return PyJson(_py_values(texts), idx)


def _arrow_decode(texts: pa.Array) -> pa.Array | None:
    n = len(texts)
    for ch in ("\n", "\r"):  # raw newlines can only be whitespace in valid JSON
        if pc.any(pc.match_substring(texts, ch)).as_py():
            texts = pc.replace_substring(texts, ch, " ")
    texts = pc.fill_null(texts, "null")
    wrapped = pc.binary_join_element_wise('{"v":', texts, "}\n", "")
    _, offsets_buf, data = wrapped.buffers()
    if offsets_buf is None or data is None:
        return None
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[wrapped.offset : wrapped.offset + n + 1]
    buf = data[int(offsets[0]) : int(offsets[-1])]
    try:
        table = pajson.read_json(
            pa.BufferReader(buf), read_options=pajson.ReadOptions(block_size=1 << 22)
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows != n or table.num_columns != 1 or not _fast_type(table.schema[0].type):
        return None
    return normalize(table.column(0))


def _py_values(texts: pa.Array) -> list[Any]:
    objs: list[Any] = []
    for text in texts.to_pylist():
        try:
            objs.append(_MISSING if text is None else json.loads(text))
        except (ValueError, TypeError, RecursionError):
            objs.append(_MISSING)
    return objs


def _expand(
    starts: np.ndarray, lengths: np.ndarray, valid: np.ndarray, idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-level array elements from per-distinct-value lists.

    ``starts``/``lengths``/``valid`` describe the list of each distinct value; ``idx`` maps
    rows to distinct values. Returns ``(element index, parent row, row holds a list)``.
    """
    row_len = lengths[idx]
    total = int(row_len.sum())
    parents = np.repeat(np.arange(len(idx), dtype=np.int64), row_len)
    row_first = np.cumsum(row_len) - row_len
    elem = np.repeat(starts[idx] - row_first, row_len) + np.arange(total, dtype=np.int64)
    return elem, parents, valid[idx]


def _fast_type(t: pa.DataType) -> bool:
    if pa.types.is_null(t) or any(check(t) for check in _FAST_TYPES):
        return True
    if pa.types.is_list(t):
        return _fast_type(t.value_type)
    if pa.types.is_struct(t):
        return all(_fast_type(t.field(i).type) for i in range(t.num_fields))
    return False


class ArrowJson:
    """Distinct JSON values decoded by Arrow into one typed column, plus row -> value."""

    def __init__(self, arr: pa.Array, idx: np.ndarray) -> None:
        self.arr = arr
        self.idx = idx

    def _rows(self, per_value: pa.Array) -> pa.Array:
        return per_value.take(pa.array(self.idx, pa.int64()))

    def _nulls(self, t: pa.DataType) -> pa.Array:
        return pa.nulls(len(self.idx), t)

    def get(self, key: str) -> JsonValues:
        t = self.arr.type
        if pa.types.is_struct(t) and t.get_field_index(key) >= 0:
            return ArrowJson(pc.struct_field(self.arr, [t.get_field_index(key)]), self.idx)
        return ArrowJson(pa.nulls(len(self.arr)), self.idx)

    def index(self, i: int) -> JsonValues:
        if pa.types.is_list(self.arr.type):
            return ArrowJson(list_element(self.arr, i), self.idx)
        return ArrowJson(pa.nulls(len(self.arr)), self.idx)

    def number(self) -> pa.Array:
        t = self.arr.type
        if pa.types.is_integer(t):
            return self._rows(self.arr.cast(pa.int64()))
        if pa.types.is_floating(t):
            return self._rows(self.arr.cast(pa.float64()))
        return self._nulls(pa.int64())

    def string(self) -> pa.Array:
        if pa.types.is_string(self.arr.type):
            return self._rows(self.arr)
        return self._nulls(pa.string())

    def boolean(self) -> pa.Array:
        if pa.types.is_boolean(self.arr.type):
            return self._rows(self.arr)
        return self._nulls(pa.bool_())

    def is_null(self) -> pa.Array:
        return self._rows(self.arr.is_null())

    def array_length(self) -> pa.Array:
        if pa.types.is_list(self.arr.type):
            return self._rows(list_length(self.arr))
        return self._nulls(pa.int64())

    def array_parts(self) -> tuple[JsonValues, np.ndarray, np.ndarray]:
        if not pa.types.is_list(self.arr.type):
            n = len(self.idx)
            return (
                ArrowJson(pa.nulls(0), np.zeros(0, np.int64)),
                np.zeros(0, np.int64),
                np.zeros(n, bool),
            )
        elem, parents, valid = _expand(*list_offsets(self.arr), self.idx)
        return ArrowJson(self.arr.values, elem), parents, valid


class PyJson:
    """Distinct JSON values decoded by ``json.loads``, plus row -> value."""

    def __init__(self, objs: list[Any], idx: np.ndarray) -> None:
        self.objs = objs
        self.idx = idx

    def _rows(self, per_value: pa.Array) -> pa.Array:
        return per_value.take(pa.array(self.idx, pa.int64()))

    def get(self, key: str) -> JsonValues:
        objs = [o.get(key, _MISSING) if isinstance(o, dict) else _MISSING for o in self.objs]
        return PyJson(objs, self.idx)

    def index(self, i: int) -> JsonValues:
        objs = [o[i] if isinstance(o, list) and 0 <= i < len(o) else _MISSING for o in self.objs]
        return PyJson(objs, self.idx)

    def number(self) -> pa.Array:
        nums = [_number(o) for o in self.objs]
        if all(v is None or (isinstance(v, int) and _INT64_MIN <= v <= _INT64_MAX) for v in nums):
            return self._rows(pa.array(nums, pa.int64()))
        return self._rows(pa.array([None if v is None else float(v) for v in nums], pa.float64()))

    def string(self) -> pa.Array:
        values = [o if isinstance(o, str) else None for o in self.objs]
        return self._rows(pa.array(values, pa.string()))

    def boolean(self) -> pa.Array:
        values = [o if isinstance(o, bool) else None for o in self.objs]
        return self._rows(pa.array(values, pa.bool_()))

    def is_null(self) -> pa.Array:
        values = [o is None or o is _MISSING for o in self.objs]
        return self._rows(pa.array(values, pa.bool_()))

    def array_length(self) -> pa.Array:
        values = [len(o) if isinstance(o, list) else None for o in self.objs]
        return self._rows(pa.array(values, pa.int64()))

    def array_parts(self) -> tuple[JsonValues, np.ndarray, np.ndarray]:
        valid = np.array([isinstance(o, list) for o in self.objs], dtype=bool)
        lengths = np.array([len(o) if isinstance(o, list) else 0 for o in self.objs], np.int64)
        starts = np.cumsum(lengths) - lengths
        elements: list[Any] = [e for o in self.objs if isinstance(o, list) for e in o]
        elem, parents, row_valid = _expand(starts, lengths, valid, self.idx)
        return PyJson(elements, elem), parents, row_valid


def _number(o: Any) -> int | float | None:
    return o if isinstance(o, int | float) and not isinstance(o, bool) else None
