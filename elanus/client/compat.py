"""pymilvus-shaped pieces of the SDK that are not calls: index parameter lists, the
``describe_collection`` view a ``MilvusClient`` user reads, the iterator objects,
and the check that turns a keyword Elanus does not know into a named error.

Pure: no Flight, so the CLI and tests can use these without a server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Generic, Literal, TypeVar

from elanus.client.replies import DescribedCollection, IndexSpec, MilvusField, MilvusFunction
from elanus.client.results import Hit, Hits
from elanus.errors import ElanusError, ErrorCode
from elanus.functions import FunctionType
from elanus.ops.replies import (
    CollectionDescription,
    FieldDocument,
    FunctionDocument,
    SearchHit,
)
from elanus.properties import MMAP_KEYS
from elanus.schema import DataType

T = TypeVar("T")


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

    def to_dict(self) -> IndexSpec:
        d = IndexSpec(field_name=self.field_name, index_type=self.index_type)
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


# The keys of a schema document's field that pymilvus shows elsewhere: flags at the top
# level only when set, sizes and text flags under ``params``.
FLAGS: tuple[Literal["is_primary", "auto_id", "nullable", "is_partition_key",
                     "is_clustering_key"], ...] = (
    "is_primary", "auto_id", "nullable", "is_partition_key", "is_clustering_key",
)  # fmt: skip
SIZES: tuple[Literal["dim", "max_length", "max_capacity"], ...] = (
    "dim", "max_length", "max_capacity",
)  # fmt: skip
TEXT_FLAGS: tuple[Literal["enable_analyzer", "enable_match"], ...] = (
    "enable_analyzer", "enable_match",
)  # fmt: skip


def text_params(f: FieldDocument) -> dict[str, str]:
    """An analysed field's settings as pymilvus shows Milvus's type params: text, the
    flags ``'true'`` and the analyzer's parameters as JSON (only those that are set)."""
    out: dict[str, str] = {k: "true" for k in TEXT_FLAGS if f.get(k)}
    if f.get("analyzer_params") is not None:
        out["analyzer_params"] = json.dumps(f["analyzer_params"])
    return out


def milvus_field(f: FieldDocument) -> MilvusField:
    """One field of the schema document as pymilvus describes it: ``type`` a
    ``DataType``, sizes and text settings under ``params``."""
    out = MilvusField(
        field_id=f.get("field_id"),
        name=f["name"],
        description=f.get("description", ""),
        type=DataType.parse(f["type"]),
        params={k: f[k] for k in SIZES if k in f},
    )
    out["params"].update(text_params(f))
    if f.get("element_type"):
        out["element_type"] = DataType.parse(f["element_type"])
    for key in FLAGS:
        if f.get(key):
            out[key] = True
    if f.get("default_value") is not None:
        out["default_value"] = f["default_value"]
    return out


def milvus_function(fn: FunctionDocument) -> MilvusFunction:
    """A function of the schema document as pymilvus describes it (``type`` a
    ``FunctionType``)."""
    return MilvusFunction(
        name=fn.get("name", ""),
        description=fn.get("description", ""),
        type=FunctionType.parse(fn.get("type")),
        input_field_names=list(fn.get("input_field_names") or []),
        output_field_names=list(fn.get("output_field_names") or []),
        params=dict(fn.get("params") or {}),
    )


def _as_pymilvus(settings: dict[str, str]) -> dict[str, str | bool]:
    """A field's stored settings as pymilvus shows them: ``mmap.enabled`` as the boolean
    ``mmap_enabled``."""
    out: dict[str, str | bool] = {k: v for k, v in settings.items() if k not in MMAP_KEYS}
    if "mmap.enabled" in settings:
        out["mmap_enabled"] = settings["mmap.enabled"] == "true"
    return out


def milvus_description(desc: CollectionDescription) -> DescribedCollection:
    """Add pymilvus's ``describe_collection`` keys to Elanus's reply (which keeps its own:
    ``name``, ``db``, ``schema``, ``vchannels``, ``partitions``, ...)."""
    schema = desc["schema"]
    functions = [milvus_function(fn) for fn in schema.get("functions") or []]
    outputs = {name for fn in functions for name in fn["output_field_names"]}
    fields = [milvus_field(f) for f in schema.get("fields", [])]
    settings = desc.get("field_properties") or {}
    for f in fields:
        if f["name"] in settings:  # mmap.enabled, warm-up: with the field's params
            f["params"] = {**f.get("params", {}), **_as_pymilvus(settings[f["name"]])}
        if f["name"] in outputs:
            f["is_function_output"] = True
    primary = next((f for f in fields if f.get("is_primary")), None)
    return {
        **desc,
        "collection_name": desc["name"],
        "auto_id": bool(primary and primary.get("auto_id")),
        "fields": fields,
        "functions": functions,
        "aliases": list(desc.get("aliases") or []),
        "enable_dynamic_field": bool(schema.get("enable_dynamic_field", False)),
        "consistency_level_name": desc["consistency_level"],
        "num_partitions": len(desc.get("partitions") or []),
        "enable_namespace": False,  # Milvus 2.6's namespaces: Elanus has none
        "schema_version": int(schema.get("version") or 0),
    }


class _Pages(Generic[T]):
    """Pages read one at a time: ``next()`` gives the next (``[]`` once done) and
    ``close()`` ends the walk; iterating yields the pages too."""

    def __init__(self, pages: Iterator[list[T]]) -> None:
        self._pages: Iterator[list[T]] | None = pages

    def next(self) -> list[T]:
        if self._pages is None:
            return []
        page = next(self._pages, None)
        if page is None:
            self.close()
            return []
        return page

    def close(self) -> None:
        self._pages = None

    def __iter__(self) -> Iterator[list[T]]:
        while page := self.next():
            yield page


class QueryIterator(_Pages[dict[str, Any]]):
    """pymilvus's query iterator: pages of rows (each keyed by the output fields)."""


class SearchIterator(_Pages[Hit]):
    """pymilvus's search iterator: ``next()`` gives the next page of hits (``Hits`` of
    ``{"id", "distance", "entity"}``, best first; ``[]`` once done) and ``close()`` ends it."""

    def __init__(self, pages: Iterator[list[SearchHit]]) -> None:
        super().__init__(Hits(page) for page in pages)

    def next(self) -> Hits:
        page = super().next()
        return page if isinstance(page, Hits) else Hits(page)
