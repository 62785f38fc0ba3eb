"""The ``elanus`` command: a Typer app whose failures are one line, never a traceback.

``main`` wraps the app: Typer itself reports usage errors (exit 2); anything else that
escapes a command (an ``ElanusError`` from the server, an unreachable proxy, a bad settings
file) becomes ``error: [CODE] message`` on stderr and exit 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

import elanus
from elanus.cli import admin, data, imports, read, server, users
from elanus.cli.cluster import cluster_app
from elanus.cli.context import (
    CliState,
    ConfigOpt,
    DataDirOpt,
    JsonOpt,
    PasswordOpt,
    TlsCaOpt,
    TokenOpt,
    UriOpt,
    UserOpt,
)
from elanus.cli.index import index_app
from elanus.cli.output import error_parts, print_error

app = typer.Typer(
    name="elanus",
    help="Elanus: a distributed vector database on Arrow Flight, NATS JetStream, Lance and DuckDB.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("standalone")(server.standalone)
app.command("run")(server.run)
app.add_typer(server.config_app, name="config")
app.add_typer(cluster_app, name="cluster")
app.command("status")(admin.status)
app.add_typer(admin.collection_app, name="collection")
app.add_typer(admin.partition_app, name="partition")
app.command("insert")(data.insert)
app.command("import")(imports.import_files)
app.command("import-state")(imports.import_state)
app.command("import-jobs")(imports.import_jobs)
app.command("flush")(data.flush)
app.command("segments")(data.segments)
app.command("load")(read.load)
app.command("release")(read.release)
app.command("search")(read.search)
app.command("query")(read.query)
app.add_typer(index_app, name="index")
app.add_typer(users.user_app, name="user")
app.add_typer(users.role_app, name="role")


def _version(value: bool) -> None:
    if value:
        print(f"elanus {elanus.__version__}")
        raise typer.Exit()


@app.callback()
def global_options(
    ctx: typer.Context,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    uri: UriOpt = None,
    as_json: JsonOpt = False,
    user: UserOpt = None,
    password: PasswordOpt = None,
    token: TokenOpt = None,
    tls_ca: TlsCaOpt = None,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Options given here apply to every command; --json, --uri and --data-dir may also
    follow the command that uses them."""
    ctx.obj = CliState(
        config=config,
        data_dir=data_dir,
        uri=uri,
        json=as_json,
        user=user,
        password=password,
        token=token,
        tls_ca=tls_ca,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name="elanus")
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the one place errors become a line and a code
        print_error(*error_parts(exc))
        sys.exit(1)


if __name__ == "__main__":
    main()
