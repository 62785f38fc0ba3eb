"""The paging iterators of the SDK (mixed into ``Client``): ``query_iterator`` walks rows in
primary-key order and ``search_iterator`` walks hits in distance order. Both pin every page
to the read timestamp of their first call (``as_of``), so a walk sees one snapshot of the
collection however long it takes and whatever is written meanwhile: no row twice, none
skipped.

A search walk is a chain of exact range searches. Each page asks for the hits at or beyond
the previous page's last distance (``range_filter``, on the near side of the range) and
leaves out, by primary key, the hits already returned at that distance, so ties split across
pages are neither repeated nor lost. The way "beyond" points comes from the ``metric_type``
the server reports. docs/protocol.md ("Iterators") gives the same recipe for any Flight
client.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, TypeVar

from elanus.client.compat import QueryIterator, SearchIterator, reject_unknown
from elanus.client.read import ReadAPI
from elanus.errors import ElanusError, ErrorCode
from elanus.ops.reads import Query
from elanus.ops.replies import SearchHit
from elanus.reduce import LARGER_IS_BETTER

T = TypeVar("T")
MAX_BATCH_SIZE = 16384  # Milvus's (and the search action's) largest page
FAR = 3.0e38  # a radius every finite float32 distance lies inside
TIE_TOLERANCE = 1e-5
"""Relative slack on a page's boundary distance. A row's distance is recomputed on every
page; if its segment changed meanwhile (a growing segment flushed, a segment compacted)
the product that computes it can round differently, by a few float32 ulps. The next page
starts this much before the boundary and leaves out every returned key within it, so such
a drift cannot drop a row or repeat one."""
SEEN = "__elanus_iter_seen"  # the filter parameter holding the keys already returned


def _invalid(message: str) -> ElanusError:
    return ElanusError(ErrorCode.INVALID_ARGUMENT, message)


def _one_vector(data: Any) -> list[Any]:
    """``data`` as a one-element list of query vectors; a search iterator walks one query."""
    if data is None:
        raise _invalid("search_iterator needs a query vector ('data')")
    vectors = (
        data.tolist()
        if hasattr(data, "tolist")
        else [v.tolist() if hasattr(v, "tolist") else v for v in data]
    )
    if vectors and isinstance(vectors[0], int | float) and not isinstance(vectors[0], bool):
        raise _invalid("search_iterator: 'data' must be a list holding one query vector")
    if len(vectors) != 1:
        raise _invalid(
            f"search_iterator walks exactly one query vector, got {len(vectors)} "
            "(run one iterator per query vector)"
        )
    return vectors


def _check_paging(method: str, batch_size: Any, limit: Any) -> int | None:
    """pymilvus's bounds: ``batch_size`` in [1, 16384], ``limit`` -1 (all) or more. The
    limit as a number of rows, or None for all."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise _invalid(f"{method}: batch_size must be an integer, got {batch_size!r}")
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise _invalid(f"{method}: batch_size must lie in [1, {MAX_BATCH_SIZE}], got {batch_size}")
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < -1:
        raise _invalid(f"{method}: limit must be -1 (every result) or at least 0, got {limit!r}")
    return None if limit == -1 else limit


def _range_of(search_params: dict[str, Any]) -> tuple[dict[str, Any], Any, Any]:
    """The search params without their range bounds, and the caller's radius and
    range_filter (top level or inside ``params``, as pymilvus sends them)."""
    params = dict(search_params)
    inner = dict(params.get("params") or {})
    radius = params.pop("radius", inner.pop("radius", None))
    range_filter = params.pop("range_filter", inner.pop("range_filter", None))
    inner.pop("radius", None)
    inner.pop("range_filter", None)
    if "params" in params:
        params["params"] = inner
    return params, radius, range_filter


