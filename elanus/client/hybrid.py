"""Hybrid search in the SDK (mixed into ``Client``): pymilvus's ``hybrid_search``, taking
Elanus's ``AnnSearchRequest`` / ``RRFRanker`` / ``WeightedRanker`` or pymilvus's own objects
(read through their attributes), so Milvus code runs with its imports changed or not."""

from __future__ import annotations

from typing import Any

from elanus.client.compat import reject_unknown
from elanus.client.read import ReadAPI, function_body
from elanus.client.results import SearchResult
from elanus.errors import ElanusError, ErrorCode
from elanus.ops.search import HybridSearch


class HybridAPI(ReadAPI):
    def hybrid_search(
        self,
        collection_name: str,
        reqs: list[Any],
        ranker: Any = None,
        limit: int = 10,
        output_fields: list[str] | None = None,
        timeout: float | None = None,
        partition_names: list[str] | None = None,
        *,
        offset: int = 0,
        group_by_field: str | None = None,
        group_size: int | None = None,
        strict_group_size: bool | None = None,
        consistency_level: str | None = None,
        guarantee_timestamp: int | None = None,
        as_of: int | None = None,
        db: str | None = None,
        **kwargs: Any,
    ) -> SearchResult:
        """Several ANN searches (``reqs``) fused by ``ranker`` (RRF with k = 60 if none):
        per query vector, ``Hits`` of ``{"id", "distance" (the fused score), "entity"}``."""
        reject_unknown("hybrid_search", kwargs)
        op = HybridSearch(
            db=self._db_or_own(db),
            collection=collection_name,
            reqs=[ann_request_body(r) for r in reqs],
            limit=limit,
            offset=offset,
            output_fields=list(output_fields or []),
            ranker=None if ranker is None else ranker_body(ranker),
            group_by_field=group_by_field,
            group_size=group_size,
            strict_group_size=strict_group_size,
            **self._read_keys(consistency_level, guarantee_timestamp, as_of, partition_names),
        )
        return SearchResult(self._op(op, timeout=timeout)["results"])


def ann_request_body(req: Any) -> dict[str, Any]:
    """One entry of ``reqs`` on the wire, from an ``AnnSearchRequest`` of Elanus or
    pymilvus (its ``data``, ``anns_field``, ``param``, ``limit``, ``expr``,
    ``expr_params``) or from a dict already in the wire form."""
    if isinstance(req, dict):
        return dict(req)
    try:
        data, field, param, limit = req.data, req.anns_field, req.param, req.limit
    except AttributeError:
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"hybrid_search: reqs entries are AnnSearchRequest objects or dicts, got "
            f"{type(req).__name__}",
        ) from None
    out: dict[str, Any] = {"data": query_data(data), "anns_field": field, "limit": limit}
    if param:
        out["search_params"] = dict(param)
    expr = getattr(req, "expr", None)
    if expr:
        out["filter"] = expr
    expr_params = getattr(req, "expr_params", None)
    if expr_params:
        out["filter_params"] = dict(expr_params)
    return out


def ranker_body(ranker: Any) -> dict[str, Any]:
    """A ranker's wire form: its ``dict()`` (Elanus's and pymilvus's rankers), a pymilvus
    ``Function`` (or a ``FunctionScore`` of one) as its ``to_dict()``, or a dict."""
    if isinstance(ranker, dict):
        return dict(ranker)
    function = function_body(ranker)
    if function is not None:
        return function
    as_dict = getattr(ranker, "dict", None)
    if not callable(as_dict):
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"hybrid_search: the ranker must be RRFRanker, WeightedRanker or their dict() "
            f"form, got {type(ranker).__name__}",
        )
    out = as_dict()
    if not isinstance(out, dict) or "strategy" not in out:
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"hybrid_search: {type(ranker).__name__} is not a ranker Elanus knows "
            "(RRFRanker or WeightedRanker)",
        )
    return out


def query_data(data: Any) -> Any:
    """Query vectors as JSON: numpy arrays as lists, a scipy sparse matrix as one
    ``{index: value}`` map per row, sparse maps with plain int keys."""
    if hasattr(data, "tocsr"):
        csr = data.tocsr()
        return [
            {
                int(i): float(v)
                for i, v in zip(
                    csr.indices[csr.indptr[r] : csr.indptr[r + 1]],
                    csr.data[csr.indptr[r] : csr.indptr[r + 1]],
                    strict=True,
                )
            }
            for r in range(csr.shape[0])
        ]
    if hasattr(data, "tolist"):
        return data.tolist()
    if isinstance(data, dict):
        data = [data]  # one sparse query vector
    return [_one_vector(v) for v in data]


def _one_vector(v: Any) -> Any:
    if isinstance(v, dict):
        return {int(k): float(x) for k, x in v.items()}
    return v.tolist() if hasattr(v, "tolist") else v
