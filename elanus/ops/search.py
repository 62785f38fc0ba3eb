"""Vector searches: ``search`` and ``hybrid_search``, and the options every search takes.

``SearchOptions`` is a search less its queries: the command of a DoExchange search (whose
vectors arrive as record batches), and what a search plan keeps (``flight/search/plan.py``:
a later body of the same shape reuses the plan, so the record is checked once per shape).
Each entry of a hybrid search's ``reqs`` is a ``SubSearch``, read as a ``Search`` of the
hybrid search's collection, grouping and read options (``HybridSearch.searches``). The
checks refuse what the dict checkers refused, in their words."""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Annotated, Any, TypedDict, cast

from elanus.boost import BoostRanker
from elanus.errors import invalid
from elanus.highlight import Highlighter
from elanus.ops import DEFAULT_DB, CollectionName, DbName, operation, shape, values_of
from elanus.ops.reads import ReadKeys, ReadOptions
from elanus.ops.replies import SearchHit
from elanus.rankers import MAX_REQUESTS, BaseRanker, ranker_from_dict
from elanus.requests import Range, decode
from elanus.rerankers import DecayRanker, function_ranker, is_function

MAX_TOPK = 16_384
MAX_NQ = 16_384
DEFAULT_LIMIT = 10
SEARCH_PARAM_KEYS = frozenset({"metric_type", "radius", "range_filter", "params"})
TopK = Annotated[int, Range(1, MAX_TOPK)]


class HighlightedHit(SearchHit, total=False):
    """A hit of a search with a highlighter: field -> ``{"fragments": [...]}``."""

    highlight: dict[str, dict[str, list[str]]]


class SearchReply(TypedDict):
    """The ``search`` action's reply: hits per query, the read timestamp, and the metric
    (which way "farther" lies: search iterators page by it)."""

    results: list[list[HighlightedHit]]
    ts: int
    metric_type: str


class HybridReply(TypedDict):
    """The ``hybrid_search`` action's reply (a distance is a fused score)."""

    results: list[list[SearchHit]]
    ts: int


@shape
class Window:
    """Which hits a search returns: ``limit`` (default 10) after ``offset``, with what
    outputs, optionally grouped (``limit`` groups of up to ``group_size`` hits)."""

    limit: TopK | None = None
    offset: Annotated[int, Range(0, MAX_TOPK)] | None = None
    output_fields: list[Any] | None = None
    group_by_field: str | None = None
    """Empty as absent."""
    group_size: TopK | None = None
    strict_group_size: bool | None = None

    @property
    def top(self) -> int:
        return DEFAULT_LIMIT if self.limit is None else self.limit

    @property
    def skip(self) -> int:
        return self.offset or 0

    @property
    def window(self) -> int:
        """The hits each shard must find: ``limit + offset``."""
        return self.top + self.skip

    @property
    def outputs(self) -> list[Any]:
        return self.output_fields or []

    @property
    def group(self) -> str | None:
        return self.group_by_field or None

    @property
    def per_group(self) -> int:
        return self.group_size or 1

    @property
    def strict(self) -> bool:
        return bool(self.strict_group_size)

    def check_window(self, what: str, said: bool = False) -> None:
        """``said``: the grouped window's error says the product (as ``search`` did)."""
        if self.window > MAX_TOPK:
            raise invalid(f"{what}: limit + offset must be at most {MAX_TOPK}")
        if self.group is None and (self.per_group != 1 or self.strict):
            raise invalid(f"{what}: group_size and strict_group_size need a group_by_field")
        product = self.per_group * self.window
        if product > MAX_TOPK:
            got = f", got {product}" if said else ""
            raise invalid(f"{what}: (limit + offset) * group_size must be at most {MAX_TOPK}{got}")


@shape
class SearchOptions(ReadOptions, Window):
    """Everything of a search but its queries (the DoExchange search's whole command)."""

    db: DbName = DEFAULT_DB
    collection: CollectionName
    anns_field: str | None = None
    filter: str | None = None
    """Empty as absent."""
    filter_params: dict[str, Any] | None = None
    search_params: dict[str, Any] | None = None
    """``metric_type``, ``radius``, ``range_filter`` and the index's ``params``."""

    @property
    def params(self) -> dict[str, Any]:
        return self.search_params or {}

    def check_options(self) -> None:
        self.check_window("search", said=True)
        params = self.params
        unknown = sorted(set(params) - SEARCH_PARAM_KEYS)
        if unknown:
            raise invalid(f"search: unknown search_params key(s) {', '.join(unknown)}")
        if not isinstance(params.get("params") or {}, dict):
            raise invalid("search: search_params 'params' must be an object, e.g. {\"nprobe\": 16}")
        split_search_params(params)  # the range bounds are numbers, wherever they sit
        if "metric_type" in params and not isinstance(params["metric_type"], str):
            raise invalid("search: search_params 'metric_type' must be a string")
        self.check_read()

    def check(self) -> None:
        self.check_options()


