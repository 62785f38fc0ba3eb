"""pymilvus-shaped pieces of the SDK that are not calls: index parameter lists, the
``describe_collection`` view a ``MilvusClient`` user reads, the iterator objects,
and the check that turns a keyword Elanus does not know into a named error.

Pure: no Flight, so the CLI and tests can use these without a server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from elanus.client.results import Hits
from elanus.errors import ElanusError, ErrorCode
from elanus.functions import FunctionType
from elanus.properties import MMAP_KEYS
from elanus.schema import DataType


def reject_unknown(method: str, kwargs: dict[str, Any]) -> None:
    """pymilvus methods take ``**kwargs``; Elanus takes them too, but one it does not
    honour is refused by name instead of being silently ignored (it would change the
    answer a Milvus user expects)."""
    if kwargs:
        names = ", ".join(repr(k) for k in sorted(kwargs))
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT, f"{method} does not support the argument(s) {names}"
        )


def not_supported(method: str, what: str) -> ElanusError:
    """The error of a pymilvus method whose concept Elanus does not have."""
    return ElanusError(
        ErrorCode.INVALID_ARGUMENT, f"{method}: Elanus does not support {what} (not supported)"
    )


class IndexParam:
    """One index to build: pymilvus's ``IndexParam`` (field, type, name, metric, params)."""

    def __init__(
        self, field_name: str, index_type: str = "", index_name: str = "", **kwargs: Any
    ) -> None:
        self.field_name = field_name
        self.index_type = index_type or "AUTOINDEX"
        self.index_name = index_name
        self.metric_type: str | None = kwargs.pop("metric_type", None)
        params = kwargs.pop("params", None) or {}
        if not isinstance(params, dict):
            raise ElanusError(ErrorCode.INVALID_ARGUMENT, "index 'params' must be a dict")
        # pymilvus also takes build parameters as plain keywords (``M=16``).
        self.params: dict[str, Any] = {**params, **kwargs}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"field_name": self.field_name, "index_type": self.index_type}
        if self.index_name:
            d["index_name"] = self.index_name
        if self.metric_type:
            d["metric_type"] = self.metric_type
        if self.params:
            d["params"] = dict(self.params)
        return d

    def __repr__(self) -> str:
        return f"IndexParam({self.to_dict()!r})"


class IndexParams(list[IndexParam]):
    """The indexes of one ``create_index``/``create_collection`` call, as
    ``MilvusClient.prepare_index_params()`` returns them."""

    def add_index(
        self, field_name: str, index_type: str = "", index_name: str = "", **kwargs: Any
    ) -> None:
        self.append(IndexParam(field_name, index_type, index_name, **kwargs))


def text_params(f: dict[str, Any]) -> dict[str, str]:
    """An analysed field's settings as pymilvus shows Milvus's type params: text, the
    flags ``'true'`` and the analyzer's parameters as JSON (only those that are set)."""
    out = {k: "true" for k in ("enable_analyzer", "enable_match") if f.get(k)}
    if f.get("analyzer_params") is not None:
        out["analyzer_params"] = json.dumps(f["analyzer_params"])
    return out


def milvus_field(f: dict[str, Any]) -> dict[str, Any]:
    """One field as pymilvus describes it: ``type`` a ``DataType``, sizes and text
    settings under ``params``."""
    out: dict[str, Any] = {
        "field_id": f.get("field_id"),
        "name": f["name"],
        "description": f.get("description", ""),
        "type": DataType.parse(f["type"]),
        "params": {k: f[k] for k in ("dim", "max_length", "max_capacity") if k in f},
    }
    out["params"].update(text_params(f))
    if f.get("element_type"):
        out["element_type"] = DataType.parse(f["element_type"])
    for key in ("is_primary", "auto_id", "nullable", "is_partition_key", "is_clustering_key"):
        if f.get(key):
            out[key] = True
    if f.get("default_value") is not None:
        out["default_value"] = f["default_value"]
    return out


def milvus_function(fn: dict[str, Any]) -> dict[str, Any]:
    """A schema function as pymilvus describes it (``type`` a ``FunctionType``)."""
    return {
        "name": fn.get("name", ""),
        "description": fn.get("description", ""),
        "type": FunctionType.parse(fn.get("type")),
        "input_field_names": list(fn.get("input_field_names") or []),
        "output_field_names": list(fn.get("output_field_names") or []),
        "params": dict(fn.get("params") or {}),
    }


def _as_pymilvus(settings: dict[str, str]) -> dict[str, Any]:
    """A field's stored settings as pymilvus shows them: ``mmap.enabled`` as the boolean
    ``mmap_enabled``."""
    out: dict[str, Any] = {k: v for k, v in settings.items() if k not in MMAP_KEYS}
    if "mmap.enabled" in settings:
        out["mmap_enabled"] = settings["mmap.enabled"] == "true"
    return out


def milvus_description(desc: dict[str, Any]) -> dict[str, Any]:
    """Add pymilvus's ``describe_collection`` keys to Elanus's reply (which keeps its own:
    ``name``, ``db``, ``schema``, ``vchannels``, ``partitions``, ...)."""
    schema = desc.get("schema")
    if not isinstance(schema, dict):
        return desc
    functions = [milvus_function(fn) for fn in schema.get("functions") or []]
    outputs = {name for fn in functions for name in fn["output_field_names"]}
    fields = [milvus_field(f) for f in schema.get("fields", [])]
    settings = desc.get("field_properties") or {}
    for f in fields:
        if f["name"] in settings:  # mmap.enabled, warm-up: with the field's params
            f["params"] = {**f.get("params", {}), **_as_pymilvus(settings[f["name"]])}
        if f["name"] in outputs:
            f["is_function_output"] = True
    primary = next((f for f in fields if f.get("is_primary")), {})
    return {
        **desc,
        "collection_name": desc.get("name"),
        "auto_id": bool(primary.get("auto_id")),
        "fields": fields,
        "functions": functions,
        "aliases": list(desc.get("aliases") or []),
        "enable_dynamic_field": bool(schema.get("enable_dynamic_field", False)),
        "consistency_level_name": desc.get("consistency_level"),
        "num_partitions": len(desc.get("partitions") or []),
        "enable_namespace": False,  # Milvus 2.6's namespaces: Elanus has none
        "schema_version": int(schema.get("version") or 0),
    }


class QueryIterator:
    """pymilvus's query iterator: ``next()`` gives the next page (``[]`` once done) and
    ``close()`` ends it; iterating it yields the pages too."""

    def __init__(self, pages: Iterator[list[dict[str, Any]]]) -> None:
        self._pages: Iterator[list[dict[str, Any]]] | None = pages

    def next(self) -> list[dict[str, Any]]:
        if self._pages is None:
            return []
        page = next(self._pages, None)
        if page is None:
            self.close()
            return []
        return page

    def close(self) -> None:
        self._pages = None

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:
        while page := self.next():
            yield page


class SearchIterator(QueryIterator):
    """pymilvus's search iterator: ``next()`` gives the next page of hits (``Hits`` of
    ``{"id", "distance", "entity"}``, best first; ``[]`` once done) and ``close()`` ends it."""

    def next(self) -> list[dict[str, Any]]:
        return Hits(super().next())  # type: ignore[return-value]
