"""Milvus's request parameters: key-value lists with JSON-ish values, filter templates,
consistency levels; each read so that a value of the wrong kind is refused naming its key."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from pymilvus.grpc_gen import common_pb2

from elanus.errors import invalid
from elanus.wire.bodyshape import check_body_shape, max_json_depth

_LEVELS = {v: k for k, v in common_pb2.ConsistencyLevel.items()}


def kv_values(pairs: Any) -> dict[str, Any]:
    """``KeyValuePair``s with their values read as JSON where they are (pymilvus sends
    numbers, booleans and objects as JSON text), else as the text (a value too deeply
    nested to read stays text: ``json_param`` refuses it where JSON is needed)."""
    out: dict[str, Any] = {}
    for p in pairs:
        try:
            out[p.key] = json.loads(p.value)
        except (ValueError, RecursionError):
            out[p.key] = p.value
    return out


def json_param(value: Any, what: str) -> dict[str, Any]:
    """A parameter sent as JSON object text (or already read by ``kv_values``) as a dict,
    shaped as the Flight face's request bodies must be (``bodyshape``: no key twice, no
    deeper nesting than ``max_json_depth``)."""
    text = value if isinstance(value, str) else json.dumps(value)
    if not text.strip():
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        raise invalid(f"{what} is not JSON text: {text[:40]!r}") from None
    except RecursionError:
        raise invalid(f"{what} is nested more than {max_json_depth()} levels deep") from None
    if not isinstance(parsed, dict):
        raise invalid(f"{what} must be a JSON object, got {text[:40]!r}")
    check_body_shape(text.encode(), parsed, what)
    return parsed


def consistency_name(number: int) -> str:
    """The name of a ``ConsistencyLevel`` number; a number Milvus does not define is
    refused (Elanus reads no level into it)."""
    name = _LEVELS.get(number)
    if name is None:
        levels = ", ".join(f"{v} ({k})" for k, v in common_pb2.ConsistencyLevel.items())
        raise invalid(f"consistency_level {number} is not one of {levels}")
    return name


def level_of(request: Any) -> str | None:
    """The consistency level a read names; None: the collection's own."""
    if getattr(request, "use_default_consistency", False):
        return None
    name = consistency_name(request.consistency_level)
    # Milvus reads a Customized level at the guarantee timestamp sent, as Session does
    return "Session" if name == "Customized" else name


def consistency_of(request: Any) -> dict[str, Any]:
    """A read's ``consistency_level``, ``guarantee_timestamp`` and ``session_ts`` (absent
    ones left out). A read at the collection's default level carries, from pymilvus, the
    client's newest write to that collection as its guarantee timestamp (1 when it wrote
    none); Milvus reads it only for a Session or Customized default. Elanus also raises a
    Bounded or Eventually default to it, as its own SDK does: a script sees what it just
    wrote (pymilvus's quick start), and a read fresher than its bound is still Bounded."""
    out: dict[str, Any] = {}
    level = level_of(request)
    if level is not None:
        out["consistency_level"] = level
    if request.guarantee_timestamp:
        out["guarantee_timestamp"] = request.guarantee_timestamp
        if level is None and request.guarantee_timestamp > 1:
            out["session_ts"] = request.guarantee_timestamp
    return out


def templates(values: Any) -> dict[str, Any]:
    """``expr_template_values`` as the ``filter_params`` of an Elanus filter."""
    return {k: _template(v) for k, v in values.items()}


def _template(v: Any) -> Any:
    kind = v.WhichOneof("val")
    if kind is None:
        raise invalid("an expression template value is empty")
    if kind == "array_val":
        return _array(v.array_val)
    return getattr(v, kind)


def _array(a: Any) -> list[Any]:
    kind = a.WhichOneof("data")
    if kind is None:
        return []
    data = getattr(a, kind).data
    if kind == "array_data":
        return [_array(x) for x in data]
    if kind == "json_data":
        return [json.loads(x) for x in data]
    return list(data)


def int_param(params: dict[str, Any], key: str, default: int) -> int:
    """An integer parameter: a JSON integer or integer text (``2.5`` or ``true`` is not
    one, as Milvus's ``strconv.ParseInt`` reads them)."""
    value = params.get(key, default)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    raise invalid(f"{key} must be an integer, got {value!r:.40}")


def truthy(value: Any) -> bool:
    """A flag as pymilvus sends it: JSON ``true`` or the text ``True``."""
    return value is True or str(value).lower() == "true"


class GroupOptions(TypedDict, total=False):
    """A search's group-by keys, those its parameters give."""

    group_by_field: str
    group_size: int
    strict_group_size: bool


def group_options(params: dict[str, Any]) -> GroupOptions:
    """The group-by keys of a search's (or a rank's) parameters, typed."""
    out = GroupOptions()
    if params.get("group_by_field") not in (None, ""):
        out["group_by_field"] = str(params["group_by_field"])
    if params.get("group_size") not in (None, ""):
        out["group_size"] = int_param(params, "group_size", 1)
    if params.get("strict_group_size") not in (None, ""):
        out["strict_group_size"] = truthy(params["strict_group_size"])
    return out
