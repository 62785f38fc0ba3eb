"""Function rerankers (Milvus 2.6's ``Function`` / ``FunctionScore`` with ``type=RERANK``):
the wire form and checks of ``reranker: decay | rrf | weighted | boost``, and the decay ranker
(boost's arithmetic is ``elanus.boost``).

A function ranker's wire form is pymilvus's ``Function`` as a dict: ``{"name",
"input_field_names": [...], "params": {"reranker": ..., ...}}``; parameter values may be
strings, as the Milvus protocol carries them. RRF and weighted map onto ``elanus.rankers``;
decay is new here; boost functions, alone or several in a FunctionScore (``{"functions":
[...], "params": {"boost_mode", "function_mode"}}``), become ``elanus.boost.BoostRanker``;
model rerankers are refused with INVALID_ARGUMENT naming the reranker.

Decay (Milvus 2.6, ``internal/util/function/rerank/decay_function.go``): every hit's score
is first made larger-better (IP, COSINE, BM25 as they are; distances through
``1 - 2 atan(d)/pi``); across the requests of a hybrid search a key keeps its largest such
score; that score is multiplied by the decay of the key's ``input`` value ``v``, with
``x = max(0, |v - origin| - offset)``:

- gauss: ``exp(x^2 * ln(decay) / scale^2)``
- exp: ``exp(x * ln(decay) / scale)``
- linear: ``max(decay, 1 - x * (1 - decay) / scale)``

and keys rank by the product, larger first. ``offset`` defaults to 0, ``decay`` to 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from elanus.boost import BoostRanker, boost_score, decoded, is_boost
from elanus.datatypes import INT_TYPES, DataType
from elanus.errors import invalid
from elanus.rankers import (
    LARGER_IS_BETTER,
    RRF,
    WEIGHTED,
    BaseRanker,
    Fused,
    Hit,
    RRFRanker,
    WeightedRanker,
)
from elanus.schema import Schema

DECAY = "decay"
DECAY_FUNCTIONS = ("gauss", "exp", "linear")
NUMERIC_TYPES = INT_TYPES | {DataType.FLOAT, DataType.DOUBLE}
REFUSED = {
    "model": "model rerankers call a model service (tei, vllm, cohere, ...), which Elanus "
    "does not reach",
}
_FUNCTION_KEYS = {"name", "description", "type", "input_field_names", "output_field_names"}
_FUNCTION_KEYS |= {"params"}


def is_function(body: Any) -> bool:
    """Whether a ranker body is a function ranker or a FunctionScore of boost functions
    (else the ``strategy`` form)."""
    return isinstance(body, dict) and (
        isinstance(body.get("functions"), list)
        or "input_field_names" in body
        or _has_reranker(body)
    )


def _has_reranker(body: dict[str, Any]) -> bool:
    params = body.get("params")
    return isinstance(params, dict) and "reranker" in params


def function_ranker(body: dict[str, Any], n_requests: int, what: str) -> BaseRanker:
    """The ranker a function body describes, checked for ``n_requests`` requests."""
    functions = body.get("functions")
    if isinstance(functions, list) and not is_boost(body):
        if len(functions) != 1 or body.get("params"):
            raise invalid(
                f"{what}: a FunctionScore holds one rerank function, or several when all "
                f"are boost; got {len(functions)} function(s)"
                + (" and params" if body.get("params") else "")
            )
        body = functions[0] if isinstance(functions[0], dict) else {}
    unknown = sorted(set(body) - _FUNCTION_KEYS)
    if unknown and "functions" not in body:
        raise invalid(f"{what}: unknown ranker key(s) {', '.join(map(repr, unknown))}")
    if is_boost(body):
        boost = BoostRanker(boost_score(body, what))
        boost.check(n_requests)
        return boost
    params = body.get("params") or {}
    if not isinstance(params, dict):
        raise invalid(f"{what}: the ranker's 'params' must be a JSON object")
    kind = str(params.get("reranker", "")).lower()
    inputs = body.get("input_field_names") or []
    if not isinstance(inputs, list) or not all(isinstance(n, str) for n in inputs):
        raise invalid(f"{what}: the ranker's 'input_field_names' must be a list of names")
    rest = {k: v for k, v in params.items() if k != "reranker"}
    if kind in REFUSED:
        raise invalid(f"{what}: unsupported reranker {kind!r}: {REFUSED[kind]}")
    if kind == DECAY:
        return DecayRanker.from_params(rest, inputs, what)
    if inputs:
        raise invalid(f"{what}: the {kind or '?'} ranker takes no input fields, got {inputs}")
    ranker: BaseRanker
    if kind == RRF:
        _only(rest, {"k"}, kind, what)
        ranker = RRFRanker(_number(rest, "k", what) if "k" in rest else 60)
    elif kind == WEIGHTED:
        _only(rest, {"weights", "norm_score"}, kind, what)
        weights = decoded(rest.get("weights"))
        if not isinstance(weights, list) or not weights:
            raise invalid(f"{what}: the weighted ranker needs 'weights', a list of numbers")
        ranker = WeightedRanker(*weights, norm_score=_flag(rest.get("norm_score", True), what))
    else:
        raise invalid(
            f"{what}: unsupported reranker {kind!r}; Elanus runs decay, rrf, weighted and "
            "boost (model is refused)"
        )
    ranker.check(n_requests)
    return ranker


class DecayRanker(BaseRanker):
    """Milvus's decay ranker: relevance times a decay of one numeric field's distance from
    ``origin``. ``values`` (key -> field value) are bound per search (``bound``)."""

    strategy = DECAY

    def __init__(
        self,
        function: str,
        field: str,
        origin: float,
        scale: float,
        offset: float = 0.0,
        decay: float = 0.5,
    ) -> None:
        self.function = function
        self.field = field
        self.origin, self.scale, self.offset, self.decay = origin, scale, offset, decay
        self.values: Mapping[Hashable, Any] = {}

    @classmethod
    def from_params(cls, params: dict[str, Any], inputs: list[str], what: str) -> DecayRanker:
        _only(params, {"function", "origin", "scale", "offset", "decay"}, DECAY, what)
        if len(inputs) != 1:
            raise invalid(
                f"{what}: the decay ranker takes exactly one input field, got {len(inputs)}"
                f" ({', '.join(inputs) or 'none'})"
            )
        function = str(params.get("function", "")).lower()
        if function not in DECAY_FUNCTIONS:
            raise invalid(
                f"{what}: invalid decay function {params.get('function')!r}; expected "
                f"{', '.join(DECAY_FUNCTIONS)}"
            )
        for key in ("origin", "scale"):
            if key not in params:
                raise invalid(f"{what}: the decay ranker needs the param {key!r}")
        ranker = cls(
            function,
            inputs[0],
            _number(params, "origin", what),
            _number(params, "scale", what),
            _number(params, "offset", what) if "offset" in params else 0.0,
            _number(params, "decay", what) if "decay" in params else 0.5,
        )
        if ranker.scale <= 0:
            raise invalid(f"{what}: decay param scale must be > 0, got {ranker.scale}")
        if ranker.offset < 0:
            raise invalid(f"{what}: decay param offset must be >= 0, got {ranker.offset}")
        if not 0 < ranker.decay < 1:
            raise invalid(f"{what}: decay param decay must lie in (0, 1), got {ranker.decay}")
        return ranker

    def params(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "origin": self.origin,
            "scale": self.scale,
            "offset": self.offset,
            "decay": self.decay,
        }

    def check_schema(self, schema: Schema, what: str) -> None:
        """The input field exists and is numeric (Milvus's INT8..INT64, FLOAT, DOUBLE)."""
        field = schema.field(self.field)
        if field.dtype not in NUMERIC_TYPES:
            raise invalid(
                f"{what}: the decay ranker's input field {self.field!r} is {field.dtype}; "
                "it must be numeric (Int8, Int16, Int32, Int64, Float or Double)"
            )

    def bound(self, values: Mapping[Hashable, Any]) -> DecayRanker:
        """This ranker over one search's candidates' field values."""
        out = DecayRanker(self.function, self.field, self.origin, self.scale)
        out.offset, out.decay, out.values = self.offset, self.decay, values
        return out

    def fuse(self, lists: Sequence[Sequence[Hit]], metrics: Sequence[str]) -> Fused:
        best: dict[Hashable, float] = {}
        for hits, metric in zip(lists, metrics, strict=True):
            if not hits:
                continue
            scores = larger_better(np.array([d for _, d in hits], np.float32), metric)
            for (pk, _), score in zip(hits, scores.tolist(), strict=True):
                if pk not in best or score > best[pk]:
                    best[pk] = score
        keys = list(best)
        raw = [self.values.get(k) for k in keys]
        if any(v is None for v in raw):
            raise invalid(
                f"decay ranker: field {self.field!r} is null in a candidate; decay needs a value"
            )
        factors = self.factors(np.array(raw, np.float64))
        product = np.array([best[k] for k in keys], np.float32) * factors.astype(np.float32)
        return Fused(dict(zip(keys, product.tolist(), strict=True)), descending=True)

    def factors(self, values: np.ndarray) -> np.ndarray:
        """The decay of each value (1 within ``offset`` of ``origin``)."""
        x = np.maximum(0.0, np.abs(values - self.origin) - self.offset)
        if self.function == "gauss":
            return np.exp(x**2 * math.log(self.decay) / self.scale**2)
        if self.function == "exp":
            return np.exp(x * math.log(self.decay) / self.scale)
        return np.maximum(self.decay, 1.0 - x * (1.0 - self.decay) / self.scale)


def larger_better(distances: np.ndarray, metric: str) -> np.ndarray:
    """Milvus's ``toGreaterScore``: similarities as they are, distances through
    ``1 - 2 atan(d)/pi`` (in float32, as Milvus)."""
    if metric.upper() in LARGER_IS_BETTER:
        return distances
    return (1.0 - 2.0 * np.arctan(distances) / np.pi).astype(np.float32)


def _only(params: dict[str, Any], allowed: set[str], kind: str, what: str) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise invalid(
            f"{what}: unknown {kind} ranker param(s) {', '.join(map(repr, unknown))}; "
            f"it takes {', '.join(sorted(allowed))}"
        )


def _number(params: dict[str, Any], key: str, what: str) -> float:
    """A numeric param, given as a number or (the Milvus protocol) a numeric string."""
    value = params[key]
    if isinstance(value, bool):
        raise invalid(f"{what}: ranker param {key} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise invalid(f"{what}: ranker param {key} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise invalid(f"{what}: ranker param {key} must be finite, got {value!r}")
    return int(number) if isinstance(value, int) else number


def _flag(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise invalid(f"{what}: ranker param norm_score must be true or false, got {value!r}")
