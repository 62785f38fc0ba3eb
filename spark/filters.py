"""Spark's pushed-down filters as Elanus filter expressions.

Values travel as expression parameters (``{__spark3}``), never spliced into the text, so
quotes and wildcards in strings cannot change the expression. Only plain scalar columns
are translated (Bool, integers, Float, Double, VarChar); filters on JSON, arrays, vectors,
``$meta``, nested paths or with values of another type are handed back to Spark.

Null semantics match Spark's: comparisons with a null column are null (the row is
dropped, also under ``not``), ``EqualNullSafe`` is never null.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from elanus.schema import INT_TYPES, DataType, Field, Schema

PARAM_PREFIX = "__spark"
_COMPARE: dict[type[Filter], str] = {
    EqualTo: "==",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}
_SCALAR_TYPES = {*INT_TYPES, DataType.BOOL, DataType.FLOAT, DataType.DOUBLE, DataType.VARCHAR}


class Translator:
    """Turns filters into expression text, collecting the parameter values they use."""

    def __init__(self, schema: Schema, params: dict[str, Any] | None = None) -> None:
        self.fields = {f.name: f for f in schema.fields if f.dtype in _SCALAR_TYPES}
        self.params: dict[str, Any] = dict(params or {})

    def _param(self, value: Any) -> str:
        name = f"{PARAM_PREFIX}{len(self.params)}"
        while name in self.params:
            name += "_"
        self.params[name] = value
        return "{" + name + "}"

    def _field(self, attribute: tuple[str, ...]) -> Field | None:
        return self.fields.get(attribute[0]) if len(attribute) == 1 else None

    def translate(self, f: Filter) -> str | None:
        """The expression for ``f``, or None when it cannot be pushed down."""
        if isinstance(f, Not):
            inner = self.translate(f.child)
            return None if inner is None else f"not ({inner})"
        field = self._field(getattr(f, "attribute", ()))
        if field is None:
            return None
        name = field.name
        if isinstance(f, IsNull):
            return f"{name} is null"
        if isinstance(f, IsNotNull):
            return f"{name} is not null"
        if isinstance(f, EqualNullSafe):
            if f.value is None:
                return f"{name} is null"
            if not _fits(field, f.value):
                return None
            return f"({name} is not null and {name} == {self._param(f.value)})"
        op = _COMPARE.get(type(f))
        if op is not None:
            value = getattr(f, "value", None)
            if not _fits(field, value):
                return None
            return f"{name} {op} {self._param(value)}"
        if isinstance(f, In):
            values = list(f.value)
            if not values or not all(_fits(field, v) for v in values):
                return None
            return f"{name} in {self._param(values)}"
        if isinstance(f, StringStartsWith | StringEndsWith | StringContains):
            if field.dtype is not DataType.VARCHAR or not isinstance(f.value, str):
                return None
            text = _escape_like(f.value)
            pattern = {
                StringStartsWith: f"{text}%",
                StringEndsWith: f"%{text}",
                StringContains: f"%{text}%",
            }[type(f)]
            return f"{name} like {self._param(pattern)}"
        return None


def _fits(field: Field, value: Any) -> bool:
    """Whether a Spark literal compares with the column the way Spark compares it."""
    dt = field.dtype
    if value is None:
        return False
    if dt is DataType.BOOL:
        return isinstance(value, bool)
    if dt in INT_TYPES:
        return isinstance(value, int) and not isinstance(value, bool)
    if dt in (DataType.FLOAT, DataType.DOUBLE):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str)


def _escape_like(text: str) -> str:
    """A literal for a ``like`` pattern: backslash, ``%`` and ``_`` escaped."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def translate_all(
    filters: list[Filter], schema: Schema, params: dict[str, Any] | None = None
) -> tuple[list[str], dict[str, Any], list[Filter]]:
    """(pushed expressions, their parameters, filters handed back to Spark)."""
    t = Translator(schema, params)
    pushed: list[str] = []
    rejected: list[Filter] = []
    for f in filters:
        text = t.translate(f)
        if text is None:
            rejected.append(f)
        else:
            pushed.append(text)
    return pushed, t.params, rejected
