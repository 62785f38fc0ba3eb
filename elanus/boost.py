"""Milvus 2.6's boost ranker: ``Function(params={"reranker": "boost", "weight": w,
"filter": ..., "random_score": {"seed": s, "field": f}})``, one or several in a
``FunctionScore`` with ``boost_mode`` and ``function_mode`` (``multiply`` | ``sum``).

The arithmetic is Milvus's (``internal/core/src/rescores`` and ``RescoresNode.cpp``):
each boost function gives the hits its ``filter`` matches (all hits without one) a boost,
``weight`` or, with ``random_score``, ``weight * r`` where ``r`` in [0, 1) is
``hash_to_double(murmur3_x64_64_special(key, seed))``; a hit several functions boost gets
their boosts merged by ``function_mode``; a boosted hit's raw distance is then multiplied
by (or, with ``boost_mode: sum``, added to) its boost, and hits rank in the metric's own
direction. Both modes default to ``multiply``; ``seed`` defaults to 0.

Where Elanus departs: Milvus rescores each segment's candidates before they are merged;
Elanus rescores the ``limit + offset`` nearest of the merged search (the same hits when a
collection has one segment). Without ``random_score.field`` Milvus hashes the row's
segment offset plus the segment id, numbers Elanus does not have; Elanus hashes the
primary key (an Int64 key as it is, a VarChar key through its first 8 bytes of
BLAKE2b), so the draw is fixed per row and seed either way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from elanus.errors import invalid
from elanus.rankers import LARGER_IS_BETTER, BaseRanker, Fused, Hit

BOOST = "boost"
MODES = ("multiply", "sum")
_PARAMS = {"filter", "weight", "random_score"}
_RANDOM_KEYS = {"seed", "field"}
_SCORE_PARAMS = {"boost_mode", "function_mode"}
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_C1, _C2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)


@dataclass(frozen=True)
class BoostFunction:
    """One boost function: who it boosts (``filter``; None is every hit) and by what."""

    weight: float
    filter: str | None = None
    random: bool = False
    seed: int = 0
    field: str | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any], name: str, what: str) -> BoostFunction:
        unknown = sorted(set(params) - _PARAMS)
        if unknown:
            raise invalid(
                f"{what}: unknown boost ranker param(s) {', '.join(map(repr, unknown))}; "
                f"it takes {', '.join(sorted(_PARAMS))}"
            )
        if "weight" not in params:
            raise invalid(f"{what}: boost ranker function {name!r} needs the param 'weight'")
        weight = _float(params["weight"], "weight", what)
        text = params.get("filter")
        if text is not None and not isinstance(text, str):
            raise invalid(f"{what}: the boost ranker's filter must be a string, got {text!r}")
        if "random_score" not in params:
            return cls(weight, text or None)
        random = decoded(params["random_score"])
        if not isinstance(random, dict):
            raise invalid(
                f"{what}: the boost ranker's random_score must be a JSON object "
                f"({{'seed': number, 'field': name}}), got {params['random_score']!r}"
            )
        unknown = sorted(set(random) - _RANDOM_KEYS)
        if unknown:
            raise invalid(
                f"{what}: unknown random_score key(s) {', '.join(map(repr, unknown))}; "
                "it takes seed and field"
            )
        seed = random.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise invalid(f"{what}: random_score seed must be an integer, got {seed!r}")
        field = random.get("field")
        if field is not None and not isinstance(field, str):
            raise invalid(f"{what}: random_score field must be a field name, got {field!r}")
        return cls(weight, text or None, True, seed, field)

    def boosts(self, keys: Sequence[Hashable], seeds: Sequence[Any] | None) -> np.ndarray:
        """This function's boost of each key (float32), before ``function_mode``.
        ``seeds``: the ``random_score.field`` value of each key, when it names one."""
        if not self.random:
            return np.full(len(keys), self.weight, np.float32)
        values = seeds if seeds is not None else [_key_bits(k) for k in keys]
        draws = random_draws(np.array(values, np.int64).view(np.uint64), self.seed)
        return draws.astype(np.float32) * np.float32(self.weight)


@dataclass(frozen=True)
class BoostScore:
    """A ``FunctionScore`` of boost functions and how their boosts combine."""

    functions: tuple[BoostFunction, ...]
    boost_mode: str = "multiply"
    function_mode: str = "multiply"

    def merge(self, boosts: list[np.ndarray], masks: list[np.ndarray]) -> np.ndarray:
        """Each key's combined boost (NaN where no function boosts it)."""
        out = np.full(len(boosts[0]) if boosts else 0, np.nan, np.float32)
        for boost, mask in zip(boosts, masks, strict=True):
            fresh = mask & np.isnan(out)
            again = mask & ~np.isnan(out)
            out[fresh] = boost[fresh]
            if self.function_mode == "sum":
                out[again] = out[again] + boost[again]
            else:
                out[again] = out[again] * boost[again]
        return out


def is_boost(body: Any) -> bool:
    """Whether a ranker body is a boost function or a FunctionScore of boost functions."""
    if not isinstance(body, dict):
        return False
    functions = body.get("functions")
    if isinstance(functions, list):
        return any(_reranker(f) == BOOST for f in functions)
    return _reranker(body) == BOOST


