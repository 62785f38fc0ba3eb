"""Milvus's ``mmap.enabled`` at its three levels, kept in the collection's properties, and
what it resolves to for one index.

Milvus sets it on a collection (``alter_collection_properties``), on a field
(``alter_collection_field``) and on an index (``alter_index_properties``), each only while
the collection is released; the most specific one set wins: index, else field, else
collection (unset everywhere: off). Elanus keeps all three as collection properties, the
field's and the index's under keys of their own (:func:`field_key`, :func:`index_key`:
by index id, so a dropped index's setting never reaches an index made again under its
name); ``describe`` shows the collection's own keys only (:func:`public`).

With it on, a query node maps the index's vectors or codes from the index file instead
of reading them into memory (``elanus.index.engine.load_index``), and a field's raw
column from a copy on its disk (``segments/querynode/mappedcolumns.py``; not the primary key).
"""

from __future__ import annotations

from collections.abc import Mapping

from elanus import fieldprops, indexprops
from elanus.properties import MMAP_KEYS

KEY = "mmap.enabled"


def field_key(field: str) -> str:
    return fieldprops.stored_key(field, KEY)


def index_key(index_id: int) -> str:
    return indexprops.stored_key(index_id, KEY)


def _flag(properties: Mapping[str, str], key: str) -> bool | None:
    value = properties.get(key)
    return None if value is None else value.strip().lower() == "true"


def for_field(properties: Mapping[str, str], field: str) -> bool:
    """Whether ``field``'s raw column (no index holds it) loads mapped: the field's
    setting, else the collection's, else off."""
    return resolve(properties, field, None)


def resolve(properties: Mapping[str, str], field: str, index_id: int | None) -> bool:
    """Whether the index ``index_id`` on ``field`` loads mapped: index, else field, else
    collection setting (either of Milvus's spellings), else off."""
    for key in (
        index_key(index_id) if index_id is not None else None,
        field_key(field),
        *sorted(MMAP_KEYS),
    ):
        if key is not None and (flag := _flag(properties, key)) is not None:
            return flag
    return False


def public(properties: Mapping[str, str]) -> dict[str, str]:
    """The collection's properties without the field and index settings kept among them
    (their warm-up keys too: ``elanus.fieldprops``, ``elanus.indexprops``)."""
    return {
        k: v
        for k, v in properties.items()
        if not (fieldprops.is_stored_key(k) or indexprops.is_stored_key(k))
    }
