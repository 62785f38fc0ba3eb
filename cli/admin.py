"""Client commands: ``status``, ``collection ...`` (``collection alias ...``) and
``partition ...``.

Each command is one ``run_action`` call: what to ask the proxy, and how to show the answer
to people (``--json`` prints the answer itself). Past 600 lines: one short command per
collection call, each a few option declarations; splitting the ``collection`` group
across modules would only scatter them.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType

from elanus.cli.context import JsonOpt, UriOpt, option, run_action
from elanus.cli.fields import collection_alter_field
from elanus.cli.output import duration, kv_table, table
from elanus.client.client import Client
from elanus.client.replies import DescribedCollection
from elanus.consistency import ConsistencyLevel
from elanus.errors import ElanusError, ErrorCode
from elanus.ops.replies import AliasList
from elanus.tsutil import to_unix_seconds

collection_app = typer.Typer(
    help="Create, list, describe, rename, add/alter fields of and drop collections.",
    no_args_is_help=True,
)
collection_app.command("alter-field")(collection_alter_field)  # its own module: cli/fields.py
alias_app = typer.Typer(
    help="Create, list, describe, move (alter) and drop aliases of collections.",
    no_args_is_help=True,
)
partition_app = typer.Typer(
    help="Create, list and drop partitions of a collection.", no_args_is_help=True
)

CollectionArg = Annotated[str, typer.Argument(help="Collection name.", show_default=False)]
AliasArg = Annotated[str, typer.Argument(help="Alias name.", show_default=False)]
PartitionArg = Annotated[str, typer.Argument(help="Partition name.", show_default=False)]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def _confirm(question: str, yes: bool) -> None:
    """Destructive commands ask first; scripts without a terminal must say --yes."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise typer.BadParameter(
            "refusing to ask without a terminal; pass --yes", param_hint="--yes"
        )
    if not typer.confirm(question, default=False):
        raise typer.Abort()


def _done(message: str) -> Any:
    return lambda _result: f"[green]✓[/green] {message}"


# -- status -----------------------------------------------------------------------------------
def status(ctx: typer.Context, as_json: JsonOpt = False, uri: UriOpt = None) -> None:
    """List the live roles (sessions) of the cluster behind the proxy, standbys included:
    restarts, health, memory and flow control, then each consumed channel's tick lag and
    unfetched messages, then where each replica of a loaded collection is (``--json``: the
    sessions only)."""

    def render(sessions: list[dict[str, Any]]) -> RenderableType:
        rows = [
            (
                _role(s),
                s.get("node_id"),
                s.get("address") or "-",
                duration(s.get("uptime_s")),
                (s.get("meta") or {}).get("restarts") or 0,
                s.get("pid"),
                s.get("host"),
                _memory((s.get("meta") or {}).get("rss_bytes")),
                (s.get("meta") or {}).get("flow_control") or "-",
                _health((s.get("meta") or {}).get("health")),
            )
            for s in sessions
        ]
        roles = table(
            [
                "role",
                "id",
                "address",
                "uptime",
                "restarts",
                "pid",
                "host",
                "memory",
                "flow control",
                "health",
            ],  # fmt: skip
            rows,
            title=f"{len(rows)} live role(s)",
        )
        channels = [
            (s.get("role"), s.get("node_id"), vchannel, _lag(c.get("tick_lag_s")), c.get("pending"))
            for s in sessions
            for vchannel, c in sorted(((s.get("meta") or {}).get("channels") or {}).items())
        ]
        more = [
            (["role", "id", "channel", "tick lag", "pending msgs"], channels,
             "consumed channel(s)"),
            (["collection", "replica", "query nodes", "shard leaders", "serving"], placement,
             "replica(s) of the loaded collections"),
        ]  # fmt: skip
        return Group(
            roles, *(table(h, rows, title=f"{len(rows)} {what}") for h, rows, what in more if rows)
        )

    placement: list[tuple[Any, ...]] = []

    def ask(client: Any) -> list[dict[str, Any]]:
        sessions = client.list_sessions()
        if not as_json:
            placement.extend(_placement(client))
        return sessions

    run_action(ctx, ask, render, as_json=as_json, uri=uri)


