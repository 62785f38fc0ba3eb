"""``elanus watch COLLECTION``: the collection's change stream as JSON Lines on stdout.

One line per change (``_op``, ``_ts``, then the fields; a delete has its key only), read
from the log through ``Client.watch`` (``elanus/client/changes.py``), so the output is the
SDK's and the Spark source's rows. The log's NATS credentials come from
``ELANUS_NATS_USER`` / ``ELANUS_NATS_PASSWORD``, as a role's do; without them, on the
machine of a standalone, from its data dir (``--data-dir``/``ELANUS_DATA_DIR``, else
``./elanus-data``, where ``make run`` keeps it): whoever may read that dir holds the log
already.
"""

from __future__ import annotations

import base64
import os
import sys
from typing import Annotated, Any

import orjson
import typer

from elanus.channels.natsauth import ENV_PASSWORD, read_stored
from elanus.cli.admin import CollectionArg
from elanus.cli.context import CliState, UriOpt, connect


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):  # binary vectors
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _login(state: CliState) -> dict[str, str]:
    """The log's credentials when the environment names none: a local standalone's."""
    if os.environ.get(ENV_PASSWORD):
        return {}  # the change stream reads them from the environment
    stored = read_stored(state.settings().nats_store_path)
    return {} if stored is None else {"nats_user": stored.user, "nats_password": stored.password}


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
        login = _login(state)
        for table in client.watch(collection, since, follow=follow, poll_s=poll, **login):
            for row in table.to_pylist():
                out.write(orjson.dumps(row, default=_json_default) + b"\n")
            out.flush()