@operation("search")
class Search(SearchOptions):
    """A search of ``data`` (query vectors, or texts for a BM25 output field) or of the
    stored vectors of primary keys (``ids``). With a function ``ranker`` it runs as a
    hybrid search of one request (``as_hybrid``), reranked."""

    data: list[Any] | None = None
    ids: list[Any] | None = None
    ranker: dict[str, Any] | None = None
    """A function ranker or a FunctionScore (``elanus/rerankers.py``)."""
    highlighter: dict[str, Any] | None = None
    """A lexical highlighter's params (``elanus/highlight.py``)."""

    def check(self) -> None:
        self.check_as("search")

    def check_as(self, what: str) -> None:
        """The checks, errors about the queries naming ``what`` (a hybrid search's entry)."""
        self.check_options()
        if self.ids is None:
            if self.data is None:
                raise invalid(f"{what}: give the query vectors in 'data' or primary keys in 'ids'")
            check_data(self.data)
        else:
            if self.data is not None:
                raise invalid(f"{what}: give either 'data' or 'ids', not both")
            if not self.ids:
                raise invalid(f"{what}: 'ids' holds no primary keys")
            if len(self.ids) > MAX_NQ:
                raise invalid(
                    f"{what}: at most {MAX_NQ} primary keys per request, got {len(self.ids)}"
                )
        if self.ranker is not None:
            if self.highlighter is not None:  # as Milvus: not with a function score
                raise invalid("search: a highlighter cannot go with a ranker")
            if not is_function(self.ranker):
                raise invalid(
                    "search: 'ranker' must be a function ranker ({'input_field_names', "
                    "'params': {'reranker': 'decay' | 'rrf' | 'weighted' | 'boost', ...}}) or "
                    "a FunctionScore of boost functions ({'functions': [...], 'params': {...}})"
                )
        if self.highlighter is not None:
            Highlighter.from_body(self.highlighter)  # checked once, with the plan

    def as_hybrid(self) -> HybridSearch:
        """A search with a ``ranker`` as the hybrid search of its one request, as Milvus
        reranks a search: the request takes ``limit + offset`` candidates per query, the
        ranker rescores them, the window is cut after."""
        sub = SubSearch(
            data=self.data,
            ids=self.ids,
            anns_field=self.anns_field,
            filter=self.filter,
            filter_params=self.filter_params,
            search_params=self.search_params,
        )
        return HybridSearch(
            db=self.db,
            collection=self.collection,
            reqs=[sub],
            ranker=self.ranker,
            **_window(self),
            **_read_options(self),
        )


def check_data(data: Any) -> list[Any]:
    """The ``data`` of a search: 1 to ``MAX_NQ`` queries (checked against the field later);
    what a search that reuses a plan checks of its body."""
    if type(data) is list and 0 < len(data) <= MAX_NQ:
        return data
    if data is None:
        raise invalid("search: missing required key 'data'")
    if not isinstance(data, list):
        raise invalid("search: 'data' must be a JSON array")
    if not data:
        raise invalid("search: 'data' holds no query vectors")
    raise invalid(f"search: at most {MAX_NQ} query vectors per request, got {len(data)}")