def _placement(client: Any) -> list[tuple[Any, ...]]:
    """Each replica of each loaded collection of the default database: where it is."""
    rows = []
    for name in sorted(client.list_collections()):
        if client.get_load_state(name)["state"] != "Loaded":
            continue
        for r in client.describe_replica(name):
            leaders = ", ".join(f"{v} → {n}" for v, n in sorted(r["shard_leaders"].items()))
            rows.append((name, r["replica_id"], ", ".join(r["node_ids"]) or "-",
                         leaders or "-", "yes" if r["serving"] else "no"))  # fmt: skip
    return rows


def _role(session: dict[str, Any]) -> str:
    """The role, and whether it waits as a standby (a coord without the lease)."""
    standby = (session.get("meta") or {}).get("standby")
    return f"{session.get('role')} (standby)" if standby else str(session.get("role"))


def _memory(rss: int | None) -> str:
    """Bytes (a process's resident memory, a collection's share of it) in MiB."""
    return "-" if rss is None else f"{rss / (1 << 20):.0f} MiB"


def _lag(seconds: float | None) -> str:
    return "no tick yet" if seconds is None else f"{seconds:.2f} s"


def _health(health: dict[str, Any] | None) -> str:
    """``ok``, or ``unhealthy:`` and each failed task with its error."""
    failures = (health or {}).get("failures") or []
    if not failures:
        return "ok"
    return "unhealthy: " + "; ".join(f"{f['task']}: {f['error']}" for f in failures)


# -- collections ------------------------------------------------------------------------------
def _load_schema(path: Path) -> dict[str, Any]:
    """The schema file as JSON; the server checks its content and names any problem."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise typer.BadParameter(
            f"cannot read {path}: {exc.strerror}", param_hint="--schema"
        ) from None
    except ValueError as exc:
        raise typer.BadParameter(f"{path} is not JSON: {exc}", param_hint="--schema") from None
    if not isinstance(doc, dict):
        raise typer.BadParameter(
            f"{path} must hold a JSON object with a 'fields' list", param_hint="--schema"
        )
    return doc


@collection_app.command("create")
def collection_create(
    ctx: typer.Context,
    name: CollectionArg,
    dim: Annotated[
        int | None,
        option("--dim", help="Vector dimension (quick setup)."),
    ] = None,
    id_type: Annotated[str, typer.Option("--id-type", help="int64 or varchar.")] = "int64",
    auto_id: Annotated[bool, typer.Option("--auto-id", help="Let Elanus assign ids.")] = False,
    metric: Annotated[str, typer.Option("--metric", help="L2, IP or COSINE.")] = "COSINE",
    schema_file: Annotated[
        Path | None,
        option(
            "--schema",
            help="Schema as JSON ({'fields': [...]}) instead of --dim.",
        ),
    ] = None,
    shards: Annotated[int | None, option("--shards", help="Number of shards.")] = None,
    num_partitions: Annotated[
        int | None,
        option(
            "--num-partitions",
            help="Partitions of a schema with a partition key field (default 16).",
        ),
    ] = None,
    consistency: Annotated[
        str, typer.Option("--consistency", help="Strong, Bounded, Session or Eventually.")
    ] = "Bounded",
    description: Annotated[str, option("--description")] = "",
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Create a collection from a dimension (id + vector fields) or a schema file."""
    if (dim is None) == (schema_file is None):
        raise typer.BadParameter(
            "give exactly one of --dim N or --schema FILE.json", param_hint="--dim/--schema"
        )
    try:
        level = ConsistencyLevel.parse(consistency)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--consistency") from None
    kwargs: dict[str, Any] = {"consistency_level": level.value, "description": description}
    if shards is not None:
        kwargs["num_shards"] = shards
    if num_partitions is not None:  # the server refuses it without a partition key field
        kwargs["num_partitions"] = num_partitions
    if schema_file is not None:
        kwargs["schema"] = _load_schema(schema_file)
    else:
        kwargs.update(dimension=dim, id_type=id_type, auto_id=auto_id, metric_type=metric.upper())

    run_action(
        ctx,
        lambda c: c.create_collection(name, **kwargs),
        lambda d: (
            f"[green]✓[/green] created collection [bold]{d['name']}[/bold] "
            f"(id {d.get('collection_id')}, {d.get('num_shards')} shard(s))"
        ),
        as_json=as_json,
        uri=uri,
    )


