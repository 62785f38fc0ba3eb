"""Read commands: ``load`` / ``release`` a collection, ``search`` it with query vectors from a
.npy or .json file (or with query text, on a BM25 function's output field), and ``query`` it
with a filter expression.

``search`` never loads implicitly: a collection that is not loaded is the server's
``COLLECTION_NOT_LOADED`` error, one line and exit 1, like every other failure. A vector file
that is missing or unreadable is a usage error (exit 2) naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.console import Group, RenderableType

from elanus.cli.admin import CollectionArg
from elanus.cli.context import JsonOpt, UriOpt, json_object, option, run_action
from elanus.cli.output import kv_table, table
from elanus.consistency import ConsistencyLevel
from elanus.ops.replies import LoadProgress

if TYPE_CHECKING:
    from elanus.client.client import Client
    from elanus.client.results import SearchResult

METRICS = ("L2", "IP", "COSINE", "HAMMING", "JACCARD", "BM25")
_BINARY_METRICS = ("HAMMING", "JACCARD")
COUNT = "count(*)"

VectorFileOpt = Annotated[
    Path | None,
    option(
        "--vector-file",
        help="Query vectors: a .npy array (2-D, or 1-D for one query) or a .json list.",
    ),
]
TextOpt = Annotated[
    list[str] | None,
    option(
        "--text",
        help="Query text for a BM25 function's output field (repeat for several queries); "
        "instead of --vector-file.",
    ),
]
PartitionsOpt = Annotated[
    list[str] | None,
    option("--partition", "-p", help="Partition to read (repeat for several)."),
]
SearchParamsOpt = Annotated[
    str | None,
    option(
        "--params",
        help='Index search parameters as JSON, e.g. {"ef": 64} or {"nprobe": 16}.',
    ),
]
LimitOpt = Annotated[int, typer.Option("--limit", "-k", min=1, help="Hits per query.")]
FilterOpt = Annotated[str, option("--filter", help="Boolean filter expression.")]
OutputFieldsOpt = Annotated[
    str | None,
    option(
        "--output-fields",
        help="Comma-separated fields to return (e.g. id,title).",
    ),
]
MetricOpt = Annotated[
    str | None,
    option(
        "--metric",
        help="L2, IP, COSINE, HAMMING, JACCARD or BM25 (default: the field's).",
    ),
]
ConsistencyOpt = Annotated[
    str | None,
    option(
        "--consistency",
        help="Strong, Bounded, Session or Eventually (default: Strong, so a command sees "
        "what the commands before it wrote).",
    ),
]
OffsetOpt = Annotated[int, typer.Option("--offset", min=0, help="Hits (or rows) to skip.")]
CLI_LEVEL = "Strong"
"""The level of a read that names none. Each ``elanus`` command is a client of its own,
so the SDK's default (the collection's level, raised to the client's own writes) would
leave out what ``elanus insert`` wrote a moment before; Strong sees every write that was
acknowledged before the command started, for the price of one forced time tick."""
AnnsFieldOpt = Annotated[
    str | None,
    option(
        "--anns-field",
        help="Vector field to search (a BM25 output field for --text).",
    ),
]
ExprArg = Annotated[
    str | None,
    typer.Argument(
        help="The filter, as --filter gives it (kept for scripts written before --filter).",
        show_default=False,
    ),
]


# =============================================================================================
# Options
# =============================================================================================
def split_fields(text: str | None) -> list[str] | None:
    if text is None:
        return None
    fields = [f.strip() for f in text.split(",") if f.strip()]
    return fields or None


def check_consistency(value: str | None) -> str:
    if value is None:
        return CLI_LEVEL
    try:
        return ConsistencyLevel.parse(value).value
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--consistency") from None


def check_metric(value: str | None) -> str | None:
    if value is None:
        return None
    metric = value.upper()
    if metric not in METRICS:
        raise typer.BadParameter(
            f"unknown metric {value!r}; expected one of {', '.join(METRICS)}",
            param_hint="--metric",
        )
    return metric


def _bad_file(path: Path, why: str) -> typer.BadParameter:
    return typer.BadParameter(f"{path}: {why}", param_hint="--vector-file")


def read_vectors(path: Path, binary: bool = False) -> np.ndarray:
    """The query vectors of a .npy or .json file as a 2-D array (float32, or uint8 bytes for
    binary metrics); usage errors naming the file otherwise."""
    suffix = path.suffix.lower()
    if suffix not in (".npy", ".json"):
        raise _bad_file(path, "unknown file type; expected .npy or .json")
    if not path.exists():
        raise _bad_file(path, "no such file")
    if not path.is_file():
        raise _bad_file(path, "not a file")
    try:
        if suffix == ".npy":
            raw = np.load(path, allow_pickle=False)
        else:
            raw = np.asarray(json.loads(path.read_text()))
    except OSError as exc:
        raise _bad_file(path, exc.strerror or str(exc)) from None
    except (ValueError, UnicodeDecodeError) as exc:  # bad .npy header, bad JSON, ragged lists
        raise _bad_file(path, f"cannot read: {' '.join(str(exc).split())}") from None
    if raw.dtype.kind not in "biuf":
        raise _bad_file(path, f"expected numbers, got {raw.dtype}")
    if raw.ndim == 1:
        raw = raw.reshape(1, -1)
    if raw.ndim != 2 or raw.shape[0] == 0 or raw.shape[1] == 0:
        raise _bad_file(path, f"expected a 2-D array of query vectors, got shape {raw.shape}")
    if binary:
        if raw.dtype.kind not in "biu" or raw.min() < 0 or raw.max() > 255:
            raise _bad_file(path, "binary queries must be bytes (integers 0-255)")
        return raw.astype(np.uint8)
    return raw.astype(np.float32)


# =============================================================================================
# elanus load / elanus release
# =============================================================================================
class LoadShown(LoadProgress, total=False):
    """What ``load`` and ``release`` show: the load state, and the replicas when there
    are several."""

    replicas: list[dict[str, Any]]


def _render_state(collection: str, verb: str) -> Callable[[LoadShown], RenderableType]:
    def render(state: LoadShown) -> RenderableType:
        values = {
            "state": state.get("state"),
            "progress": f"{state.get('progress', 0)}%",
            "loaded rows": state.get("loaded_rows"),
            "persisted rows": state.get("persisted_rows"),
        }
        for r in state.get("replicas") or []:
            values[f"replica {r['replica_id']}"] = ", ".join(r["node_ids"]) or "(not placed)"
        return kv_table(values, title=f"✓ {verb} {collection}")

    return render


def load(
    ctx: typer.Context,
    collection: Annotated[
        str | None, typer.Argument(help="Collection name (or --all).", show_default=False)
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Load every collection of the database.")
    ] = False,
    partitions: PartitionsOpt = None,
    replicas: Annotated[
        int,
        typer.Option(
            "--replicas",
            min=1,
            help="In-memory copies, each on query nodes of its own (at most one per node).",
        ),
    ] = 1,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Load a collection (or only --partition ones, or --all collections) so it can be
    searched and queried."""
    if every == (collection is not None):
        raise typer.BadParameter(
            "name one collection, or pass --all", param_hint="COLLECTION/--all"
        )
    if every and partitions:
        raise typer.BadParameter("--partition names one collection's", param_hint="--partition")

    def one(client: Client, name: str) -> LoadShown:
        client.load_collection(name, partition_names=partitions or None, replica_number=replicas)
        state: LoadShown = {**client.get_load_state(name)}
        if replicas > 1:
            state["replicas"] = client.describe_replica(name)
        return state

    if collection is not None:
        render = _render_state(collection, "loaded")
        run_action(ctx, lambda c: one(c, collection), render, as_json=as_json, uri=uri)
        return

    def load_all(client: Client) -> dict[str, LoadShown]:
        return {name: one(client, name) for name in sorted(client.list_collections())}

    run_action(ctx, load_all, _render_loaded, as_json=as_json, uri=uri)


