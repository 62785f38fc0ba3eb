"""Collection schemas: data types, fields, and the proxy's static checks (seed 000 §6).

A schema travels as JSON (``Schema.to_dict``/``from_dict``) between the SDK, the proxy and
the coord, and maps onto an Arrow schema (``Schema.to_arrow``) for inserts and segments.
Everything here is pure: no I/O, importable by every package.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from elanus.analyzer import check_params
from elanus.datatypes import (  # noqa: F401 - re-exported: the types belong to schemas
    _ARROW_SCALARS,
    ARRAY_ELEMENT_TYPES,
    DENSE_FLOAT_TYPES,
    FLOAT32_MAX,
    INT_RANGES,
    INT_TYPES,
    SPARSE_ARROW_TYPE,
    VECTOR_TYPES,
    DataType,
)
from elanus.errors import invalid
from elanus.functions import Function, check_functions

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME_LENGTH = 255
MAX_FIELDS = 64
MAX_VECTOR_FIELDS = 4
MAX_DIM = 32768
MIN_FLOAT_DIM = 2
"""Milvus's smallest dimension of a float (float16, bfloat16) vector field."""
MAX_VARCHAR_LENGTH = 65535
MAX_ARRAY_CAPACITY = 4096
MAX_SHARDS = 16
MAX_DESCRIPTION = 1024
CLUSTERING_KEY_TYPES = frozenset({*INT_TYPES, DataType.FLOAT, DataType.DOUBLE, DataType.VARCHAR})
"""Milvus's clustering key types, less FloatVector (Milvus's own default refuses it too)."""
DEFAULT_DB = "default"
DEFAULT_PARTITION = "_default"
TIMESTAMP_FIELD = "_ts"
DYNAMIC_FIELD = "$meta"
TIMESTAMP_ARROW_FIELD = pa.field(TIMESTAMP_FIELD, pa.uint64(), nullable=False)
"""A row's insert timestamp as segments store it."""
RESERVED_NAMES = frozenset({TIMESTAMP_FIELD, "_row_id", "_rowid", "_segment", DYNAMIC_FIELD})
TYPE_KEY = b"elanus.type"
"""Arrow field metadata of every column Elanus types: the field's Milvus data type."""
FIELD_ID_KEY = b"elanus.field_id"
"""Arrow field metadata: the id of the field a column belongs to (``Field.id_tagged``)."""
PK_COLUMN = "pk"
"""The key column of delete records (``pk``, ``ts``) and of key batches, whatever the
primary field is called: delete messages, delta logs, snapshot reads, import key plans."""


