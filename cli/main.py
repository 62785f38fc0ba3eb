"""The ``elanus`` command: a Typer app whose failures are one line, never a traceback.

``run`` wraps the app: a usage error (Click's own, or a bad option value a command
finds) becomes ``error: [INVALID_ARGUMENT] message`` on stderr and exit 2; anything else
that escapes a command (an ``ElanusError`` from the server, an unreachable proxy, a bad
settings file) becomes ``error: [CODE] message`` and exit 1. Global options are moved
before the command first (``hoisted``), so they work on either side of it. ``main`` runs
it as the process's entry point and then ends the process (``leave``).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

import typer

# Typer vendors Click; its exceptions are only reachable here (typer.BadParameter is one).
from typer._click import Command
from typer._click import exceptions as click

import elanus
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
from elanus.cli.leave import exit_status, leave
from elanus.cli.output import error_parts, print_error
from elanus.errors import ErrorCode

COMMANDS: dict[str, tuple[str, str]] = {
    "standalone": ("elanus.cli.server", "standalone"),
    "run": ("elanus.cli.server", "run"),
    "config": ("elanus.cli.server", "config_app"),
    "cluster": ("elanus.cli.cluster", "cluster_app"),
    "status": ("elanus.cli.admin", "status"),
    "database": ("elanus.cli.database", "database_app"),
    "collection": ("elanus.cli.admin", "collection_app"),
    "partition": ("elanus.cli.admin", "partition_app"),
    "insert": ("elanus.cli.data", "insert"),
    "import": ("elanus.cli.imports", "import_files"),
    "import-state": ("elanus.cli.imports", "import_state"),
    "import-jobs": ("elanus.cli.imports", "import_jobs"),
    "flush": ("elanus.cli.data", "flush"),
    "segments": ("elanus.cli.data", "segments"),
    "load": ("elanus.cli.read", "load"),
    "release": ("elanus.cli.read", "release"),
    "search": ("elanus.cli.read", "search"),
    "query": ("elanus.cli.read", "query"),
    "sql": ("elanus.cli.sql", "sql"),
    "watch": ("elanus.cli.watch", "watch"),
    "index": ("elanus.cli.index", "index_app"),
    "user": ("elanus.cli.users", "user_app"),
    "role": ("elanus.cli.users", "role_app"),
    "backup": ("elanus.cli.backup", "backup_app"),
    "snapshot": ("elanus.cli.snapshot", "snapshot_app"),
    "serve-member": ("elanus.cli.server", "serve_member"),
}
"""Every command, in ``elanus -h``'s order: its name, and the module and attribute of its
function (a command) or Typer app (a group of them). A run builds the app with only the
command it names (``app_for``): importing every command's module (NATS clients, file
readers, Spark glue) and building each from its signature is most of a command's start."""

HIDDEN = {"serve-member"}
"""Commands a standalone starts itself, not listed in ``elanus -h``."""


