"""Roles run as their own ``elanus run ROLE`` processes (not started: the caller hands them
to the ``elanus_processes`` fixture, which kills whatever a failing test leaves)."""

from __future__ import annotations

from pathlib import Path

from conftest import ElanusProcess

from elanus.channels.nats_server import free_port


def role_process(
    role: str,
    nats_url: str,
    data_dir: Path | str,
    log_path: Path,
    env: dict[str, str],
    *options: str,
    uri: str | None = None,
) -> ElanusProcess:
    """``role`` on the NATS server at ``nats_url``, with its data under ``data_dir``."""
    args = ("run", role, "--nats", nats_url, "--data-dir", str(data_dir), *options)
    return ElanusProcess(*args, log_path=log_path, uri=uri, env=env)


def proxy_process(
    nats_url: str, data_dir: Path | str, log_path: Path, env: dict[str, str]
) -> ElanusProcess:
    """A proxy on a free port, with its gRPC ``uri`` set (for ``wait_ready``)."""
    port = free_port()
    uri = f"grpc://127.0.0.1:{port}"
    return role_process("proxy", nats_url, data_dir, log_path, env, "--port", str(port), uri=uri)
