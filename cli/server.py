"""Commands that run or describe a server process: ``standalone``, ``run ROLE``, ``config``."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.panel import Panel

from elanus.channels.natsauth import redact_url
from elanus.cli.context import (
    CliState,
    DataDirOpt,
    HostOpt,
    JsonOpt,
    MetricsPortOpt,
    MilvusPortOpt,
    NatsOpt,
    NatsPortOpt,
    PortOpt,
    StorageOpt,
    WebuiPortOpt,
    option,
)
from elanus.cli.output import console, emit, kv_table
from elanus.cli.roles import INFO_FILE, MEMBER_ROLES, ROLES, standalone_roles
from elanus.errors import invalid
from elanus.settings import Settings, is_loopback_host, load_settings

if TYPE_CHECKING:
    from elanus.cli.host import RoleHost

TlsCertOpt = Annotated[
    str | None,
    option(
        "--tls-cert",
        help="PEM certificate chain: serve grpc+tls:// (with --tls-key).",
    ),
]
TlsKeyOpt = Annotated[
    str | None,
    option("--tls-key", help="PEM private key of --tls-cert."),
]
TlsClientCaOpt = Annotated[
    str | None,
    option(
        "--tls-client-ca",
        help="PEM CA bundle: clients must present a certificate it signed (mutual TLS).",
    ),
]

config_app = typer.Typer(help="Inspect the effective settings.", no_args_is_help=True)


def server_settings(
    ctx: typer.Context,
    *,
    data_dir: str | None,
    port: int | None,
    host: str | None,
    nats: str | None,
    nats_port: int | None,
    storage: str | None,
    auth_enabled: bool | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_client_ca: str | None = None,
    milvus_port: int | None = None,
    metrics_port: int | None = None,
    webui_port: int | None = None,
) -> Settings:
    """The merged settings of a server command; its flags are the top layer."""
    state = CliState.of(ctx).merged(data_dir=data_dir)
    return state.settings(
        flight_port=port,
        flight_host=host,
        nats_url=nats,
        nats_port=nats_port,
        storage=storage,
        auth_enabled=auth_enabled,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_client_ca=tls_client_ca,
        milvus_port=milvus_port,
        metrics_port=metrics_port,
        webui_port=webui_port,
    )


AuthOpt = Annotated[
    bool | None,
    option(
        "--auth/--no-auth",
        help="Require credentials on every call (setting auth_enabled).",
    ),
]
InsecureOpt = Annotated[
    bool,
    typer.Option("--insecure", help="Allow serving a non-loopback address without --auth."),
]


def check_exposure(settings: Settings, insecure: bool) -> None:
    """Refuse to put an open server on a network by accident."""
    if settings.auth_enabled or insecure or is_loopback_host(settings.flight_host):
        return
    raise typer.BadParameter(
        f"refusing to serve {settings.flight_host!r} with authentication off: anyone who "
        "reaches it could read, write and drop everything. Pass --auth (setting "
        "auth_enabled), or --insecure if that is what you want.",
        param_hint="--host",
    )


def _configure_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _ready_panel(title: str, host: RoleHost) -> None:
    rows = {
        "flight uri": host.flight_uri,
        "milvus port": str(host.milvus_port or "off"),
        "metrics": host.metrics.url if host.metrics else "off",
        "console": host.webui_url or "off",
        "nats url": host.nats_url,
        "data dir": str(host.settings.data_path),
        "roles": ", ".join(name for name, _ in host.roles),
    }
    if host.serving_pids:
        pids = ", ".join(map(str, [os.getpid(), *host.serving_pids]))
        rows["serving processes"] = f"{len(host.serving_pids) + 1} (pids {pids})"
    console.print(Panel(kv_table(rows), title=title, subtitle="Ctrl-C to stop", expand=False))


def standalone(
    ctx: typer.Context,
    data_dir: DataDirOpt = None,
    port: PortOpt = None,
    milvus_port: MilvusPortOpt = None,
    metrics_port: MetricsPortOpt = None,
    webui_port: WebuiPortOpt = None,
    nats_port: NatsPortOpt = None,
    nats: NatsOpt = None,
    host: HostOpt = None,
    storage: StorageOpt = None,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    tls_cert: TlsCertOpt = None,
    tls_key: TlsKeyOpt = None,
    tls_client_ca: TlsClientCaOpt = None,
) -> None:
    """Run every role in this process, with an embedded NATS unless --nats is given."""
    settings = server_settings(
        ctx,
        data_dir=data_dir,
        port=port,
        host=host,
        nats=nats,
        nats_port=nats_port,
        storage=storage,
        auth_enabled=auth,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_client_ca=tls_client_ca,
        milvus_port=milvus_port,
        metrics_port=metrics_port,
        webui_port=webui_port,
    )
    check_exposure(settings, insecure)
    if settings.serving_processes == 0:  # one per core
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        settings = settings.replace(serving_processes=min(max(cores or 1, 1), 64))
    if settings.serving_processes > 1:
        from elanus.cli.serving import group_name

        settings = settings.replace(node_group=group_name(settings))
    _serve(settings, standalone_roles(), "elanus standalone", settings.data_path / INFO_FILE)


def serve_member() -> None:
    """A standalone's further serving process: a proxy and a query node of its node group,
    on its NATS (settings from the environment, set by the standalone; cli/serving.py)."""
    settings = load_settings()
    if not settings.node_group or not settings.nats_url:
        raise typer.BadParameter(
            "serve-member is started by a standalone with serving_processes > 1"
        )
    _serve(settings, MEMBER_ROLES, f"elanus serving process {settings.serving_index}", None)


def _serve(settings: Settings, roles: list[str], title: str, info_file: Path | None) -> None:
    """Check the start (``preflight``), host ``roles`` until a stop, and leave the data dir
    as it was found when the start fails."""
    from elanus.cli import preflight

    preflight.check_start(settings, roles, embedded_nats=settings.nats_url is None)
    _configure_logging(settings)
    from elanus.cli.host import RoleHost  # the roles' stack: only for the server commands

    before = preflight.snapshot(settings.data_path)
    try:
        settings.data_path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise invalid(f"data_dir {settings.data_path} cannot be made: {exc.strerror}") from None
    host = RoleHost(settings, roles, info_file=info_file)
    if settings.serving_processes > 1 and info_file is not None:
        from elanus.cli.serving import ServingProcesses

        host.extend = ServingProcesses.start_for
    try:
        host.serve(on_ready=lambda h: _ready_panel(title, h))
    except BaseException:
        if not host.served:
            preflight.leave_as_found(settings.data_path, before)
        raise


def run(
    ctx: typer.Context,
    role: Annotated[str, typer.Argument(help=f"One of: {', '.join(ROLES)}.", show_default=False)],
    nats: NatsOpt = None,
    storage: StorageOpt = None,
    port: PortOpt = None,
    milvus_port: MilvusPortOpt = None,
    metrics_port: MetricsPortOpt = None,
    webui_port: WebuiPortOpt = None,
    host: HostOpt = None,
    data_dir: DataDirOpt = None,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    tls_cert: TlsCertOpt = None,
    tls_key: TlsKeyOpt = None,
    tls_client_ca: TlsClientCaOpt = None,
) -> None:
    """Run one role against an external NATS (cluster mode); the TLS flags apply to a
    proxy."""
    if role not in ROLES:
        raise typer.BadParameter(
            f"unknown role {role!r}; known: {', '.join(ROLES)}", param_hint="ROLE"
        )
    settings = server_settings(
        ctx,
        data_dir=data_dir,
        port=port,
        host=host,
        nats=nats,
        nats_port=None,
        storage=storage,
        auth_enabled=auth,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_client_ca=tls_client_ca,
        milvus_port=milvus_port,
        metrics_port=metrics_port,
        webui_port=webui_port,
    )
    if role == "proxy":
        check_exposure(settings, insecure)
    if not settings.nats_url:
        raise typer.BadParameter(
            "a role on its own needs an external NATS: "
            "pass --nats nats://HOST:4222 (or set ELANUS_NATS_URL)",
            param_hint="--nats",
        )
    _serve(settings, [role], f"elanus {role}", None)


@config_app.command("show")
def config_show(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    data_dir: DataDirOpt = None,
    port: PortOpt = None,
    host: HostOpt = None,
    nats: NatsOpt = None,
    nats_port: NatsPortOpt = None,
    storage: StorageOpt = None,
) -> None:
    """Show the effective settings: defaults < elanus.toml < ELANUS_* env < flags."""
    settings = server_settings(
        ctx,
        data_dir=data_dir,
        port=port,
        host=host,
        nats=nats,
        nats_port=nats_port,
        storage=storage,
    )
    values: dict[str, Any] = settings.shown()
    values["nats_url"] = redact_url(settings.nats_url)
    emit(values, kv_table, CliState.of(ctx).json or as_json)