def _new_app(names: Sequence[str]) -> typer.Typer:
    """The app with its global options and the commands ``names``."""
    app = typer.Typer(
        name="elanus",
        help="Elanus: a distributed vector database on Arrow Flight, NATS JetStream, Lance "
        "and DuckDB.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(global_options)
    for name in names:
        module, attribute = COMMANDS[name]
        target = getattr(importlib.import_module(module), attribute)
        if isinstance(target, typer.Typer):
            app.add_typer(target, name=name)
        else:
            app.command(name, hidden=name in HIDDEN)(target)
    return app


@functools.cache
def app_for(name: str | None) -> typer.Typer:
    """The app to parse a run naming command ``name`` (None, or one that does not exist:
    every command, for the whole help or Click's "No such command")."""
    return _new_app([name] if name in COMMANDS else list(COMMANDS))


def _version(value: bool) -> None:
    if value:
        print(f"elanus {elanus.__version__}")
        raise typer.Exit()


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
    """Options given here apply to every command; each may also follow the command."""
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


GLOBAL_VALUED = ("--config", "--data-dir", "--uri", "--user", "--password", "--token", "--tls-ca")
GLOBAL_FLAGS = ("--json",)


def command_name(args: Sequence[str]) -> str | None:
    """The command ``args`` name: the first word after the global options; None when
    anything else comes first (``-h`` asks for the whole app's help)."""
    i = 0
    while i < len(args) and args[i] != "--":
        arg = args[i]
        if not arg.startswith("-"):
            return arg
        if arg in GLOBAL_VALUED:
            i += 2
        elif arg in GLOBAL_FLAGS or arg.partition("=")[0] in GLOBAL_VALUED:
            i += 1
        else:
            return None
    return None


@functools.cache
def _command(name: str | None) -> Command:
    return typer.main.get_command(app_for(name))


def root_command(args: Sequence[str]) -> Command:
    """The app as a Click command for ``args``, built once per process (Typer builds each
    command from its signature; ``hoisted`` needs it too): only the command ``args``
    name, when it is one."""
    return _command(command_name(args))


def own_options(args: list[str]) -> set[str]:
    """The option names the command named in ``args`` declares with a meaning of its own
    (``cluster up --data-dir`` is the cluster's root, not the global data dir): those stay
    where they are. An option a command repeats from the globals (same help) still moves."""
    root = command = root_command(args)
    for arg in args:
        commands = getattr(command, "commands", None)
        if arg.startswith("-") or commands is None:
            continue
        if arg not in commands:
            break
        command = commands[arg]
    shared = {opt: getattr(p, "help", None) for p in root.params for opt in p.opts}
    return {
        opt
        for p in command.params
        for opt in getattr(p, "opts", ())
        if opt in shared and getattr(p, "help", None) != shared[opt]
    }


def hoisted(args: list[str]) -> list[str]:
    """The global options found after the command moved before it, so each works in
    either place (``elanus collection list --token t`` = ``elanus --token t collection
    list``), unless the command has an option of that name itself. Nothing after ``--``
    moves. Later occurrences still win, as Click reads them."""
    own = own_options(args)
    valued = tuple(o for o in GLOBAL_VALUED if o not in own)
    flags = tuple(o for o in GLOBAL_FLAGS if o not in own)
    moved: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg in flags or arg.partition("=")[0] in valued and "=" in arg:
            moved.append(arg)
        elif arg in valued and i + 1 < len(args):
            moved += args[i : i + 2]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return moved + rest


SYNONYMS: dict[str, tuple[str, ...]] = {
    "--limit": ("--topk", "--top-k", "--k", "--top"),
    "--filter": ("--expr", "--expression", "--where"),
    "--output-fields": ("--fields", "--output-field", "--outputs"),
    "--consistency": ("--consistency-level", "--level"),
    "--partition": ("--partitions", "--partition-name", "--partition-names"),
    "--params": ("--search-params", "--index-params"),
    "--metric": ("--metric-type",),
    "--type": ("--index-type",),
    "--dim": ("--dimension",),
    "--shards": ("--num-shards", "--shards-num"),
    "--replicas": ("--replica-number", "--num-replicas"),
    "--vector-file": ("--vectors", "--vector", "--data"),
}
"""Options by the names other tools (pymilvus, Milvus's CLI) give the same things, so that
``--topk`` is answered with "did you mean --limit?"."""


def option_hint(exc: click.NoSuchOption) -> str:
    """ "No such option: X; did you mean Y?" naming the command's own option for a
    misspelling, another tool's name or pymilvus's underscores (``--output_fields``)."""
    known = {o for p in exc.ctx.command.params for o in p.opts} if exc.ctx else set()
    spelled = "--" + exc.option_name.lstrip("-").replace("_", "-").lower()
    named = [spelled] + [target for target, other in SYNONYMS.items() if spelled in other]
    matches = [o for o in named if o in known]
    matches = matches or difflib.get_close_matches(spelled, sorted(known), n=2)
    if not matches:
        return exc.message
    return f"{exc.message}; did you mean {' or '.join(matches)}?"


def usage_line(exc: click.UsageError) -> str:
    """A usage error as one line: what is wrong, and where to look for help."""
    where = exc.ctx.command_path if exc.ctx is not None else "elanus"
    said = option_hint(exc) if isinstance(exc, click.NoSuchOption) else exc.format_message()
    return f"{said} (see '{where} -h')"


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point (``elanus``, ``python -m elanus.cli``): run the command,
    then end the process at once (``leave``: no interpreter teardown)."""
    try:
        status = run(list(argv) if argv is not None else sys.argv[1:])
    except SystemExit as exc:  # a library's own sys.exit inside a command
        status = exit_status(exc)
    leave(status)


def run(args: list[str]) -> int:
    """The command's exit status. Every failure is one ``error: [CODE] message`` line on
    stderr: status 2 for a usage error (Click's own included), 1 for anything else."""
    try:
        code = root_command(args).main(
            args=hoisted(args), prog_name="elanus", standalone_mode=False
        )
    except KeyboardInterrupt:
        return 130
    except click.NoArgsIsHelpError as exc:
        exc.show()  # a group named alone: its help, as Click shows it
        return exc.exit_code
    except click.UsageError as exc:
        print_error(str(ErrorCode.INVALID_ARGUMENT), usage_line(exc))
        return exc.exit_code
    except typer.Abort:
        print_error(str(ErrorCode.INVALID_ARGUMENT), "aborted (no answer to a prompt)")
        return 1
    except click.ClickException as exc:
        print_error(str(ErrorCode.INVALID_ARGUMENT), exc.format_message())
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the one place errors become a line and a code
        print_error(*error_parts(exc))
        return 1
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    main()
