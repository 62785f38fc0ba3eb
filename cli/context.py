"""State shared by all commands: global options, settings, and the client connection.

Options such as ``--json`` and ``--uri`` are accepted both before the command
(``elanus --json collection list``) and after it (``elanus collection list --json``); the
option types are declared once here so every command spells them the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import pyarrow.flight as flight
import typer
from rich.console import RenderableType
from typer._click.exceptions import UsageError  # Typer vendors Click

from elanus.cli.output import emit
from elanus.errors import ElanusError, ErrorCode
from elanus.settings import Settings, load_settings
from elanus.wire.tls import read_pem

if TYPE_CHECKING:
    from elanus.client.client import Client

T = TypeVar("T")


def option(*decls: str, help: str | None = None, envvar: str | None = None) -> Any:
    """A ``typer.Option`` that shows no default: most defaults are None, meaning "as the
    settings (or the server) decide", which a shown "[default: None]" would obscure."""
    return typer.Option(*decls, envvar=envvar, show_default=False, help=help)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
UriOpt = Annotated[
    str | None,
    option(
        "--uri",
        help="Flight uri of a proxy (default: $ELANUS_URI, else from settings, "
        "grpc://127.0.0.1:8815).",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    option(
        "--config",
        envvar="ELANUS_CONFIG",
        help="Settings file (default: ./elanus.toml if present).",
    ),
]
DataDirOpt = Annotated[str | None, option("--data-dir", help="Root of all local data.")]
PortOpt = Annotated[int | None, option("--port", help="Flight (proxy) port.")]
HostOpt = Annotated[str | None, option("--host", help="Flight (proxy) bind address.")]
NatsOpt = Annotated[str | None, option("--nats", help="External NATS url (nats://host:4222).")]
MilvusPortOpt = Annotated[
    int | None,
    option(
        "--milvus-port",
        help="Port of the proxy's Milvus protocol face, for pymilvus (0: off; default 19530).",
    ),
]
MetricsPortOpt = Annotated[
    int | None,
    option(
        "--metrics-port",
        help="Serve Prometheus /metrics on this port (setting metrics_port; 0, the default: "
        "off). Each process of a machine needs its own.",
    ),
]
WebuiPortOpt = Annotated[
    int | None,
    option(
        "--webui-port",
        help="Serve the proxy's read-only web console on this port (setting webui_port; 0, "
        "the default: off; make run: 9091).",
    ),
]
NatsPortOpt = Annotated[
    int | None, option("--nats-port", help="Port of the embedded NATS (0: any).")
]
TlsCaOpt = Annotated[
    Path | None,
    option(
        "--tls-ca",
        envvar="ELANUS_TLS_CA",
        help="PEM file of the CA that signed the proxy's TLS certificate; the uri becomes "
        "grpc+tls:// (also $ELANUS_TLS_CA).",
    ),
]
StorageOpt = Annotated[str | None, option("--storage", help="Segment and index storage path.")]
UserOpt = Annotated[
    str | None, option("--user", envvar="ELANUS_USER", help="User name (auth_enabled).")
]
PasswordOpt = Annotated[
    str | None,
    option(
        "--password",
        envvar="ELANUS_PASSWORD",
        help="Password of --user (prefer $ELANUS_PASSWORD: command lines are visible to ps).",
    ),
]
TokenOpt = Annotated[
    str | None,
    option(
        "--token",
        envvar="ELANUS_TOKEN",
        help="'user:password', as pymilvus takes it (instead of --user/--password).",
    ),
]


@dataclass(frozen=True)
class CliState:
    """The global options, as given before the command name."""

    config: Path | None = None
    data_dir: str | None = None
    uri: str | None = None
    json: bool = False
    user: str | None = None
    password: str | None = None
    token: str | None = None
    tls_ca: Path | None = None

    @classmethod
    def of(cls, ctx: typer.Context) -> CliState:
        obj = ctx.find_root().obj
        return obj if isinstance(obj, CliState) else cls()

    def merged(
        self, *, json: bool = False, uri: str | None = None, data_dir: str | None = None
    ) -> CliState:
        """Per-command options win over global ones."""
        return replace(
            self, json=self.json or json, uri=uri or self.uri, data_dir=data_dir or self.data_dir
        )

    def settings(self, **flags: Any) -> Settings:
        """defaults < elanus.toml < ELANUS_* env < flags (``None`` flags change nothing)."""
        try:
            return load_settings(self.config, data_dir=self.data_dir, **flags)
        except ValueError as exc:  # a usage error (exit 2) that names the setting
            raise UsageError(f"settings: {exc}") from None

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for every ``Client`` the command opens: the credentials, and
        the CA to trust, read here so a Spark job can carry the bytes to its executors."""
        given = {"token": self.token, "user": self.user, "password": self.password}
        options: dict[str, Any] = {k: v for k, v in given.items() if v}
        if self.tls_ca is not None:
            options["tls_root_certs"] = read_pem(self.tls_ca, "--tls-ca")
        return options

    def target_uri(self) -> str:
        """``--uri`` (before or after the command) beats ``ELANUS_URI``, which beats the
        settings. The environment is read here, not as the option's default, so a
        per-command option filled from it cannot override a ``--uri`` given before the
        command."""
        return self.uri or os.environ.get("ELANUS_URI") or self.settings().flight_uri


def json_object(text: str | None, param_hint: str) -> dict[str, Any]:
    """An option given as a JSON object (``--params '{"ef": 64}'``); anything else is a
    usage error naming the option."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint=param_hint) from None
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint=param_hint)
    return value


def key_values(items: list[str] | None, param_hint: str = "--set") -> dict[str, str]:
    """Repeated ``KEY=VALUE`` options (``--set k=v``) as a dict; a text without ``=`` is a
    usage error naming the option."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=param_hint)
        out[key] = value
    return out


@contextlib.contextmanager
def connect(state: CliState) -> Iterator[Client]:
    """A client on the proxy; any failure to reach it becomes UNAVAILABLE naming the uri."""
    from elanus.client.client import Client

    uri = state.target_uri()
    try:
        with Client(uri, **state.client_options()) as client:
            yield client
    except ElanusError as exc:
        if exc.code == ErrorCode.UNAVAILABLE and uri not in exc.message:
            raise ElanusError(ErrorCode.UNAVAILABLE, f"{uri}: {exc.message}") from None
        raise
    except (OSError, flight.FlightUnavailableError) as exc:
        raise ElanusError(ErrorCode.UNAVAILABLE, f"cannot reach {uri}: {exc}") from None


def run_action(
    ctx: typer.Context,
    action: Callable[[Client], T],
    render: Callable[[T], RenderableType | None],
    *,
    as_json: bool = False,
    uri: str | None = None,
) -> T:
    """The body of every client command: call the proxy, then print a table or JSON."""
    state = CliState.of(ctx).merged(json=as_json, uri=uri)
    with connect(state) as client:
        result = action(client)
    emit(result, render, state.json)
    return result
