"""Changes to an existing collection's settings: its properties, one field's, one index's
(Milvus's alter_/drop_collection_properties, alter_collection_field,
alter_/drop_index_properties), and memory mapping at any of the three (``alter_mmap``,
``elanus.mmapsettings``).

Properties are read as they are stored (``elanus.properties.text_properties``: text, or
numbers and booleans written as text), in ``check`` and again by the executor through
``changes()``; keys to drop are each checked as a property key. The fields are in the
order the dict checkers read them, so a body's mistake is named with the same words.
"""

from __future__ import annotations

from typing import Annotated, Any

from elanus import fieldprops, indexprops
from elanus.errors import invalid
from elanus.ops import DEFAULT_DB, CollectionName, DbName, name_of, operation, shape
from elanus.properties import PropertyCheck, check_property, property_key, text_properties
from elanus.requests import Named
from elanus.schema import check_name

Changes = tuple[dict[str, str], list[str]]
"""The properties to set, as stored, and the keys to drop."""


def _any_value(key: str, value: str, what: str) -> None:
    """A field's and an index's values are checked with their keys (``check_keys``)."""


def property_changes(
    properties: dict[str, Any] | None,
    delete_keys: list[Any] | None,
    what: str,
    check: PropertyCheck = _any_value,
) -> Changes:
    """``properties`` as stored (values checked by ``check``) and ``delete_keys``, each
    checked as a property key; absent ones empty."""
    stored = text_properties(properties, what, check)
    dropped = delete_keys or []
    for key in dropped:
        property_key(key, what)
    return stored, dropped


@operation("alter_collection_properties")
class AlterCollectionProperties:
    """Set ``properties`` or remove ``delete_keys``, one or the other per request."""

    db: DbName = DEFAULT_DB
    name: CollectionName
    properties: dict[str, Any] | None = None
    delete_keys: list[Any] | None = None

    def changes(self) -> Changes:
        what = "alter_collection_properties"
        properties, dropped = property_changes(
            self.properties, self.delete_keys, what, check_property
        )
        if properties and dropped:  # as Milvus's proxy refuses both in one request
            raise invalid(f"{what}: give either 'properties' or 'delete_keys', not both")
        if not properties and not dropped:
            raise invalid(f"{what}: give 'properties' to set or 'delete_keys' to remove")
        return properties, dropped

    def check(self) -> None:
        self.changes()


@shape
class PropertyChange:
    """Properties of one part of a collection (a field, an index) to set and remove; the
    keys it may change and their values are its ``check_keys``."""

    db: DbName = DEFAULT_DB
    properties: dict[str, Any] | None = None
    delete_keys: list[Any] | None = None
    collection: CollectionName

    def changes(self) -> Changes:
        properties, dropped = property_changes(self.properties, self.delete_keys, name_of(self))
        self.check_keys(properties, dropped)
        return properties, dropped

    def check(self) -> None:
        self.changes()

    def check_keys(self, properties: dict[str, str], dropped: list[str]) -> None:
        raise NotImplementedError


@operation("alter_collection_field")
class AlterCollectionField(PropertyChange):
    field_name: Annotated[str, Named("field")]

    def check_keys(self, properties: dict[str, str], dropped: list[str]) -> None:
        fieldprops.check_keys(properties, dropped)


@operation("alter_index_properties")
class AlterIndexProperties(PropertyChange):
    index_name: Annotated[str, Named("index")]

    def check_keys(self, properties: dict[str, str], dropped: list[str]) -> None:
        indexprops.check_keys("alter_index_properties", properties, dropped)


@operation("alter_mmap")
class AlterMmap:
    db: DbName = DEFAULT_DB
    field_name: str | None = None
    index_name: str | None = None
    """At most one of the two: the field's or the index's setting, else the collection's."""
    collection: CollectionName
    enabled: bool | None = None
    """``None``: drop the setting."""

    def check(self) -> None:
        if self.field_name is not None and self.index_name is not None:
            raise invalid("alter_mmap: give 'field_name' or 'index_name', not both")
        if self.field_name is not None:
            check_name(self.field_name, "field")
        if self.index_name is not None:
            check_name(self.index_name, "index")