@dataclass
class Field:
    """One column of a collection. ``field_id`` is assigned by the coord."""

    name: str
    dtype: DataType
    is_primary: bool = False
    auto_id: bool = False
    dim: int | None = None
    max_length: int | None = None
    element_type: DataType | None = None
    max_capacity: int | None = None
    nullable: bool = False
    default_value: Any = None
    description: str = ""
    is_partition_key: bool = False
    is_clustering_key: bool = False
    field_id: int | None = None
    enable_analyzer: bool = False
    analyzer_params: dict[str, Any] | None = None
    enable_match: bool = False
    id_tagged: bool = field(default=False, compare=False, repr=False)
    """Its Arrow columns carry its field id (``FIELD_ID_KEY``): set by ``Schema`` for a
    field whose name a dropped field had, so the dropped field's stored column, of the
    same name, never reads as this one's (``segments.storage.conform``)."""

    def __post_init__(self) -> None:
        self.dtype = DataType.parse(self.dtype)
        if self.element_type is not None:
            self.element_type = DataType.parse(self.element_type)

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "type": self.dtype.value}
        if self.field_id is not None:
            d["field_id"] = self.field_id
        for key in ("is_primary", "auto_id", "is_partition_key", "is_clustering_key"):
            if getattr(self, key):
                d[key] = True
        for key in ("dim", "max_length", "max_capacity"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if self.element_type is not None:
            d["element_type"] = self.element_type.value
        if self.nullable:
            d["nullable"] = True
        if self.default_value is not None:
            d["default_value"] = self.default_value
        if self.description:
            d["description"] = self.description
        for key in ("enable_analyzer", "enable_match"):
            if getattr(self, key):
                d[key] = True
        if self.analyzer_params is not None:
            d["analyzer_params"] = self.analyzer_params
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Field:
        if not isinstance(d, dict):
            raise invalid(f"a field must be a JSON object, got {type(d).__name__}")
        known = {
            "name",
            "type",
            "dtype",
            "field_id",
            "is_primary",
            "auto_id",
            "dim",
            "max_length",
            "element_type",
            "max_capacity",
            "nullable",
            "default_value",
            "description",
            "enable_analyzer",
            "analyzer_params",
            "enable_match",
            "is_partition_key",
            "is_clustering_key",
        }
        unknown = sorted(set(d) - known)
        if unknown:
            raise invalid(f"field {d.get('name')!r}: unknown attribute(s) {', '.join(unknown)}")
        if "name" not in d:
            raise invalid("a field has no 'name'")
        type_value = d.get("type", d.get("dtype"))
        if type_value is None:
            raise invalid(f"field {d['name']!r} has no 'type'")
        return cls(
            name=d["name"],
            dtype=DataType.parse(type_value),
            is_primary=bool(d.get("is_primary", False)),
            auto_id=bool(d.get("auto_id", False)),
            dim=_opt_int(d, "dim"),
            max_length=_opt_int(d, "max_length"),
            element_type=DataType.parse(d["element_type"]) if d.get("element_type") else None,
            max_capacity=_opt_int(d, "max_capacity"),
            nullable=bool(d.get("nullable", False)),
            default_value=d.get("default_value"),
            description=str(d.get("description", "")),
            is_partition_key=bool(d.get("is_partition_key", False)),
            is_clustering_key=bool(d.get("is_clustering_key", False)),
            field_id=_opt_int(d, "field_id"),
            enable_analyzer=bool(d.get("enable_analyzer", False)),
            analyzer_params=d.get("analyzer_params"),
            enable_match=bool(d.get("enable_match", False)),
        )

    # -- Arrow ------------------------------------------------------------------------------
    def arrow_type(self) -> pa.DataType:
        dt = self.dtype
        if dt in _ARROW_SCALARS:
            return _ARROW_SCALARS[dt]
        if dt == DataType.FLOAT_VECTOR:
            return pa.list_(pa.float32(), self.dim or 0)
        if dt == DataType.FLOAT16_VECTOR:
            return pa.list_(pa.float16(), self.dim or 0)
        if dt == DataType.BFLOAT16_VECTOR:  # bit patterns: see elanus/bfloat16.py
            return pa.list_(pa.uint16(), self.dim or 0)
        if dt == DataType.BINARY_VECTOR:
            return pa.binary((self.dim or 0) // 8)
        if dt == DataType.SPARSE_FLOAT_VECTOR:
            return SPARSE_ARROW_TYPE
        if dt == DataType.ARRAY:
            assert self.element_type is not None
            return pa.list_(_ARROW_SCALARS[self.element_type])
        raise invalid(f"no Arrow type for {dt}")

    def arrow_field(self) -> pa.Field:
        meta = {TYPE_KEY: self.dtype.value.encode()}
        if self.dtype == DataType.JSON:
            meta[b"elanus.json"] = b"1"
        if self.id_tagged and self.field_id is not None:
            meta[FIELD_ID_KEY] = str(self.field_id).encode()
        return pa.field(self.name, self.arrow_type(), nullable=self.nullable, metadata=meta)

    # -- static checks ----------------------------------------------------------------------
    def validate(self) -> None:
        check_name(self.name, "field")
        if self.name in RESERVED_NAMES:
            raise invalid(f"field name {self.name!r} is reserved")
        dt = self.dtype
        if self.is_primary:
            if dt not in (DataType.INT64, DataType.VARCHAR):
                raise invalid(
                    f"primary key field {self.name!r} must be Int64 or VarChar, not {dt.value}"
                )
            if self.nullable:
                raise invalid(f"primary key field {self.name!r} cannot be nullable")
            if self.default_value is not None:
                raise invalid(f"primary key field {self.name!r} cannot have a default value")
            if self.auto_id and dt != DataType.INT64:
                raise invalid(f"auto_id needs an Int64 primary key; {self.name!r} is {dt.value}")
        elif self.auto_id:
            raise invalid(f"auto_id is only allowed on the primary key, not on {self.name!r}")
        if self.is_partition_key:
            self._check_partition_key()
        if self.is_clustering_key and (self.is_primary or dt not in CLUSTERING_KEY_TYPES):
            what = "the primary key" if self.is_primary else f"a {dt.value} field"
            raise invalid(
                f"clustering key field {self.name!r} cannot be {what}: a clustering key is "
                "a scalar field other than the primary key (Int8/16/32/64, Float, Double, VarChar)"
            )
        if dt in DENSE_FLOAT_TYPES or dt == DataType.BINARY_VECTOR:
            if self.dim is None:
                raise invalid(f"vector field {self.name!r} needs a 'dim'")
            low = 1 if dt == DataType.BINARY_VECTOR else MIN_FLOAT_DIM
            if not low <= self.dim <= MAX_DIM:
                raise invalid(
                    f"vector field {self.name!r}: dim {self.dim} is out of range [{low}, {MAX_DIM}]"
                )
            if dt == DataType.BINARY_VECTOR and self.dim % 8:
                raise invalid(
                    f"binary vector field {self.name!r}: dim {self.dim} is not a multiple of 8"
                )
        elif self.dim is not None:
            raise invalid(f"field {self.name!r} of type {dt.value} takes no 'dim'")
        if dt.is_vector and (self.nullable or self.default_value is not None):
            raise invalid(f"vector field {self.name!r} cannot be nullable or have a default")
        varchar_elements = dt == DataType.ARRAY and self.element_type == DataType.VARCHAR
        if dt == DataType.VARCHAR or varchar_elements:
            if self.max_length is None:
                raise invalid(f"VarChar field {self.name!r} needs a 'max_length'")
            if not 1 <= self.max_length <= MAX_VARCHAR_LENGTH:
                raise invalid(
                    f"field {self.name!r}: max_length {self.max_length} is out of range "
                    f"[1, {MAX_VARCHAR_LENGTH}]"
                )
        elif self.max_length is not None:
            raise invalid(f"field {self.name!r} of type {dt.value} takes no 'max_length'")
        if dt == DataType.ARRAY:
            if self.element_type is None:
                raise invalid(f"array field {self.name!r} needs an 'element_type'")
            if self.element_type not in ARRAY_ELEMENT_TYPES:
                raise invalid(
                    f"array field {self.name!r}: element type {self.element_type.value} "
                    "is not allowed"
                )
            if self.max_capacity is None or not 1 <= self.max_capacity <= MAX_ARRAY_CAPACITY:
                raise invalid(
                    f"array field {self.name!r}: max_capacity must be in [1, {MAX_ARRAY_CAPACITY}]"
                )
        elif self.element_type is not None or self.max_capacity is not None:
            raise invalid(f"field {self.name!r} of type {dt.value} takes no element type/capacity")
        if self.default_value is not None:
            self._check_default()
        self._check_text()

    def _check_text(self) -> None:
        """Milvus's rules for analysed text: VarChar only; matching needs the analyzer."""
        text = self.enable_analyzer or self.enable_match or self.analyzer_params is not None
        if text and self.dtype != DataType.VARCHAR:
            raise invalid(
                f"field {self.name!r}: enable_analyzer, enable_match and analyzer_params need a "
                f"VarChar field, not {self.dtype.value}"
            )
        if self.enable_match and not self.enable_analyzer:
            raise invalid(f"field {self.name!r}: enable_match needs enable_analyzer")
        if self.analyzer_params is not None and not self.enable_analyzer:
            raise invalid(f"field {self.name!r}: analyzer_params need enable_analyzer")
        if self.enable_analyzer:
            check_params(self.analyzer_params, self.name)  # kept as given, as Milvus echoes it

    def _check_partition_key(self) -> None:
        """Milvus's rules: rows are routed by the key's hash, so it is an Int64 or VarChar
        value every row has, and not the primary key (that is already hashed to shards)."""
        if self.is_primary:
            raise invalid(f"the partition key field {self.name!r} cannot be the primary key")
        if self.dtype not in (DataType.INT64, DataType.VARCHAR):
            raise invalid(
                f"partition key field {self.name!r} must be Int64 or VarChar, "
                f"not {self.dtype.value}"
            )
        if self.nullable:
            raise invalid(f"partition key field {self.name!r} cannot be nullable")

    def _check_default(self) -> None:
        """Milvus's rules for ``default_value``: scalar fields only (not the primary key,
        vectors, JSON or Array), a value of the field's own type that fits its limits, so
        a row that takes the default can always be stored."""
        v, dt, name = self.default_value, self.dtype, self.name
        if dt in (DataType.JSON, DataType.ARRAY):
            raise invalid(f"field {name!r}: {dt.value} fields do not support default values")
        if dt == DataType.BOOL:
            fits = isinstance(v, bool)
        elif dt == DataType.VARCHAR:
            fits = isinstance(v, str)
        else:
            fits = isinstance(v, int | float) and not isinstance(v, bool)
            if dt in INT_TYPES:
                fits = fits and isinstance(v, int)
        if not fits:
            raise invalid(
                f"default value {_short(v)} of field {name!r} is not {_kind_of(dt)} "
                f"(the field is {dt.value})"
            )
        if dt in INT_TYPES:
            lo, hi = INT_RANGES[dt]
            if not lo <= v <= hi:
                raise invalid(
                    f"default value {v} of field {name!r} is out of the {dt.value} range "
                    f"[{lo}, {hi}]"
                )
        elif dt in (DataType.FLOAT, DataType.DOUBLE):
            limit = FLOAT32_MAX if dt == DataType.FLOAT else sys.float_info.max
            if not math.isfinite(v) or abs(v) > limit:
                raise invalid(
                    f"default value {v!r} of field {name!r} is not a finite {dt.value} "
                    f"(|value| <= {limit:g})"
                )
        elif dt == DataType.VARCHAR and len(v.encode()) > (self.max_length or 0):
            raise invalid(
                f"default value of field {name!r} is {len(v.encode())} bytes long; "
                f"the field's max_length is {self.max_length}"
            )


_FIELD_KEYWORDS = frozenset(f.name for f in fields(Field)) - {
    "name",
    "dtype",
    "field_id",
    "id_tagged",
}
"""What ``Schema.add_field`` takes as keywords: the settings of a ``Field``."""


@dataclass
class Schema:
    fields: list[Field] = field(default_factory=list)
    enable_dynamic_field: bool = False
    description: str = ""
    auto_id: bool = field(default=False, compare=False, repr=False)
    """pymilvus's schema-level ``auto_id``: the default of the primary field added later."""
    functions: list[Function] = field(default_factory=list)
    version: int = field(default=0, compare=False)
    """Bumped by each change to the fields of an existing collection (add_collection_field,
    drop_collection_field), so a node holding two copies of a schema keeps the newer."""
    dropped: dict[int, str] = field(default_factory=dict, compare=False)
    """Fields dropped from the collection, id to name: their ids are never given again
    (Milvus keeps ``max_field_id`` for that) and their segments' columns are never read
    (a field added later under the same name is ``id_tagged``)."""

    def __post_init__(self) -> None:
        self.tag_reused_names()

    def tag_reused_names(self) -> None:
        """Mark the fields whose names a dropped field had (``Field.id_tagged``)."""
        names = set(self.dropped.values())
        for f in self.fields:  # a name may not be a string yet: validate() refuses it
            f.id_tagged = isinstance(f.name, str) and f.name in names

    @property
    def max_field_id(self) -> int | None:
        """The highest field id given in this collection, dropped fields included."""
        ids = [f.field_id for f in self.fields if f.field_id is not None] + list(self.dropped)
        return max(ids, default=None)

    def add_field(self, field_name: str, datatype: DataType | str, **kwargs: Any) -> Schema:
        """pymilvus-style builder: ``schema.add_field("id", DataType.INT64, is_primary=True)``.
        A keyword Elanus has no field setting for is refused by name."""
        unknown = sorted(set(kwargs) - _FIELD_KEYWORDS)
        if unknown:
            raise invalid(f"add_field does not support {', '.join(map(repr, unknown))}")
        if kwargs.get("is_primary") and "auto_id" not in kwargs:
            kwargs["auto_id"] = self.auto_id
        self.fields.append(Field(name=field_name, dtype=DataType.parse(datatype), **kwargs))
        return self

    def add_function(self, function: Any) -> Schema:
        """pymilvus-style: ``schema.add_function(Function(..., FunctionType.BM25, ...))``."""
        self.functions.append(Function.coerce(function))
        return self

    def function_output(self, name: str) -> Function | None:
        """The function computing field ``name``, if any (its values are never given)."""
        for fn in self.functions:
            if name in fn.output_field_names:
                return fn
        return None

    @property
    def primary(self) -> Field:
        for f in self.fields:
            if f.is_primary:
                return f
        raise invalid("schema has no primary key field")

    @property
    def partition_key(self) -> Field | None:
        """The field rows are routed to partitions by, if the collection has one."""
        return next((f for f in self.fields if f.is_partition_key), None)

    @property
    def clustering_key(self) -> Field | None:
        """The field clustering compaction orders rows by, if the collection has one."""
        return next((f for f in self.fields if f.is_clustering_key), None)

    @property
    def vector_fields(self) -> list[Field]:
        return [f for f in self.fields if f.dtype.is_vector]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise invalid(f"field {name!r} does not exist")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "fields": [f.to_dict() for f in self.fields],
            "enable_dynamic_field": self.enable_dynamic_field,
            "description": self.description,
        }
        if self.functions:
            d["functions"] = [fn.to_dict() for fn in self.functions]
        if self.version:
            d["version"] = self.version
        if self.dropped:
            d["dropped_fields"] = {str(k): v for k, v in sorted(self.dropped.items())}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Schema:
        if not isinstance(d, dict):
            raise invalid("schema must be a JSON object with a 'fields' list")
        fields = d.get("fields")
        if not isinstance(fields, list):
            raise invalid("schema must have a 'fields' list")
        functions = d.get("functions") or []
        if not isinstance(functions, list):
            raise invalid("schema 'functions' must be a list")
        return cls(
            fields=[Field.from_dict(f) for f in fields],
            enable_dynamic_field=bool(d.get("enable_dynamic_field", False)),
            description=str(d.get("description", "")),
            functions=[Function.from_dict(fn) for fn in functions],
            version=_opt_int(d, "version") or 0,
            dropped=_dropped(d.get("dropped_fields")),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_arrow(self, *, with_ts: bool = False, with_dynamic: bool = True) -> pa.Schema:
        """Arrow schema of the user's columns (plus ``_ts`` as stored in segments)."""
        cols = [f.arrow_field() for f in self.fields]
        if with_dynamic and self.enable_dynamic_field:
            cols.append(pa.field(DYNAMIC_FIELD, pa.string(), nullable=True))
        if with_ts:
            cols.append(TIMESTAMP_ARROW_FIELD)
        return pa.schema(cols)

    def validate(self) -> None:
        """The proxy's static checks for create_collection; raise naming the first problem."""
        if len(self.description) > MAX_DESCRIPTION:
            raise invalid(f"schema description is longer than {MAX_DESCRIPTION} characters")
        if not self.fields:
            raise invalid("schema has no fields")
        if len(self.fields) > MAX_FIELDS:
            raise invalid(f"schema has {len(self.fields)} fields; the limit is {MAX_FIELDS}")
        seen: set[str] = set()
        for f in self.fields:
            check_name(f.name, "field")
            if f.name in seen:
                raise invalid(f"duplicate field name {f.name!r}")
            seen.add(f.name)
            f.validate()
        primaries = [f.name for f in self.fields if f.is_primary]
        if len(primaries) != 1:
            raise invalid(
                "schema must have exactly one primary key field, found "
                f"{len(primaries)}" + (f" ({', '.join(primaries)})" if primaries else "")
            )
        keys = [f.name for f in self.fields if f.is_partition_key]
        if len(keys) > 1:
            raise invalid(
                f"schema has {len(keys)} partition key fields ({', '.join(keys)}); "
                "at most one is allowed"
            )
        clustering = [f.name for f in self.fields if f.is_clustering_key]
        if len(clustering) > 1:
            raise invalid(
                f"schema has {len(clustering)} clustering key fields ({', '.join(clustering)}); "
                "at most one is allowed"
            )
        vectors = self.vector_fields
        if not vectors:
            raise invalid("schema must have at least one vector field")
        if len(vectors) > MAX_VECTOR_FIELDS:
            raise invalid(
                f"schema has {len(vectors)} vector fields; the limit is {MAX_VECTOR_FIELDS}"
            )
        check_functions(self)


def _dropped(raw: Any) -> dict[int, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise invalid("schema 'dropped_fields' must map field ids to names")
    try:
        return {int(k): v for k, v in raw.items()}
    except ValueError:
        raise invalid("schema 'dropped_fields' must map field ids to names") from None


def check_name(name: Any, what: str) -> str:
    """Milvus naming rules: a letter or underscore, then letters, digits, underscores."""
    if not isinstance(name, str) or not name:
        raise invalid(f"{what} name must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise invalid(f"{what} name {name[:40]!r}... is longer than {MAX_NAME_LENGTH} characters")
    if not NAME_RE.match(name):
        raise invalid(
            f"{what} name {name!r} is invalid: use letters, digits and underscores, "
            "starting with a letter or underscore"
        )
    return name


def quick_schema(
    dimension: int,
    *,
    primary_field: str = "id",
    vector_field: str = "vector",
    id_type: str = "int64",
    auto_id: bool = False,
    max_length: int = 512,
    enable_dynamic_field: bool = True,
) -> Schema:
    """The schema of ``create_collection(name, dimension=...)`` (pymilvus's quick setup)."""
    if id_type.lower() in ("int64", "int"):
        pk = Field(primary_field, DataType.INT64, is_primary=True, auto_id=auto_id)
    elif id_type.lower() in ("varchar", "string", "str"):
        pk = Field(
            primary_field, DataType.VARCHAR, is_primary=True, auto_id=auto_id, max_length=max_length
        )
    else:
        raise invalid(f"id_type must be 'int64' or 'varchar', not {id_type!r}")
    vec = Field(vector_field, DataType.FLOAT_VECTOR, dim=dimension)
    return Schema([pk, vec], enable_dynamic_field=enable_dynamic_field)


def _opt_int(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise invalid(f"{key} must be an integer, got {v!r}")
    try:
        return int(v)
    except ValueError:
        raise invalid(f"{key} must be an integer, got {v!r}") from None


def _kind_of(dt: DataType) -> str:
    if dt == DataType.BOOL:
        return "a boolean"
    if dt == DataType.VARCHAR:
        return "a string"
    return "an integer" if dt in INT_TYPES else "a number"


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