def boost_score(body: dict[str, Any], what: str) -> BoostScore:
    """The checked ``BoostScore`` of a ranker body: one boost function (``{"name",
    "input_field_names": [], "params"}``) or ``{"functions": [...], "params":
    {"boost_mode", "function_mode"}}``."""
    functions = body.get("functions") if "functions" in body else [body]
    if not isinstance(functions, list) or not functions:
        raise invalid(f"{what}: a FunctionScore needs at least one function")
    others = sorted({_reranker(f) or "?" for f in functions} - {BOOST})
    if others:
        raise invalid(
            f"{what}: a FunctionScore of boost functions cannot also hold "
            f"{', '.join(others)}; Elanus runs several functions only when all are boost"
        )
    unknown = sorted(set(body) - {"functions", "params"}) if "functions" in body else []
    if unknown:
        raise invalid(f"{what}: unknown FunctionScore key(s) {', '.join(map(repr, unknown))}")
    params = (body.get("params") or {}) if "functions" in body else {}
    if not isinstance(params, dict):
        raise invalid(f"{what}: FunctionScore params must be a JSON object")
    unknown = sorted(set(params) - _SCORE_PARAMS)
    if unknown:
        raise invalid(
            f"{what}: unknown FunctionScore param(s) {', '.join(map(repr, unknown))}; "
            "it takes boost_mode and function_mode"
        )
    modes = [_mode(params, key, what) for key in ("boost_mode", "function_mode")]
    return BoostScore(tuple(_function(f, what) for f in functions), *modes)


class BoostRanker(BaseRanker):
    """The boost ranker of one search: its candidates' raw distances times (or plus) their
    boosts, ranked in the metric's direction. ``boosts`` (key -> combined boost, NaN for
    none) are bound per search (``bound``)."""

    strategy = BOOST

    def __init__(self, score: BoostScore) -> None:
        self.score = score
        self.boosts: Mapping[Hashable, float] = {}

    def params(self) -> dict[str, Any]:
        return {"boost_mode": self.score.boost_mode, "function_mode": self.score.function_mode}

    def check(self, n_requests: int) -> None:
        if n_requests != 1:
            raise invalid(
                "the boost ranker rescores one search; a hybrid search of several requests "
                f"cannot take it (got {n_requests} requests)"
            )

    def bound(self, boosts: Mapping[Hashable, float]) -> BoostRanker:
        out = BoostRanker(self.score)
        out.boosts = boosts
        return out

    def fuse(self, lists: Sequence[Sequence[Hit]], metrics: Sequence[str]) -> Fused:
        self.check(len(lists))
        hits = lists[0]
        distances = np.array([d for _, d in hits], np.float32)
        boosts = np.array([self.boosts.get(pk, np.nan) for pk, _ in hits], np.float32)
        boosted = ~np.isnan(boosts)
        if self.score.boost_mode == "sum":
            distances[boosted] = distances[boosted] + boosts[boosted]
        else:
            distances[boosted] = distances[boosted] * boosts[boosted]
        scores = dict(zip([pk for pk, _ in hits], distances.tolist(), strict=True))
        return Fused(scores, descending=metrics[0].upper() in LARGER_IS_BETTER)


def murmur3_special(keys: np.ndarray, seed: int) -> np.ndarray:
    """Milvus's ``MurmurHash3_x64_64_Special``: MurmurHash3 x64 of the 16 bytes ``key,
    seed`` (one block), its first 64-bit half; ``keys`` as uint64."""
    with np.errstate(over="ignore"):
        s = np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
        k1 = _rotl(keys * _C1, 31) * _C2
        h1 = (keys ^ s) ^ k1
        h1 = _rotl(h1, 27) + s
        h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)
        k2 = _rotl(np.full_like(keys, s) * _C2, 33) * _C1
        h2 = np.full_like(keys, s) ^ k2
        h2 = _rotl(h2, 31) + h1
        h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)
        h1 ^= np.uint64(16)
        h2 ^= np.uint64(16)
        h1 = h1 + h2
        h2 = h2 + h1
        h1, h2 = _fmix(h1), _fmix(h2)
        return h1 + h2


def random_draws(keys: np.ndarray, seed: int) -> np.ndarray:
    """Milvus's ``hash_to_double``: the hash's low 52 bits as the mantissa of a double in
    [1, 2), less 1."""
    bits = (murmur3_special(keys, seed) & np.uint64(0xFFFFFFFFFFFFF)) | np.uint64(0x3FF << 52)
    return bits.view(np.float64) - 1.0


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(k: np.ndarray) -> np.ndarray:
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xFF51AFD7ED558CCD)
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xC4CEB9FE1A85EC53)
    return k ^ (k >> np.uint64(33))


def _key_bits(key: Hashable) -> int:
    """A primary key as the signed 64-bit number ``random_score`` hashes without a field."""
    if isinstance(key, int):
        return key
    digest = hashlib.blake2b(str(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _function(body: Any, what: str) -> BoostFunction:
    if not isinstance(body, dict):
        raise invalid(f"{what}: each function of a FunctionScore must be a JSON object")
    if body.get("input_field_names"):
        raise invalid(
            f"{what}: the boost ranker takes no input fields, got {body['input_field_names']}"
        )
    params = {k: v for k, v in (body.get("params") or {}).items() if k != "reranker"}
    return BoostFunction.from_params(params, str(body.get("name", "")), what)


def _reranker(body: Any) -> str:
    params = body.get("params") if isinstance(body, dict) else None
    return str(params.get("reranker", "")).lower() if isinstance(params, dict) else ""


def _mode(params: dict[str, Any], key: str, what: str) -> str:
    mode = str(params.get(key, "multiply")).lower()
    if mode not in MODES:
        raise invalid(
            f"{what}: FunctionScore params.{key} must be 'Multiply' or 'Sum', got {params[key]!r}"
        )
    return mode


def _float(value: Any, key: str, what: str) -> float:
    if not isinstance(value, bool):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if np.isfinite(number):
            return float(np.float32(number))
    raise invalid(f"{what}: boost ranker param {key} must be a finite number, got {value!r}")


def decoded(value: Any) -> Any:
    """A list or object param, given as it is or (the Milvus protocol) as its JSON text."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
