"""pymilvus-shaped result objects: what ``search`` and ``get_load_state`` return.

They are plain dicts and lists underneath (``hit["id"]``, ``json.dumps``, ``==`` against
literals keep working) with pymilvus's attributes on top (``hit.id``, ``hit.distance``,
``hits.ids``, ``LoadState.Loaded``), so code written for ``MilvusClient`` reads them
unchanged. Pure: no Flight, no pyarrow.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from elanus.ops.replies import LoadProgress, SearchHit, SegmentRecord


class Hit(dict[str, Any]):
    """One search hit, ``{"id", "distance", "entity"}``, as pymilvus's ``Hit``:
    ``hit.id``, ``hit.distance`` (aliases ``pk``, ``score``), ``hit.fields`` (the entity),
    and ``hit["title"]`` / ``hit.get("title")`` / ``hit.title`` reach into the entity."""

    __slots__ = ()

    def __getattr__(self, item: str) -> Any:
        if item == "entity":  # pymilvus: hit.entity is the hit itself (hit.entity.title)
            return self
        try:
            return self[item]
        except KeyError:
            raise AttributeError(item) from None

    def __getitem__(self, key: str) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            entity = super().get("entity")
            if isinstance(entity, dict) and key in entity:
                return entity[key]
            raise

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default

    @property
    def id(self) -> Any:
        return super().get("id")

    @property
    def pk(self) -> Any:
        return self.id

    @property
    def distance(self) -> Any:
        return super().get("distance")

    @property
    def score(self) -> Any:
        return self.distance

    @property
    def fields(self) -> dict[str, Any]:
        return super().get("entity") or {}

    def to_dict(self) -> Hit:
        return self


class Hits(list[Hit]):
    """The hits of one query vector, best first; ``ids`` and ``distances`` as pymilvus's."""

    def __init__(self, hits: Iterable[SearchHit | Hit] = ()) -> None:
        super().__init__(map(Hit, hits))  # a Hit of a Hit is a copy, as for any dict

    @property
    def ids(self) -> list[Any]:
        return [h.id for h in self]

    @property
    def distances(self) -> list[float]:
        return [h.distance for h in self]

    def __str__(self) -> str:
        rest = f" ... and {len(self) - 10} entities remaining" if len(self) > 10 else ""
        return f"{list.__repr__(self[:10])}{rest}"

    __repr__ = __str__


class SearchResult(list[Hits]):
    """Per query vector its ``Hits``: pymilvus's ``SearchResult`` (``recalls`` and
    ``extra`` are there for code that reads them; Elanus reports neither)."""

    def __init__(self, results: Iterable[Iterable[SearchHit | Hit]] = ()) -> None:
        super().__init__(Hits(q) for q in results)
        self.recalls: list[float] | None = None
        self.extra: dict[str, Any] = {}

    def __str__(self) -> str:
        rest = f" ... and {len(self) - 10} results remaining" if len(self) > 10 else ""
        return f"data: {[list(q) for q in self[:10]]}{rest}"

    __repr__ = __str__


class LoadState(enum.StrEnum):
    """pymilvus's ``LoadState`` members (``LoadState.Loaded``; ``str`` and ``name``
    ``"Loaded"``). A member also equals the plain string and pymilvus's member of the
    same name, so checks written either way hold."""

    NotExist = "NotExist"
    NotLoad = "NotLoad"
    Loading = "Loading"
    Loaded = "Loaded"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return str.__eq__(self, other)
        if isinstance(other, enum.Enum) and type(other).__name__ == "LoadState":
            return self.name == other.name
        return NotImplemented

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __repr__(self) -> str:
        return f"<LoadState: {self.name}>"


def load_state(reply: LoadProgress) -> LoadProgress:
    """The ``get_load_state`` reply with ``state`` a ``LoadState`` (other keys kept)."""
    try:
        return {**reply, "state": LoadState(str(reply.get("state")))}
    except ValueError:
        return reply


@dataclass
class SegmentInfo:
    """One segment as pymilvus's ``list_persistent_segments`` / ``list_loaded_segments``
    describe it (``state`` by name: Growing, Sealed, Flushing, Flushed; ``level`` as
    Milvus's ``SegmentLevel`` numbers it: 2 is L1)."""

    segment_id: int
    collection_id: int
    collection_name: str
    num_rows: int
    state: str
    partition_id: int = 0
    level: int = 0
    insert_channel: str = ""
    compaction_from: list[int] = field(default_factory=list)
    is_sorted: bool = False
    storage_version: int = 0

    @property
    def state_name(self) -> str:
        return self.state

    @classmethod
    def of(cls, segment: SegmentRecord, collection_name: str) -> SegmentInfo:
        """From one segment of the ``get_segment_info`` action."""
        return cls(
            segment_id=int(segment["segment_id"]),
            collection_id=int(segment.get("collection_id") or 0),
            collection_name=collection_name,
            num_rows=int(segment.get("num_rows") or 0),
            state=str(segment.get("state") or ""),
            partition_id=int(segment.get("partition_id") or 0),
            level=int(segment.get("level") or 0),
            insert_channel=str(segment.get("vchannel") or ""),
            compaction_from=[int(i) for i in segment.get("compacted_from") or []],
            is_sorted=bool(segment.get("is_sorted")),
        )