@collection_app.command("list")
def collection_list(ctx: typer.Context, as_json: JsonOpt = False, uri: UriOpt = None) -> None:
    """List collection names."""
    run_action(
        ctx,
        lambda c: sorted(c.list_collections()),
        lambda names: table(
            ["collection"], [[n] for n in names], title=f"{len(names)} collection(s)"
        ),
        as_json=as_json,
        uri=uri,
    )


def _field_params(f: dict[str, Any]) -> str:
    keys = ("dim", "max_length", "element_type", "max_capacity", "default_value")
    return ", ".join(f"{k}={f[k]}" for k in keys if f.get(k) is not None)


def _hybrid_ts(ts: Any) -> str:
    if not isinstance(ts, int):
        return "-"
    when = datetime.fromtimestamp(to_unix_seconds(ts)).astimezone()
    return f"{when:%Y-%m-%d %H:%M:%S %Z} (ts {ts})"


def _partition_key(fields: list[dict[str, Any]], partitions: list[Any]) -> str:
    """The key field and its partition count: what ``--num-partitions`` set at creation."""
    key = next((f.get("name") for f in fields if f.get("is_partition_key")), None)
    return f"{key} ({len(partitions)} partitions)" if key else "-"


class ShownCollection(DescribedCollection, total=False):
    """What ``collection describe`` shows: the description, and its load state."""

    load: dict[str, Any]


def render_collection(d: ShownCollection) -> RenderableType:
    schema = d.get("schema") or {}
    fields_list = schema.get("fields") or []
    summary = {
        "name": d.get("name"),
        "database": d.get("db"),
        "collection id": d.get("collection_id"),
        "description": d.get("description") or schema.get("description") or "-",
        "shards": d.get("num_shards"),
        "consistency": d.get("consistency_level"),
        "dynamic field": schema.get("enable_dynamic_field", False),
        "vchannels": ", ".join(d.get("vchannels") or []),
        "partitions": ", ".join(p.get("name", "") for p in d.get("partitions") or []),
        "partition key": _partition_key(fields_list, d.get("partitions") or []),
        "clustering key": next(
            (f.get("name") for f in fields_list if f.get("is_clustering_key")), "-"
        ),
        "aliases": ", ".join(d.get("aliases") or []) or "-",
        "created": _hybrid_ts(d.get("created_ts")),
        "loaded": _loaded(d.get("load")),
    }
    fields = table(
        ["field", "id", "type", "primary", "auto id", "nullable", "params"],
        [
            (
                f.get("name"),
                f.get("field_id"),
                f.get("type"),
                "yes" if f.get("is_primary") else "",
                "yes" if f.get("auto_id") else "",
                "yes" if f.get("nullable") else "",
                _field_params(f),
            )
            for f in fields_list
        ],
        title="fields",
    )
    parts: list[RenderableType] = [kv_table(summary), "", fields]
    functions = schema.get("functions") or []
    if functions:
        rows = [
            (
                fn.get("name"),
                fn.get("type"),
                ", ".join(fn.get("input_field_names") or []),
                ", ".join(fn.get("output_field_names") or []),
            )
            for fn in functions
        ]
        parts += ["", table(["function", "type", "input", "output"], rows, title="functions")]
    properties = d.get("properties") or {}
    if properties:
        parts += ["", table(["property", "value"], sorted(properties.items()), title="properties")]
    return Group(*parts)


def _loaded(load: dict[str, Any] | None) -> str:
    """The load state, and the memory its query nodes hold of a loaded collection."""
    if not load:
        return "-"  # the caller may not see load states
    state = str(load.get("state"))
    if "memory_bytes" not in load:
        return state
    held = _memory(load["memory_bytes"])
    mapped = int(load.get("mapped_bytes") or 0)
    also = f", {_memory(mapped)} mapped from disk" if mapped else ""
    return f"{state} ({load.get('progress')} %), {held} in memory on its query nodes{also}"