def split_search_params(params: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """``(radius, range_filter, index params)`` of a request's ``search_params``, whether
    the range bounds sit at its top level or in ``params`` (as pymilvus sends them)."""
    inner = dict(params.get("params") or {})
    radius = params.get("radius", inner.pop("radius", None))
    range_filter = params.get("range_filter", inner.pop("range_filter", None))
    inner.pop("radius", None)
    inner.pop("range_filter", None)
    for key, value in (("radius", radius), ("range_filter", range_filter)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise invalid(f"search: search_params {key!r} must be a number, got {value!r}")
    return radius, range_filter, inner


@shape
class SubSearch:
    """One entry of ``reqs`` (``param``: pymilvus's name of ``search_params``; ``ids``
    instead of ``data``: primary keys whose stored vectors are the queries). On the wire a
    JSON object of these keys; the Milvus face hands over the record itself."""

    data: list[Any] | None = None
    ids: list[Any] | None = None
    anns_field: str | None = None
    param: dict[str, Any] | None = None
    search_params: dict[str, Any] | None = None
    limit: int | None = None
    """Default: the hybrid search's ``limit + offset``."""
    filter: str | None = None
    filter_params: dict[str, Any] | None = None


SUB_KEYS = tuple(f.name for f in dataclasses.fields(SubSearch))


@operation("hybrid_search")
class HybridSearch(ReadOptions, Window):
    """Several searches of one collection fused into one ranking by ``ranker`` (the
    ``strategy`` form, rrf or weighted, or a function ranker; none: RRF)."""

    db: DbName = DEFAULT_DB
    collection: CollectionName
    reqs: list[Any]
    """Each a ``SubSearch``, or its body (a JSON object); read by ``searches``."""
    ranker: dict[str, Any] | None = None

    def check(self) -> None:
        if not self.reqs:
            raise invalid(
                "hybrid_search: 'reqs' holds no search requests "
                "(minimum of ann search requests is 1)"
            )
        if len(self.reqs) > MAX_REQUESTS:
            raise invalid(
                f"hybrid_search: maximum of ann search requests is {MAX_REQUESTS}, "
                f"got {len(self.reqs)}"
            )
        self.check_window("hybrid_search")
        self.fusion  # noqa: B018 - checked once, kept for the executor
        self.check_read()
        self.searches  # noqa: B018 - checked once, kept for the executor

    @cached_property
    def fusion(self) -> BaseRanker:
        """The checked ranker."""
        return checked_ranker(self.ranker, len(self.reqs), self.group, "hybrid_search")

    @cached_property
    def searches(self) -> list[Search]:
        """Each entry of ``reqs`` as a checked search (its outputs are the hybrid's)."""
        return [self._search(raw, i) for i, raw in enumerate(self.reqs)]

    def _search(self, raw: Any, i: int) -> Search:
        what = f"hybrid_search: reqs[{i}]"
        if isinstance(raw, SubSearch):
            raw = {f: v for f in SUB_KEYS if (v := getattr(raw, f)) is not None}
        if not isinstance(raw, dict):
            raise invalid(f"{what} must be a JSON object with data, anns_field, param and limit")
        unknown = sorted(set(raw) - set(SUB_KEYS))
        if unknown:
            raise invalid(
                f"{what}: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"allowed keys are {', '.join(sorted(SUB_KEYS))}"
            )
        if raw.get("param") is not None and raw.get("search_params") is not None:
            raise invalid(f"{what}: give either 'param' or 'search_params', not both")
        body = {
            "db": self.db,
            "collection": self.collection,
            "data": raw.get("data"),
            "ids": raw.get("ids"),
            "anns_field": raw.get("anns_field"),
            "limit": raw.get("limit", self.window),
            "filter": raw.get("filter"),
            "filter_params": raw.get("filter_params"),
            "search_params": raw.get("search_params", raw.get("param")),
            "group_by_field": self.group,
            "group_size": self.group_size,
            **_read_options(self),
        }
        search = decode(Search, body, what)
        search.check_as(what)
        return search


def checked_ranker(body: Any, n_requests: int, group_by: str | None, what: str) -> BaseRanker:
    """The ranker of a body: the ``strategy`` form or a function ranker (decay, rrf,
    weighted, boost); decay and boost do not rank grouped searches, as in Milvus."""
    if not is_function(body):
        return ranker_from_dict(body, n_requests)
    ranker = function_ranker(body, n_requests, what)
    if isinstance(ranker, DecayRanker | BoostRanker) and group_by is not None:
        raise invalid(f"{what}: the {ranker.strategy} ranker does not support grouping searches")
    return ranker


class _WindowKeys(TypedDict):
    limit: int | None
    offset: int | None
    output_fields: list[Any] | None
    group_by_field: str | None
    group_size: int | None
    strict_group_size: bool | None


def _window(w: Window) -> _WindowKeys:
    return cast(_WindowKeys, values_of(w, Window))


def _read_options(r: ReadOptions) -> ReadKeys:
    return cast(ReadKeys, values_of(r, ReadOptions))
