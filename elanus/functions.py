"""Schema functions (Milvus 2.5's ``Function``): fields whose values the server computes
from other fields. Elanus has the BM25 function: a VarChar field with an analyzer in, a
SparseFloatVector of term frequencies out, computed on insert, upsert and import, and
searched with raw text scored by BM25.

pymilvus's shapes: ``Function(name, FunctionType.BM25, input_field_names=...,
output_field_names=...)`` and ``schema.add_function(fn)``; pymilvus's own ``Function`` and
``FunctionType`` objects are taken too (read by attribute and by enum name).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from elanus.datatypes import DataType
from elanus.errors import invalid


class _Field(Protocol):
    """What functions read of a field (``elanus.schema.Field``)."""

    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> DataType: ...
    @property
    def enable_analyzer(self) -> bool: ...
    @property
    def analyzer_params(self) -> dict[str, Any] | None: ...
    def arrow_type(self) -> pa.DataType: ...


class SchemaView(Protocol):
    """What functions read of a schema (``elanus.schema.Schema``, which imports this
    module to check its functions)."""

    @property
    def fields(self) -> Sequence[_Field]: ...
    @property
    def functions(self) -> Sequence[Function]: ...


MAX_FUNCTIONS = 10


class FunctionType(enum.StrEnum):
    BM25 = "BM25"

    @classmethod
    def parse(cls, value: Any) -> FunctionType:
        raw = value.name if isinstance(value, enum.Enum) else str(value)
        for ft in cls:
            if ft.value.lower() == raw.lower():
                return ft
        raise invalid(f"function type {raw!r} is not supported (Elanus has BM25)")


def _names(value: Any, what: str) -> list[str]:
    names = [value] if isinstance(value, str) else list(value or [])
    if not all(isinstance(n, str) and n for n in names):
        raise invalid(f"function {what} must be field names")
    return names


@dataclass
class Function:
    name: str
    function_type: FunctionType
    input_field_names: list[str]
    output_field_names: list[str] = field(default_factory=list)
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.function_type = FunctionType.parse(self.function_type)
        self.input_field_names = _names(self.input_field_names, "inputs")
        self.output_field_names = _names(self.output_field_names, "outputs")
        self.params = dict(self.params or {})

    @classmethod
    def coerce(cls, fn: Any) -> Function:
        """An Elanus ``Function``, a pymilvus one, or the wire dict."""
        if isinstance(fn, Function):
            return fn
        if isinstance(fn, dict):
            return cls.from_dict(fn)
        return cls(
            name=getattr(fn, "name", ""),
            function_type=getattr(fn, "type", None) or fn.function_type,
            input_field_names=getattr(fn, "input_field_names", []),
            output_field_names=getattr(fn, "output_field_names", []),
            description=getattr(fn, "description", "") or "",
            params=getattr(fn, "params", None) or {},
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "type": self.function_type.value,
            "input_field_names": list(self.input_field_names),
            "output_field_names": list(self.output_field_names),
        }
        if self.description:
            d["description"] = self.description
        if self.params:
            d["params"] = dict(self.params)
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Function:
        if not isinstance(d, dict):
            raise invalid(f"a function must be a JSON object, got {type(d).__name__}")
        unknown = sorted(
            set(d)
            - {"name", "type", "input_field_names", "output_field_names", "description", "params"}
        )
        if unknown:
            raise invalid(f"function {d.get('name')!r}: unknown attribute(s) {', '.join(unknown)}")
        if "type" not in d:
            raise invalid(f"function {d.get('name')!r} has no 'type'")
        params = d.get("params") or {}
        if not isinstance(params, dict):
            raise invalid(f"function {d.get('name')!r}: params must be an object")
        return cls(
            name=d.get("name", ""),
            function_type=d["type"],
            input_field_names=d.get("input_field_names", []),
            output_field_names=d.get("output_field_names", []),
            description=str(d.get("description", "")),
            params=params,
        )


def check_functions(schema: SchemaView) -> None:
    """Milvus's rules for BM25 functions; raise naming the first problem."""
    if len(schema.functions) > MAX_FUNCTIONS:
        raise invalid(f"schema has {len(schema.functions)} functions; the limit is {MAX_FUNCTIONS}")
    by_name = {f.name: f for f in schema.fields}
    seen: set[str] = set()
    outputs: set[str] = set()
    for fn in schema.functions:
        if not fn.name:
            raise invalid("a function needs a name")
        if fn.name in seen:
            raise invalid(f"duplicate function name {fn.name!r}")
        seen.add(fn.name)
        where = f"BM25 function {fn.name!r}"
        if len(fn.input_field_names) != 1 or len(fn.output_field_names) != 1:
            raise invalid(f"{where} takes exactly one input field and one output field")
        if fn.params:
            raise invalid(f"{where} takes no params, got {', '.join(sorted(fn.params))}")
        src_name, out_name = fn.input_field_names[0], fn.output_field_names[0]
        if src_name == out_name:
            raise invalid(f"{where}: the input and output field are the same")
        src, out = by_name.get(src_name), by_name.get(out_name)
        if src is None:
            raise invalid(f"{where}: input field {src_name!r} does not exist")
        if out is None:
            raise invalid(f"{where}: output field {out_name!r} does not exist")
        if src.dtype != DataType.VARCHAR:
            raise invalid(
                f"{where}: input field {src_name!r} must be VarChar, not {src.dtype.value}"
            )
        if not src.enable_analyzer:
            raise invalid(f"{where}: input field {src_name!r} must set enable_analyzer")
        if out.dtype != DataType.SPARSE_FLOAT_VECTOR:
            raise invalid(
                f"{where}: output field {out_name!r} must be SparseFloatVector, "
                f"not {out.dtype.value}"
            )
        if out_name in outputs:
            raise invalid(f"field {out_name!r} is the output of more than one function")
        outputs.add(out_name)


def function_outputs(schema: SchemaView) -> dict[str, Function]:
    """Output field name -> the function that computes it."""
    return {fn.output_field_names[0]: fn for fn in schema.functions if fn.output_field_names}


def output_column(fn: Function, schema: SchemaView, text: pa.Array) -> pa.Array:
    """The BM25 output of a batch: the input field's text through its analyzer, as term
    frequencies (one vectorised pass per batch; a null or empty text gives an empty vector)."""
    from elanus.analyzer import analyzer_for

    src = next(f for f in schema.fields if f.name == fn.input_field_names[0])
    out = next(f for f in schema.fields if f.name == fn.output_field_names[0])
    analyzer = analyzer_for(src.analyzer_params, src.name)
    return analyzer.term_frequencies(text.to_pylist()).cast(out.arrow_type())


def fill_outputs(rows: Any, schema: SchemaView) -> Any:
    """``rows`` (a table or batch) with the function outputs they lack computed from
    their inputs: rows the proxy checked against the schema just before
    ``add_function_field`` added a function reach the nodes without its output."""
    for fn in schema.functions:
        out, src = fn.output_field_names[0], fn.input_field_names[0]
        names = rows.schema.names
        if out not in names and src in names:
            text = rows.column(src)
            if isinstance(text, pa.ChunkedArray):
                text = text.combine_chunks()
            rows = rows.append_column(out, output_column(fn, schema, text))
    return rows