def _render_loaded(states: dict[str, LoadShown]) -> RenderableType:
    rows = [
        (name, s.get("state"), s.get("loaded_rows"), s.get("persisted_rows"))
        for name, s in states.items()
    ]
    title = f"✓ loaded {len(rows)} collection(s)"
    return table(["collection", "state", "loaded rows", "persisted rows"], rows, title=title)


def release(
    ctx: typer.Context, collection: CollectionArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """Release a loaded collection from the query nodes."""

    def action(client: Client) -> LoadShown:
        client.release_collection(collection)
        return {**client.get_load_state(collection)}

    run_action(ctx, action, _render_state(collection, "released"), as_json=as_json, uri=uri)


# =============================================================================================
# elanus search
# =============================================================================================
def _entity_columns(hits: Sequence[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for hit in hits:
        for key in hit.get("entity") or {}:
            if key not in columns:
                columns.append(key)
    return columns


def _cell(value: Any) -> Any:
    if isinstance(value, list | dict):
        text = json.dumps(value, default=str)
        return text if len(text) <= 60 else text[:57] + "..."
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def render_search(collection: str) -> Any:
    def render(results: SearchResult) -> RenderableType:
        tables: list[RenderableType] = []
        for q, hits in enumerate(results):
            extra = _entity_columns(hits)
            tables.append(
                table(
                    ["rank", "id", "distance", *extra],
                    [
                        (
                            rank,
                            hit.get("id"),
                            _cell(hit.get("distance")),
                            *(_cell((hit.get("entity") or {}).get(c)) for c in extra),
                        )
                        for rank, hit in enumerate(hits, start=1)
                    ],
                    title=f"{collection}: query {q}, {len(hits)} hit(s)",
                )
            )
        return Group(*tables) if tables else "no queries"

    return render


def search_queries(
    vector_file: Path | None, texts: list[str] | None, metric: str | None
) -> np.ndarray | list[str]:
    """The queries of a search: exactly one of a vector file or query texts, so a typo never
    silently searches with the wrong kind of query."""
    if (vector_file is None) == (not texts):
        raise typer.BadParameter(
            "give exactly one of --vector-file FILE or --text QUERY (repeatable)",
            param_hint="--vector-file/--text",
        )
    if vector_file is None:
        return list(texts or ())
    return read_vectors(vector_file, binary=metric in _BINARY_METRICS)


def search(
    ctx: typer.Context,
    collection: CollectionArg,
    vector_file: VectorFileOpt = None,
    text: TextOpt = None,
    limit: LimitOpt = 10,
    offset: OffsetOpt = 0,
    filter: FilterOpt = "",
    output_fields: OutputFieldsOpt = None,
    metric: MetricOpt = None,
    consistency: ConsistencyOpt = None,
    anns_field: AnnsFieldOpt = None,
    params: SearchParamsOpt = None,
    partitions: PartitionsOpt = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Search a loaded collection with the query vectors of a .npy or .json file, or with
    --text on a full-text (BM25) field."""
    metric = check_metric(metric)
    search_params: dict[str, Any] = {"params": json_object(params, "--params")}
    if metric:
        search_params["metric_type"] = metric
    level = check_consistency(consistency)
    queries = search_queries(vector_file, text, metric)
    fields = split_fields(output_fields)

    def action(client: Client) -> SearchResult:
        return client.search(
            collection,
            queries,
            limit=limit,
            offset=offset,
            filter=filter,
            output_fields=fields,
            search_params=search_params,
            anns_field=anns_field,
            partition_names=partitions or None,
            consistency_level=level,
        )

    run_action(ctx, action, render_search(collection), as_json=as_json, uri=uri)


# =============================================================================================
# elanus query
# =============================================================================================
def render_query(collection: str, fields: list[str] | None) -> Any:
    def render(rows: list[dict[str, Any]]) -> RenderableType:
        if fields == [COUNT] and len(rows) == 1 and COUNT in rows[0]:
            return f"{collection}: count(*) = {rows[0][COUNT]:,}"
        if not rows:
            return f"{collection}: 0 row(s)"
        columns: list[str] = []
        for row in rows:
            for key in row:
                if key not in columns:
                    columns.append(key)
        return table(
            columns,
            [tuple(_cell(row.get(c)) for c in columns) for row in rows],
            title=f"{collection}: {len(rows)} row(s)",
        )

    return render


def query(
    ctx: typer.Context,
    collection: CollectionArg,
    expr: ExprArg = None,
    filter: FilterOpt = "",
    output_fields: OutputFieldsOpt = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", "-k", min=1, help="Rows to return.", show_default=False),
    ] = None,
    offset: OffsetOpt = 0,
    consistency: ConsistencyOpt = None,
    partitions: PartitionsOpt = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Rows of a loaded collection matching --filter (all rows, with --limit); --output-fields
    count(*) counts them."""
    if expr is not None and filter:
        raise typer.BadParameter(
            "give the filter once: as --filter (or, as before, as the argument)",
            param_hint="--filter",
        )
    level = check_consistency(consistency)
    fields = split_fields(output_fields)

    def action(client: Client) -> list[dict[str, Any]]:
        return client.query(
            collection,
            filter or expr or "",
            output_fields=fields,
            limit=limit,
            offset=offset,
            partition_names=partitions or None,
            consistency_level=level,
        )

    run_action(ctx, action, render_query(collection, fields), as_json=as_json, uri=uri)
