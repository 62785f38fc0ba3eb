"""``elanus watch COLLECTION``: the collection's change stream as JSON Lines on stdout.

One line per change (``_op``, ``_ts``, then the fields; a delete has its key only), read
from the log through ``Client.watch`` (``elanus/client/changes.py``), so the output is the
SDK's and the Spark source's rows. The log's NATS credentials come from
``ELANUS_NATS_USER`` / ``ELANUS_NATS_PASSWORD``, as a role's do.
"""

from __future__ import annotations

import base64
import sys
from typing import Annotated, Any

import orjson
import typer

from elanus.cli.admin import CollectionArg
from elanus.cli.context import CliState, UriOpt, connect


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):  # binary vectors
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def watch(
    ctx: typer.Context,
    collection: CollectionArg,
    since: Annotated[
        str,
        typer.Option(
            "--since",
            help="earliest (the oldest change the log keeps), latest (from now on) or a "
            "hybrid timestamp (changes above it).",
        ),
    ] = "latest",
    follow: Annotated[
        bool,
        typer.Option("--follow/--no-follow", help="Wait for new changes, or end at the log's end."),
    ] = True,
    poll: Annotated[
        float, typer.Option("--poll", min=0.01, help="Seconds between looks at the log.")
    ] = 0.5,
    uri: UriOpt = None,
) -> None:
    """Print every insert, upsert and delete of a collection as JSON Lines."""
    state = CliState.of(ctx).merged(uri=uri)
    out = sys.stdout.buffer
    with connect(state) as client:
        for table in client.watch(collection, since, follow=follow, poll_s=poll):
            for row in table.to_pylist():
                out.write(orjson.dumps(row, default=_json_default) + b"\n")
            out.flush()
