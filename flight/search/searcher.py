"""What the search helpers (``bykeys``, ``text``, ``hybrid``, ``highlight``) use of the
search service: named here, so they import this and not ``service``, which imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from elanus.ops.reads import Query
from elanus.ops.search import SearchOptions

if TYPE_CHECKING:
    import pyarrow as pa

    from elanus.api.querynode import QueryNodeAPI
    from elanus.channels.bus import Bus
    from elanus.flight.metacache import CollectionInfo
    from elanus.flight.ports import ReadGate
    from elanus.flight.search.plan import SearchPlan


class Searcher(Protocol):
    """``service.QueryService``, as its helpers see it."""

    bus: Bus
    gate: ReadGate

    def route(self, info: CollectionInfo, partition_ids: list[int] | None) -> dict[str, str]:
        """vchannel -> the query node serving its delegator."""
        ...

    def node(self, node_id: str) -> QueryNodeAPI:
        """The stub of a query node's delegators."""
        ...

    def prepare_search(
        self, info: CollectionInfo, request: SearchOptions, generation: int = -1
    ) -> SearchPlan:
        """The checked parts of a search that do not depend on its vectors."""
        ...

    def search_data(self, plan: SearchPlan, data: Any) -> Any:
        """A search's ``data`` checked against its field and shaped for the segments."""
        ...

    def keyed_search_data(self, plan: SearchPlan, ids: list[Any]) -> tuple[SearchPlan, Any]:
        """A search by primary keys: the plan pinned to the keys' read and their vectors."""
        ...

    def run_search(self, plan: SearchPlan, queries: Any) -> tuple[dict[str, Any], int]:
        """One search across shards: (merged part, read timestamp)."""
        ...

    def query_table(
        self, info: CollectionInfo, request: Query, read_ts: int = 0
    ) -> tuple[pa.Table, list[str], int]:
        """A query's rows as Arrow, the output names and the read timestamp (``read_ts``,
        if given)."""
        ...
