"""What the proxy checks about a search before sending it, from the collection's indexes.

Milvus scores a search with the metric of the field's index: a request without
``metric_type`` takes it, and one naming another metric is refused ("metric type not
match"). A field without an index uses the collection's default metric (the one quick
setup was given), else Milvus's default (COSINE for float vectors, HAMMING for binary,
IP for sparse), unless the request names one: with no index there is nothing for it to
contradict (Milvus Lite scores unindexed fields in any metric; Milvus itself cannot load
a collection whose vector field has no index, and its quick setup makes one).

Search params (``nprobe``, ``ef``) are checked against the index's build params, and
range-search bounds against the metric, so a bad request is refused before any node
sees it.

Indexes come from the index coord, once per meta generation: creating or dropping an
index broadcasts a meta invalidation, which bumps the generation and so also retires the
search plans made before it (``flight/search/plan.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elanus import tsutil
from elanus.api.indexcoord import IndexDescription
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.expr import parse, sampled
from elanus.flight.metacache import CollectionInfo
from elanus.indexparams import MAX_EF, VECTOR_KIND, IndexSpec, search_params
from elanus.reduce import LARGER_IS_BETTER, normalize_metric
from elanus.schema import DataType, Field

MAX_NPROBE = 65536
GROUP_TYPES = frozenset(
    {DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64, DataType.BOOL, DataType.VARCHAR}
)
"""Scalar types a search may be grouped by (as Milvus allows)."""

IndexDescriber = Callable[[int], list[IndexDescription]]
"""collection id -> the coord's ``index.describe`` entries of that collection."""


class SearchIndexes:
    """The live index of each vector field, per collection, for the current generation."""

    def __init__(self, describe: IndexDescriber) -> None:
        self._describe = describe
        self._by_collection: dict[int, tuple[int, dict[str, IndexDescription]]] = {}

    def of(self, info: CollectionInfo, field: str, generation: int) -> IndexDescription | None:
        """The index on ``field`` or None; asked for at most once per collection and
        generation."""
        cached = self._by_collection.get(info.collection_id)
        if cached is None or cached[0] != generation:
            entries = self._describe(info.collection_id)
            cached = (generation, {e.field: e for e in entries})
            if len(self._by_collection) >= 1024:
                self._by_collection.clear()
            self._by_collection[info.collection_id] = cached
        return cached[1].get(field)


def default_metric(info: CollectionInfo, field: Field) -> str:
    """The metric of a field that has no index."""
    if field.dtype is DataType.BINARY_VECTOR:
        return "HAMMING"
    if field.dtype is DataType.SPARSE_FLOAT_VECTOR:
        return "IP"
    return normalize_metric(info.described.properties.get("metric_type") or "COSINE")


def resolve_metric(
    info: CollectionInfo, field: Field, index: IndexDescription | None, requested: Any
) -> str:
    """The metric a search is scored with; a requested one must be the index's. A field
    without an index is scanned exactly, in any metric asked for (as Milvus Lite does)."""
    if not requested:
        return normalize_metric(index.metric_type) if index else default_metric(info, field)
    actual = normalize_metric(requested)
    expected = normalize_metric(index.metric_type) if index else actual
    if actual != expected:
        raise invalid(
            f"metric type not match: invalid parameter[expected={expected}][actual={actual}]"
            f" (field {field.name!r} is searched with {expected})"
        )
    return actual


def check_range(metric: str, radius: Any, range_filter: Any) -> None:
    """Milvus's rules: a range needs a radius; ``range_filter`` lies on the better side."""
    if radius is None:
        if range_filter is not None:
            raise invalid("search: range_filter needs a radius (range search)")
        return
    if range_filter is None:
        return
    if metric in LARGER_IS_BETTER and not range_filter > radius:
        raise invalid(
            f"range_filter must be greater than radius for IP/COSINE "
            f"(metric {metric}: radius {radius}, range_filter {range_filter})"
        )
    if metric not in LARGER_IS_BETTER and not range_filter < radius:
        raise invalid(
            f"range_filter must be less than radius for L2/HAMMING/JACCARD "
            f"(metric {metric}: radius {radius}, range_filter {range_filter})"
        )


def check_index_params(
    field: Field, index: IndexDescription | None, params: dict[str, Any], k: int
) -> None:
    """``nprobe`` in [1, nlist] and ``ef`` in [limit, 32768] for the field's index; with
    no index (or another type) the widest ranges Milvus accepts."""
    for name, lo, hi in (("nprobe", 1, MAX_NPROBE), ("ef", 1, MAX_EF)):
        value = params.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise invalid(f"search: param {name} must be an integer, got {value!r}")
        try:
            number = int(value)
        except ValueError:
            raise invalid(f"search: param {name} must be an integer, got {value!r}") from None
        if not lo <= number <= hi:
            raise invalid(f"search: param {name} must be in [{lo}, {hi}], got {number}")
    if index is not None and field.dtype in VECTOR_KIND:
        spec = IndexSpec.from_dict(
            {
                "field_kind": VECTOR_KIND[field.dtype],
                "dim": field.dim,
                "index_type": index.index_type,
                "metric": index.metric_type,
                "params": index.params or {},
            }
        )
        search_params(spec, params, k)


def group_field(info: CollectionInfo, name: str | None) -> Field | None:
    """The scalar field a search is grouped by, checked (Milvus's types only)."""
    if name is None:
        return None
    by_name = {f.name: f for f in info.schema.fields}
    field = by_name.get(name)
    if field is None:
        raise invalid(f"group_by_field {name!r} not found in schema of {info.name!r}")
    if field.dtype not in GROUP_TYPES:
        raise invalid(
            f"group_by_field {name!r} has type {field.dtype.value}, which is not supported "
            "for group_by (Int8, Int16, Int32, Int64, Bool and VarChar are)"
        )
    return field


def check_filter(
    info: CollectionInfo, text: str | None, params: dict[str, Any], search: bool = False
) -> None:
    """A read's filter parsed against the schema: BAD_EXPRESSION before anything is sent.
    A search's may not sample (``RANDOM_SAMPLE``: Milvus documents it for queries; a
    search ranks every row its filter keeps)."""
    if text:
        expr = parse(text, info.schema, params)
        sample = sampled(expr.root) if search else None
        if sample is not None:
            raise ElanusError(
                ErrorCode.BAD_EXPRESSION,
                f"{sample.desc} samples the rows of a query; a search cannot take it "
                "(query with it, or search without it)",
            )


def check_issued(newest: Callable[[], int], ts: int, what: str) -> None:
    """Refuse a timestamp the TSO has not handed out yet (``what`` names it): a read would
    wait for it until it timed out. One within a few seconds of this proxy's clock passes
    at once; a later one is compared with a fresh TSO timestamp (``newest()``), as the
    TSO's clock may lead (all it ever handed out is below a fresh one)."""
    if tsutil.beyond_now(ts) and ts > newest():
        raise invalid(f"{what} {ts} is in the future: the cluster has handed out no such timestamp")
