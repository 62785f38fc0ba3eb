"""What changing an existing collection's fields needs beyond the schema itself (Milvus
2.6's schema evolution): the field ``add_collection_field`` may add, and which stored
column is a field's once a field of its name was dropped (``Field.id_tagged``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from elanus.errors import invalid
from elanus.schema import FIELD_ID_KEY, TYPE_KEY, Field


def column_of_field(column: pa.Field, field_id: bytes | None) -> bool:
    """Whether a stored column is the field of its name, whose ``FIELD_ID_KEY`` is
    ``field_id`` (``None``: a field no dropped field shared its name with, which any
    column of its name is). A column Elanus typed (``Field.arrow_field``) must carry that
    id, or it is a dropped namesake's; a client's column (an import file's, a batch
    rebuilt by name) carries no Elanus metadata and is the field of its name."""
    meta = column.metadata or {}
    return field_id is None or TYPE_KEY not in meta or meta.get(FIELD_ID_KEY) == field_id


ADDED_FIELD_REFUSED = (
    ("is_primary", "a primary key"),
    ("auto_id", "an auto_id field"),
    ("is_partition_key", "a partition key"),
    ("is_clustering_key", "a clustering key"),
)
"""Roles a field can only take when its collection is created (Milvus 2.6's rules)."""


def added_field(raw: Any) -> Field:
    """The field ``add_collection_field`` may add to a collection that already has rows:
    a nullable scalar (those rows read null, or its default), never a key or a vector.
    Raises naming the problem; the coord then checks it against the collection."""
    if not isinstance(raw, dict):
        raise invalid(f"add_collection_field: 'field' must be a JSON object, got {raw!r:.40}")
    name = raw.get("name")
    for key, what in ADDED_FIELD_REFUSED:
        if raw.get(key):
            raise invalid(
                f"add_collection_field: field {name!r} cannot be {what}: a collection's "
                "keys are fixed when it is created"
            )
    f = Field.from_dict({k: v for k, v in raw.items() if k not in dict(ADDED_FIELD_REFUSED)})
    f.field_id = None  # the coord numbers it
    if f.dtype.is_vector:
        raise invalid(
            f"add_collection_field: field {f.name!r} is a {f.dtype.value}: only scalar fields "
            "can be added to an existing collection"
        )
    f.validate()
    if not f.nullable:
        raise invalid(
            f"add_collection_field: field {f.name!r} must be nullable (nullable=True): the "
            "rows already in the collection have no value for it"
        )
    return f
