"""Loads: a collection's place in the query nodes' memory (load, release, state, replicas)."""

from __future__ import annotations

from typing import Annotated, Any

from elanus.ops import InCollection, operation
from elanus.requests import Range
from elanus.schema import check_name

MAX_REPLICAS = 100
"""In-memory copies a load may ask for; the query coord's API holds loads to it too."""


@operation("load_collection")
class LoadCollection(InCollection):
    partition_names: list[Any] | None = None
    """Absent: the whole collection; each name held to the naming rules in ``check`` (the
    dict checker's words for a name that is not a string); empty: as absent."""
    replica_number: Annotated[int, Range(1, MAX_REPLICAS)] | None = None
    """Absent: the database's ``database.replica.number``, else 1."""

    def check(self) -> None:
        for name in self.partition_names or ():
            check_name(name, "partition")


@operation("release_collection")
class ReleaseCollection(InCollection):
    pass


@operation("get_load_state")
class GetLoadState(InCollection):
    pass


@operation("describe_replica")
class DescribeReplica(InCollection):
    pass
