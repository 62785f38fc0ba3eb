"""Writes by action: ``delete`` (inserts and upserts are DoPut streams, ``putcommand``)."""

from __future__ import annotations

from typing import Any

from elanus.errors import invalid
from elanus.ops import InCollection, operation
from elanus.schema import check_name

MAX_DELETE_KEYS = 1_000_000


@operation("delete")
class Delete(InCollection):
    """Delete by primary keys or by a filter (the keys it matches at a fresh timestamp)."""

    ids: list[Any] | None = None
    filter: str | None = None
    """Empty as absent."""
    filter_params: dict[str, Any] | None = None
    partition: str | None = None
    """Empty as absent (the default partition's rows are deleted with the rest)."""

    def check(self) -> None:
        if (self.ids is None) == (not self.filter):
            raise invalid("delete: give exactly one of 'ids' and 'filter'")
        if self.ids is not None and not self.ids:
            raise invalid("delete: 'ids' is empty")
        if self.ids is not None and len(self.ids) > MAX_DELETE_KEYS:
            raise invalid(f"delete: at most {MAX_DELETE_KEYS} ids per request, got {len(self.ids)}")
        if self.partition:
            check_name(self.partition, "partition")
