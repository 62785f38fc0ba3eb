"""Every start that its configuration dooms fails as a user sees it: ``elanus standalone``,
``elanus run ROLE`` and ``elanus cluster up`` run as commands, each with one bad input or
setting, print exactly one line on stderr (``error: [CODE] message``, the message naming
what to fix), exit non-zero and leave no file behind (no data dir, no NATS store, no
``root_password``). Real parts: an S3 server (moto) for the storage cases, a socket that
holds a port for the port cases, certificates made for the TLS cases."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import CertAuthority
from conftest import cli_env, run_elanus
from s3 import ACCESS_KEY, SECRET_KEY, MotoServer

from elanus.channels.nats_server import free_port

pytestmark = pytest.mark.slow  # runs the elanus command, some forty times

S = ("standalone", "--data-dir", "data")
"""A standalone in ./data of the case's own directory, which must not exist afterwards."""
RUN = ("run", "datanode", "--data-dir", "data")
S3_ENV = {
    "ELANUS_S3_ENDPOINT": "{moto}",
    "ELANUS_S3_ACCESS_KEY_ID": ACCESS_KEY,
    "ELANUS_S3_SECRET_ACCESS_KEY": SECRET_KEY,
    "ELANUS_S3_ALLOW_HTTP": "true",
}

CASES: list[tuple[str, tuple[str, ...], dict[str, str], str, str]] = [
    # (case, arguments, environment, code, words of the message); {names} are filled in
    ("missing bucket", (*S, "--storage", "s3://no-such-bucket/x"), S3_ENV, "UNAVAILABLE",
     "bucket 'no-such-bucket' does not exist"),
    ("unreachable S3", (*S, "--storage", "s3://bucket/x"),
     {**S3_ENV, "ELANUS_S3_ENDPOINT": "http://127.0.0.1:{closed}"}, "UNAVAILABLE",
     "S3 endpoint cannot be reached"),
    ("storage scheme", (*S, "--storage", "gs://bucket/x"), {}, "INVALID_ARGUMENT",
     "not at a gs:// url"),
    ("storage url", (*S, "--storage", "s3:/bucket"), {}, "INVALID_ARGUMENT",
     "s3://bucket[/prefix]"),
    ("storage a file", (*S, "--storage", "afile"), {}, "INVALID_ARGUMENT",
     "afile is not a directory"),
    ("data dir a file", ("standalone", "--data-dir", "afile"), {}, "INVALID_ARGUMENT",
     "afile is not a directory"),
    ("data dir under a file", ("standalone", "--data-dir", "afile/data"), {}, "INVALID_ARGUMENT",
     "cannot be made"),
    ("flight port in use", (*S, "--port", "{busy}"), {}, "UNAVAILABLE",
     "127.0.0.1:{busy} (setting flight_port, --port): the port is in use"),
    ("milvus port in use", (*S, "--port", "0", "--milvus-port", "{busy}"), {}, "UNAVAILABLE",
     "(setting milvus_port, --milvus-port): the port is in use"),
    ("metrics port in use", (*S, "--port", "0", "--metrics-port", "{busy}"), {}, "UNAVAILABLE",
     "(setting metrics_port, --metrics-port): the port is in use"),
    ("nats port in use", (*S, "--port", "0", "--nats-port", "{busy}"), {}, "UNAVAILABLE",
     "(setting nats_port, --nats-port): the port is in use"),
    ("one port twice", (*S, "--port", "{free}", "--milvus-port", "{free}"), {},
     "INVALID_ARGUMENT", "milvus_port and flight_port are both"),
    ("no such port", (*S, "--port", "70000"), {}, "INVALID_ARGUMENT",
     "flight_port must be a port number"),
    ("unresolvable host", (*S, "--host", "no-such-host.invalid", "--insecure"), {},
     "INVALID_ARGUMENT", "cannot resolve host 'no-such-host.invalid'"),
    ("open to the network", (*S, "--host", "0.0.0.0"), {}, "INVALID_ARGUMENT",
     "refusing to serve '0.0.0.0' with authentication off"),
    ("unreachable NATS", (*S, "--port", "0", "--nats", "nats://127.0.0.1:{closed}"), {},
     "UNAVAILABLE", "no NATS server answers at 127.0.0.1:{closed}"),
    ("role without NATS", RUN, {}, "INVALID_ARGUMENT", "needs an external NATS"),
    ("unknown role", ("run", "janitor", "--nats", "nats://127.0.0.1:4222"), {},
     "INVALID_ARGUMENT", "unknown role 'janitor'"),
    ("TLS file missing", (*S, "--port", "0", "--tls-cert", "nope.pem", "--tls-key", "{key}"),
     {}, "INVALID_ARGUMENT", "tls_cert: cannot read"),
    ("TLS file not PEM", (*S, "--port", "0", "--tls-cert", "afile", "--tls-key", "{key}"), {},
     "INVALID_ARGUMENT", "is not PEM"),
    ("TLS key of another", (*S, "--port", "0", "--tls-cert", "{cert}", "--tls-key",
     "{other_key}"), {}, "INVALID_ARGUMENT", "are not a certificate and its private key"),
    ("TLS key missing", (*S, "--port", "0", "--tls-cert", "{cert}"), {}, "INVALID_ARGUMENT",
     "TLS needs both tls_cert and tls_key"),
    ("TLS client CA not a CA", (*S, "--port", "0", "--tls-cert", "{cert}", "--tls-key",
     "{key}", "--tls-client-ca", "{key}"), {}, "INVALID_ARGUMENT",
     "tls_client_ca"),
    ("config file missing", (*S, "--config", "nope.toml"), {}, "INVALID_ARGUMENT",
     "config file nope.toml does not exist"),
    ("config not TOML", (*S, "--config", "bad.toml"), {}, "INVALID_ARGUMENT",
     "bad.toml is not TOML"),
    ("unknown setting", (*S, "--config", "unknown.toml"), {}, "INVALID_ARGUMENT",
     "unknown setting(s) flight_prot"),
    ("bad setting value", S, {"ELANUS_FLIGHT_PORT": "eighty"}, "INVALID_ARGUMENT",
     "setting flight_port: cannot read 'eighty'"),
    ("bad log level", S, {"ELANUS_LOG_LEVEL": "LOUD"}, "INVALID_ARGUMENT",
     "log_level 'LOUD' is not one of"),
    ("role storage", (*RUN, "--nats", "nats://127.0.0.1:{closed}", "--storage",
     "s3://no-such-bucket"), S3_ENV, "UNAVAILABLE", "bucket 'no-such-bucket' does not exist"),
    ("catalog not DuckDB", ("standalone", "--data-dir", "old", "--port", "0"), {}, "INTERNAL",
     "is not a valid DuckDB database file"),  # past the checks: the start is undone
    ("cluster replicas", ("cluster", "up", "--data-dir", "data", "--nats", "1",
     "--stream-replicas", "3"), {}, "INVALID_ARGUMENT", "needs at least as many NATS servers"),
    ("cluster port in use", ("cluster", "up", "--data-dir", "data", "--port", "{busy}"), {},
     "UNAVAILABLE", "the port is in use"),
]  # fmt: skip


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    """A port something listens on for the whole module."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    ca = CertAuthority(tmp_path_factory.mktemp("tls"))
    server, other = ca.issue("server", server=True), ca.issue("other", server=True)
    return {"cert": str(server.cert), "key": str(server.key), "other_key": str(other.key)}


@pytest.mark.parametrize(("args", "env", "code", "words"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_a_doomed_start_fails_in_one_line_and_leaves_nothing(
    tmp_path: Path,
    busy_port: int,
    tls: dict[str, str],
    moto_server: MotoServer,
    args: tuple[str, ...],
    env: dict[str, str],
    code: str,
    words: str,
) -> None:
    values = {
        "busy": busy_port, "closed": free_port(), "free": free_port(),
        "moto": moto_server.endpoint, **tls,
    }  # fmt: skip
    (tmp_path / "afile").write_text("not a directory, nor PEM\n")
    (tmp_path / "bad.toml").write_text("flight_port = \n")
    (tmp_path / "unknown.toml").write_text("flight_prot = 9000\n")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "catalog.duckdb").write_text("not DuckDB\n")
    before = sorted(tmp_path.rglob("*"))
    result = run_elanus(
        *(a.format(**values) for a in args),
        cwd=tmp_path,
        env=cli_env(**{k: v.format(**values) for k, v in env.items()}),
    )
    lines = result.stderr.splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: [{code}] "), lines[0]
    assert words.format(**values) in lines[0], lines[0]
    assert sorted(tmp_path.rglob("*")) == before  # no data dir, no NATS store, no password