def _with_load(client: Client, name: str) -> ShownCollection:
    """``describe_collection``, with ``load``: ``get_load_state``'s answer (state,
    progress, rows, the bytes held in memory), left out for a user not allowed to see it."""
    shown: ShownCollection = {**client.describe_collection(name)}
    try:
        load = client.get_load_state(name)
    except ElanusError as exc:
        if exc.code != ErrorCode.PERMISSION_DENIED:
            raise
        return shown
    shown["load"] = {**load, "state": str(load["state"])}
    return shown


@collection_app.command("describe")
def collection_describe(
    ctx: typer.Context, name: CollectionArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """Show a collection's schema, shards, partitions, properties, and whether it is
    loaded, with the memory its query nodes hold of it."""
    run_action(ctx, lambda c: _with_load(c, name), render_collection, as_json=as_json, uri=uri)


@collection_app.command("drop")
def collection_drop(
    ctx: typer.Context,
    name: CollectionArg,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Drop a collection and all its data."""
    _confirm(f"Drop collection {name!r} and all its data?", yes)

    def drop(client: Any) -> dict[str, Any]:
        client.drop_collection(name)
        return {"dropped": name}

    run_action(
        ctx, drop, _done(f"dropped collection [bold]{name}[/bold]"), as_json=as_json, uri=uri
    )


@collection_app.command("rename")
def collection_rename(
    ctx: typer.Context,
    old: CollectionArg,
    new: Annotated[str, typer.Argument(help="New name.", show_default=False)],
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Rename a collection."""

    def rename(client: Any) -> dict[str, Any]:
        client.rename_collection(old, new)
        return {"renamed": old, "to": new}

    run_action(
        ctx,
        rename,
        _done(f"renamed collection [bold]{old}[/bold] to [bold]{new}[/bold]"),
        as_json=as_json,
        uri=uri,
    )


@collection_app.command("add-field")
def collection_add_field(
    ctx: typer.Context,
    name: CollectionArg,
    field: Annotated[str, typer.Argument(help="New field's name.", show_default=False)],
    dtype: Annotated[
        str, typer.Option("--type", help="Scalar type: Int64, VarChar, JSON, Array...")
    ],
    max_length: Annotated[int | None, typer.Option(help="VarChar's max length.")] = None,
    element_type: Annotated[str | None, typer.Option(help="Array's element type.")] = None,
    max_capacity: Annotated[int | None, typer.Option(help="Array's max capacity.")] = None,
    default: Annotated[
        str | None, typer.Option(help="Default value (JSON, or plain text); existing rows read it.")
    ] = None,
    description: Annotated[str, typer.Option(help="Field description.")] = "",
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Add a nullable scalar field to a collection; its rows so far read the default, or
    null."""
    kwargs: dict[str, Any] = {"nullable": True}
    for key, value in (
        ("max_length", max_length),
        ("element_type", element_type),
        ("max_capacity", max_capacity),
    ):
        if value is not None:
            kwargs[key] = value
    if default is not None:
        try:
            kwargs["default_value"] = json.loads(default)
        except json.JSONDecodeError:  # plain text: a VarChar default
            kwargs["default_value"] = default

    def add(client: Any) -> dict[str, Any]:
        client.add_collection_field(name, field, dtype, desc=description, **kwargs)
        return {"collection": name, "added": field}

    run_action(
        ctx,
        add,
        _done(f"added field [bold]{field}[/bold] to collection [bold]{name}[/bold]"),
        as_json=as_json,
        uri=uri,
    )


@collection_app.command("drop-field")
def collection_drop_field(
    ctx: typer.Context,
    name: CollectionArg,
    field: Annotated[str, typer.Argument(help="The field to drop.", show_default=False)],
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Drop a field: its values are never read again and its indexes go (not the primary
    key, the partition key, a function's field or the last vector field)."""

    def drop(client: Any) -> dict[str, Any]:
        client.drop_collection_field(name, field)
        return {"collection": name, "dropped": field}

    run_action(
        ctx,
        drop,
        _done(f"dropped field [bold]{field}[/bold] of collection [bold]{name}[/bold]"),
        as_json=as_json,
        uri=uri,
    )


@collection_app.command("drop-function")
def collection_drop_function(
    ctx: typer.Context,
    name: CollectionArg,
    function: Annotated[str, typer.Argument(help="The function to drop.", show_default=False)],
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Drop a function (BM25) with its output field; its input field stays."""

    def drop(client: Any) -> dict[str, Any]:
        client.drop_function_field(name, function)
        return {"collection": name, "dropped_function": function}

    run_action(
        ctx,
        drop,
        _done(f"dropped function [bold]{function}[/bold] of collection [bold]{name}[/bold]"),
        as_json=as_json,
        uri=uri,
    )


# -- aliases ----------------------------------------------------------------------------------
collection_app.add_typer(alias_app, name="alias")


def _alias_change(
    ctx: typer.Context, method: str, verb: str, collection: str, alias: str, **opts: Any
) -> None:
    """``create_alias`` or ``alter_alias``: the same arguments, the same answer."""

    def run(client: Any) -> dict[str, Any]:
        getattr(client, method)(collection, alias)
        return {"alias": alias, "collection": collection}

    shown = _done(f"{verb} alias [bold]{alias}[/bold] for [bold]{collection}[/bold]")
    run_action(ctx, run, shown, **opts)


@alias_app.command("create")
def alias_create(
    ctx: typer.Context,
    collection: CollectionArg,
    alias: AliasArg,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Give a collection another name; every data command accepts it."""
    _alias_change(ctx, "create_alias", "created", collection, alias, as_json=as_json, uri=uri)


@alias_app.command("alter")
def alias_alter(
    ctx: typer.Context,
    collection: CollectionArg,
    alias: AliasArg,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Point an existing alias at another collection."""
    _alias_change(ctx, "alter_alias", "moved", collection, alias, as_json=as_json, uri=uri)


@alias_app.command("drop")
def alias_drop(
    ctx: typer.Context, alias: AliasArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """Drop an alias (its collection stays)."""

    def drop(client: Any) -> dict[str, Any]:
        client.drop_alias(alias)
        return {"dropped": alias}

    run_action(ctx, drop, _done(f"dropped alias [bold]{alias}[/bold]"), as_json=as_json, uri=uri)


@alias_app.command("describe")
def alias_describe(
    ctx: typer.Context, alias: AliasArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """Show the collection an alias names."""
    run_action(ctx, lambda c: c.describe_alias(alias), kv_table, as_json=as_json, uri=uri)


@alias_app.command("list")
def alias_list(
    ctx: typer.Context,
    collection: Annotated[
        str, typer.Argument(help="Only this collection's aliases.", show_default=False)
    ] = "",
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """List the aliases of a collection, or of the whole database."""

    def render(d: AliasList) -> RenderableType:
        names = d.get("aliases") or []
        where = d.get("collection_name") or f"database {d.get('db_name')}"
        return table(["alias"], [[n] for n in names], title=f"{where}: {len(names)} alias(es)")

    run_action(ctx, lambda c: c.list_aliases(collection), render, as_json=as_json, uri=uri)


# -- partitions -------------------------------------------------------------------------------
@partition_app.command("create")
def partition_create(
    ctx: typer.Context,
    collection: CollectionArg,
    partition: PartitionArg,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Create a partition in a collection."""

    def create(client: Any) -> dict[str, Any]:
        client.create_partition(collection, partition)
        return {"created": partition, "collection": collection}

    run_action(
        ctx,
        create,
        _done(f"created partition [bold]{partition}[/bold] in [bold]{collection}[/bold]"),
        as_json=as_json,
        uri=uri,
    )


@partition_app.command("list")
def partition_list(
    ctx: typer.Context, collection: CollectionArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """List the partitions of a collection."""
    run_action(
        ctx,
        lambda c: list(c.list_partitions(collection)),
        lambda names: table(
            ["partition"], [[n] for n in names], title=f"{collection}: {len(names)} partition(s)"
        ),
        as_json=as_json,
        uri=uri,
    )


@partition_app.command("drop")
def partition_drop(
    ctx: typer.Context,
    collection: CollectionArg,
    partition: PartitionArg,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Drop a partition and its data."""
    _confirm(f"Drop partition {partition!r} of {collection!r} and its data?", yes)

    def drop(client: Any) -> dict[str, Any]:
        client.drop_partition(collection, partition)
        return {"dropped": partition, "collection": collection}

    run_action(
        ctx,
        drop,
        _done(f"dropped partition [bold]{partition}[/bold] of [bold]{collection}[/bold]"),
        as_json=as_json,
        uri=uri,
    )