class IteratorAPI(ReadAPI):
    def query_iterator(
        self,
        collection_name: str,
        batch_size: int = 1000,
        limit: int | None = -1,
        filter: str = "",
        output_fields: list[str] | None = None,
        partition_names: list[str] | None = None,
        timeout: float | None = None,
        *,
        filter_params: dict[str, Any] | None = None,
        consistency_level: str | None = None,
        db: str | None = None,
        **kwargs: Any,
    ) -> QueryIterator:
        """Pages of rows in primary-key order, all read at the first page's timestamp, so
        results of any size stream without holding them all (pymilvus's query_iterator:
        ``next()`` until it returns ``[]``, or iterate it). ``limit=-1``: every row. The
        first page is read here, so a bad request fails here."""
        reject_unknown("query_iterator", kwargs)
        rows = _check_paging("query_iterator", batch_size, limit)
        pages = self._row_pages(
            collection_name,
            batch_size,
            rows,
            filter or "",
            output_fields,
            partition_names,
            timeout,
            filter_params,
            consistency_level,
            db,
        )
        return QueryIterator(_started(pages))

    def _row_pages(
        self,
        collection_name: str,
        batch_size: int,
        limit: int | None,
        filter: str,
        output_fields: list[str] | None,
        partition_names: list[str] | None,
        timeout: float | None,
        filter_params: dict[str, Any] | None,
        consistency_level: str | None,
        db: str | None,
    ) -> Iterator[list[dict[str, Any]]]:
        schema = self._schema_of(collection_name, db)
        pk = schema.primary.name
        fields = list(output_fields or [pk])
        if pk not in fields:
            fields.append(pk)
        base = f"({filter})" if filter else ""
        params = dict(filter_params or {})
        last: Any = None
        as_of: int | None = None
        left = limit
        while left is None or left > 0:
            size = batch_size if left is None else min(batch_size, left)
            expr = base
            if last is not None:
                params["__after"] = last
                expr = f"{base} and {pk} > {{__after}}" if base else f"{pk} > {{__after}}"
            reads = self._read_keys(
                consistency_level if as_of is None else None, None, as_of, partition_names
            )
            op = Query(
                db=self._db_or_own(db),
                collection=collection_name,
                output_fields=fields,
                limit=size,
                filter=expr or f"{pk} == {pk}",
                filter_params=params or None,
                **reads,
            )
            reply = self._op(op, timeout=timeout)
            rows = reply["rows"]
            if not rows:
                return
            as_of = as_of or int(reply["ts"])
            last = rows[-1][pk]
            yield rows
            if left is not None:
                left -= len(rows)
            if len(rows) < size:
                return

    def search_iterator(
        self,
        collection_name: str,
        data: Any,
        batch_size: int = 1000,
        filter: str | None = "",
        limit: int | None = -1,
        output_fields: list[str] | None = None,
        search_params: dict[str, Any] | None = None,
        timeout: float | None = None,
        partition_names: list[str] | None = None,
        anns_field: str | None = None,
        round_decimal: int = -1,
        *,
        filter_params: dict[str, Any] | None = None,
        consistency_level: str | None = None,
        db: str | None = None,
        **kwargs: Any,
    ) -> SearchIterator:
        """Pages of hits for one query vector, best first, walking past the first page
        (pymilvus's search_iterator: ``next()`` until it returns ``[]``, or iterate it).

        Every page is an exact range search read at the first call's timestamp, so the
        pages join into one exact ranking of the collection as it was then: no hit twice,
        none skipped, ties included. ``limit=-1``: every hit. A ``radius`` /
        ``range_filter`` in ``search_params`` bounds the walk. Errors (a bad field, filter
        or parameter) surface here, not at the first ``next()``."""
        reject_unknown("search_iterator", kwargs)
        vectors = _one_vector(data)
        hits = _check_paging("search_iterator", batch_size, limit)
        if isinstance(round_decimal, bool) or round_decimal not in range(-1, 7):
            raise _invalid(
                f"search_iterator: round_decimal must lie in [-1, 6], got {round_decimal}"
            )
        if search_params is not None and not isinstance(search_params, dict):
            raise _invalid("search_iterator: search_params must be a dict")
        body = self._in_db(
            db,
            collection=collection_name,
            data=vectors,
            limit=1,
            output_fields=list(output_fields or []),
        )
        if filter:
            body["filter"] = filter
        if filter_params:
            body["filter_params"] = dict(filter_params)
        if search_params:
            body["search_params"] = search_params
        if anns_field:
            body["anns_field"] = anns_field
        probe = self._read_options(dict(body), consistency_level, None, None, partition_names)
        # The probe checks the request and pins the snapshot (its ts) and the metric.
        first = self._action("search", probe, timeout=timeout)
        if "metric_type" not in first:
            raise ElanusError(
                ErrorCode.INTERNAL, "search_iterator: the search reply names no metric_type"
            )
        pk = self._schema_of(collection_name, db).primary.name
        walk = self._hit_pages(
            body,
            pk,
            int(first["ts"]),
            str(first["metric_type"]) in LARGER_IS_BETTER,
            batch_size,
            hits,
            partition_names,
            timeout,
        )
        return SearchIterator(_rounded(walk, round_decimal))

    def _hit_pages(
        self,
        body: dict[str, Any],
        pk: str,
        as_of: int,
        larger: bool,
        batch_size: int,
        limit: int | None,
        partition_names: list[str] | None,
        timeout: float | None,
    ) -> Iterator[list[SearchHit]]:
        """The pages of a search walk (see the module docstring)."""
        params, radius, bound = _range_of(body.get("search_params") or {})
        params.pop("params", None)  # nprobe/ef: range searches are exact and ignore them
        radius = radius if radius is not None else (-FAR if larger else FAR)
        user_filter = body.get("filter") or ""
        filter_params = dict(body.get("filter_params") or {})
        near: list[tuple[Any, float]] = []  # returned (key, distance) close to the bound
        left = limit
        while left is None or left > 0:
            size = batch_size if left is None else min(batch_size, left)
            ranged = {**params, "radius": radius}
            if bound is not None:
                ranged["range_filter"] = bound
            page = {**body, "limit": size, "search_params": ranged}
            if near:
                unseen = f"{pk} not in {{{SEEN}}}"
                page["filter"] = f"({user_filter}) and {unseen}" if user_filter else unseen
                page["filter_params"] = {**filter_params, SEEN: [key for key, _ in near]}
            page = self._read_options(page, None, None, as_of, partition_names)
            hits: list[SearchHit] = self._action("search", page, timeout=timeout)["results"][0]
            if not hits:
                return
            last = float(hits[-1]["distance"])
            slack = TIE_TOLERANCE * max(1.0, abs(last))
            if larger:  # the walk goes down: radius < d <= bound
                bound = last + slack if bound is None else min(bound, last + slack)
                near = [(k, d) for k, d in near if d <= bound + slack]
                near += [(h["id"], h["distance"]) for h in hits if h["distance"] <= bound + slack]
            else:  # the walk goes up: bound <= d < radius
                bound = last - slack if bound is None else max(bound, last - slack)
                near = [(k, d) for k, d in near if d >= bound - slack]
                near += [(h["id"], h["distance"]) for h in hits if h["distance"] >= bound - slack]
            yield hits
            if left is not None:
                left -= len(hits)
            if len(hits) < size:
                return


def _started(pages: Iterator[list[T]]) -> Iterator[list[T]]:
    """The pages with the first one already read: as in pymilvus, a bad request fails at
    the call that makes the iterator, and the snapshot is taken there."""
    first = next(pages, None)
    return iter(()) if first is None else itertools.chain([first], pages)


def _rounded(pages: Iterator[list[SearchHit]], round_decimal: int) -> Iterator[list[SearchHit]]:
    """Pages with their distances rounded to ``round_decimal`` places (-1: as computed).
    The walk itself pages on the exact distances."""
    if round_decimal < 0:
        return pages
    return (
        [{**hit, "distance": round(hit["distance"], round_decimal)} for hit in page]
        for page in pages
    )
