"""Changes to an existing collection's fields (Milvus 2.6's schema evolution): add or drop
a field, add or drop a function with its output field. The field and function documents
are checked by the schema's own checkers (``elanus.schemachange.added_field``,
``Field``/``Function.from_dict``), called from ``check``."""

from __future__ import annotations

from typing import Annotated, Any

from elanus.errors import invalid
from elanus.functions import Function
from elanus.ops import DEFAULT_DB, CollectionName, DbName, operation
from elanus.requests import Range
from elanus.schema import Field
from elanus.schemachange import added_field


@operation("add_collection_field")
class AddCollectionField:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    field: dict[str, Any]
    """A field as in a schema: a nullable scalar (``added_field``)."""

    def check(self) -> None:
        added_field(self.field)


@operation("drop_collection_field")
class DropCollectionField:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    field_name: str | None = None
    field_id: Annotated[int, Range(1)] | None = None
    """The field by id instead of by name: exactly one of the two."""

    def check(self) -> None:
        if (self.field_name is None) == (self.field_id is None):
            raise invalid("drop_collection_field: give exactly one of 'field_name' and 'field_id'")


@operation("add_function_field")
class AddFunctionField:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    field: dict[str, Any]
    """The function's output field, as in a schema."""
    function: dict[str, Any]
    """The function, as in a schema."""

    def check(self) -> None:
        function_field(self)


@operation("drop_function_field")
class DropFunctionField:
    db: DbName = DEFAULT_DB
    collection: CollectionName
    function_name: str


def function_field(op: AddFunctionField) -> tuple[Field, Function]:
    """The output field and the function an ``add_function_field`` adds, checked."""
    field, function = Field.from_dict(op.field), Function.from_dict(op.function)
    field.validate()
    return field, function
