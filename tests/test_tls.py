"""TLS on the Flight face (issue 13, item 5): a proxy with ``tls_cert``/``tls_key`` serves
grpc+tls; the SDK, a bare pyarrow client, the CLI and Spark reach it with the CA they trust;
plain and untrusting clients fail fast with UNAVAILABLE saying why; with ``tls_client_ca``
only clients presenting a certificate that CA signed get in (mutual TLS).

Certificates are made per module by ``certs.CertAuthority`` (``cryptography``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.flight as flight
import pytest
from certs import CertAuthority, Pem
from conftest import Stack, StandaloneProcess, cli_env, own_stack, run_elanus

from elanus import ElanusError, ErrorCode
from elanus.client.client import Client
from elanus.settings import Settings

FAIL_FAST_S = 3.0
"""A refused connection must fail well within this, not wait for the call's timeout."""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("pki")
    ca = CertAuthority(directory / "ca")
    other = CertAuthority(directory / "other", name="some-other-ca")
    return {
        "ca": ca,
        "other": other,
        "server": ca.issue("server", server=True),
        "client": ca.issue("client", server=False),
        "stranger": other.issue("stranger", server=False),
    }


def serving_tls(pki: dict[str, Any]) -> dict[str, str]:
    """The settings of a proxy serving TLS with the module's server certificate."""
    server: Pem = pki["server"]
    return {"tls_cert": str(server.cert), "tls_key": str(server.key)}


@pytest.fixture(scope="module")
def tls_stack(tmp_path_factory: pytest.TempPathFactory, pki: dict[str, Any]) -> Iterator[Stack]:
    with own_stack(tmp_path_factory.mktemp("tls"), "tls-stack", **serving_tls(pki)) as stack:
        yield stack


@pytest.fixture(scope="module")
def mtls_stack(tmp_path_factory: pytest.TempPathFactory, pki: dict[str, Any]) -> Iterator[Stack]:
    with own_stack(
        tmp_path_factory.mktemp("mtls"),
        "mtls-stack",
        **serving_tls(pki),
        tls_client_ca=str(pki["ca"].cert),
    ) as stack:
        yield stack


def refused(make: Any) -> tuple[ElanusError, float]:
    """The error of one ``health`` call through the client ``make()`` opens (with a 10 s
    call timeout), and how long it took."""
    started = time.monotonic()
    with pytest.raises(ElanusError) as info:
        client = make()
        try:
            client.health()
        finally:
            client.close()
    return info.value, time.monotonic() - started


def test_tls_round_trip_with_the_ca(tls_stack: Stack, pki: dict[str, Any]) -> None:
    assert tls_stack.uri.startswith("grpc+tls://127.0.0.1:")
    client = tls_stack.client(tls_root_certs=str(pki["ca"].cert))
    client.create_collection("tls_docs", dimension=4, metric_type="L2")
    vectors = np.eye(4, dtype=np.float32)
    inserted = client.insert("tls_docs", {"id": [1, 2, 3, 4], "vector": vectors})
    assert inserted["insert_count"] == 4
    client.load_collection("tls_docs")
    (hits,) = client.search("tls_docs", [vectors[2].tolist()], limit=2, consistency_level="Strong")
    assert [h["id"] for h in hits][0] == 3
    (count,) = client.query("tls_docs", "id >= 0", ["count(*)"], consistency_level="Strong")
    assert count["count(*)"] == 4
    # the advertised address (sessions, `elanus status`) says grpc+tls too
    proxies = [s for s in client.list_sessions() if s["role"] == "proxy"]
    assert proxies and all(s["address"].startswith("grpc+tls://") for s in proxies)


def test_ca_as_bytes_and_by_pymilvus_names(tls_stack: Stack, pki: dict[str, Any]) -> None:
    ca: Path = pki["ca"].cert
    plain_uri = tls_stack.uri.replace("grpc+tls://", "grpc://")
    for kwargs in (
        {"tls_root_certs": ca.read_bytes()},
        {"server_pem_path": str(ca)},
        {"ca_pem_path": str(ca)},
    ):
        # TLS material upgrades a grpc:// uri: a client given a CA never talks in the clear
        client = tls_stack.client(plain_uri, **kwargs)
        assert client.uri == tls_stack.uri
        assert client.health()["status"] == "ok"
    # the host name checked is the uri's unless server_name overrides it
    client = tls_stack.client(
        tls_stack.uri.replace("127.0.0.1", "localhost"), tls_root_certs=str(ca)
    )
    assert client.health()["status"] == "ok"


def test_bare_pyarrow_client_over_tls(tls_stack: Stack, pki: dict[str, Any]) -> None:
    fc = flight.FlightClient(tls_stack.uri, tls_root_certs=pki["ca"].cert.read_bytes())
    try:
        [result] = fc.do_action(flight.Action("list_collections", b"{}"))
        assert "tls_docs" in json.loads(result.body.to_pybytes())["names"]
    finally:
        fc.close()


def test_plain_client_against_tls_fails_fast_and_says_so(tls_stack: Stack) -> None:
    plain_uri = tls_stack.uri.replace("grpc+tls://", "grpc://")
    err, seconds = refused(lambda: Client(plain_uri, timeout=10))
    assert err.code == ErrorCode.UNAVAILABLE
    assert "TLS" in err.message and "grpc+tls://" in err.message
    assert seconds < FAIL_FAST_S


def test_client_trusting_no_or_another_ca_is_refused(tls_stack: Stack, pki: dict[str, Any]) -> None:
    for make in (
        lambda: Client(
            tls_stack.uri, timeout=10
        ),  # the system's roots: they never signed a test CA
        lambda: Client(tls_stack.uri, timeout=10, tls_root_certs=str(pki["other"].cert)),
    ):
        err, seconds = refused(make)
        assert err.code == ErrorCode.UNAVAILABLE
        assert "TLS handshake" in err.message, err.message
        assert seconds < FAIL_FAST_S


def test_bad_tls_arguments_are_named(tmp_path: Path, pki: dict[str, Any]) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret line\n")
    with pytest.raises(ElanusError) as info:
        Client("grpc://127.0.0.1:1", tls_root_certs=str(secret))
    assert info.value.code == ErrorCode.INVALID_ARGUMENT
    assert "not PEM" in info.value.message and "top secret" not in info.value.message
    with pytest.raises(ElanusError, match="cannot read"):
        Client("grpc://127.0.0.1:1", tls_root_certs=str(tmp_path / "missing.pem"))
    with pytest.raises(ElanusError, match="client_key_path"):
        Client("grpc://127.0.0.1:1", client_pem_path=str(pki["client"].cert))
    with pytest.raises(ElanusError, match="once"):
        Client(
            "grpc://127.0.0.1:1",
            tls_root_certs=str(pki["ca"].cert),
            server_pem_path=str(pki["ca"].cert),
        )
    with pytest.raises(ValueError, match="tls_key"):
        Settings(tls_cert=str(pki["server"].cert))
    with pytest.raises(ValueError, match="tls_client_ca"):
        Settings(tls_client_ca=str(pki["ca"].cert))
    assert Settings().flight_uri.startswith("grpc://")
    tls = Settings(tls_cert="c.pem", tls_key="k.pem", flight_host="0.0.0.0")
    assert tls.flight_uri == "grpc+tls://127.0.0.1:8815"


def test_mutual_tls_needs_a_client_certificate(mtls_stack: Stack, pki: dict[str, Any]) -> None:
    ca = str(pki["ca"].cert)
    err, seconds = refused(lambda: Client(mtls_stack.uri, timeout=10, tls_root_certs=ca))
    assert err.code == ErrorCode.UNAVAILABLE
    assert "client certificate" in err.message, err.message
    assert seconds < FAIL_FAST_S

    stranger: Pem = pki["stranger"]  # a certificate, but from a CA the server does not trust
    err, _ = refused(
        lambda: Client(
            mtls_stack.uri,
            timeout=10,
            tls_root_certs=ca,
            client_pem_path=str(stranger.cert),
            client_key_path=str(stranger.key),
        )
    )
    assert err.code == ErrorCode.UNAVAILABLE

    mine: Pem = pki["client"]
    client = mtls_stack.client(
        ca_pem_path=ca, client_pem_path=str(mine.cert), client_key_path=str(mine.key)
    )
    assert client.health()["status"] == "ok"
    client.create_collection("mtls_docs", dimension=2)
    assert client.list_collections() == ["mtls_docs"]


# -- `elanus standalone --tls-*` and the CLI's --tls-ca ------------------------------------------


def test_standalone_serves_tls_and_cli_trusts_the_ca(
    standalone_factory: Any, pki: dict[str, Any], tmp_path: Path
) -> None:
    server: Pem = pki["server"]
    ca = str(pki["ca"].cert)
    sp: StandaloneProcess = standalone_factory(
        "--tls-cert", str(server.cert), "--tls-key", str(server.key)
    )
    sp.uri = f"grpc+tls://127.0.0.1:{sp.port}"
    sp.start()
    deadline = time.monotonic() + 60
    while True:
        sp.check_alive()
        try:
            with Client(sp.uri, tls_root_certs=ca, timeout=2) as c:
                c.health()
            break
        except ElanusError:
            assert time.monotonic() < deadline, sp.log()
            time.sleep(0.2)
    assert sp.info()["flight_uri"] == sp.uri

    made = run_elanus(
        "--tls-ca", ca, "collection", "create", "cli_tls", "--dim", "4", "--uri", sp.uri, "--json"
    )
    assert made.returncode == 0, made.stderr
    listed = run_elanus(
        "collection", "list", "--uri", sp.uri, "--json", env=cli_env(ELANUS_TLS_CA=ca)
    )
    assert listed.returncode == 0, listed.stderr
    assert "cli_tls" in listed.stdout

    untrusted = run_elanus("collection", "list", "--uri", sp.uri)
    assert untrusted.returncode == 1
    assert "UNAVAILABLE" in untrusted.stderr and "TLS" in untrusted.stderr
    assert "Traceback" not in untrusted.stderr


def test_standalone_refuses_a_missing_certificate(standalone_factory: Any, tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    sp: StandaloneProcess = standalone_factory(
        "--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", str(key)
    )
    sp.start()
    assert sp.wait(30) != 0
    assert "tls_cert" in sp.log() and "nope.pem" in sp.log()


# -- Spark: option tls_ca -----------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_spark_writes_and_reads_over_tls(tls_stack: Stack, pki: dict[str, Any], spark: Any) -> None:
    from pyspark.sql import functions as F

    ca = str(pki["ca"].cert)
    client = tls_stack.client(tls_root_certs=ca)
    client.create_collection("spark_tls", dimension=4, metric_type="L2")
    client.load_collection("spark_tls")
    df = spark.range(0, 100, numPartitions=2).withColumn(
        "vector", F.array(*[(F.col("id") + i).cast("float") for i in range(4)])
    )
    writer = df.write.format("elanus").option("uri", tls_stack.uri)
    writer.option("collection", "spark_tls").option("tls_ca", ca).mode("append").save()
    (count,) = client.query("spark_tls", "id >= 0", ["count(*)"], consistency_level="Strong")
    assert count["count(*)"] == 100

    reader = spark.read.format("elanus").option("uri", tls_stack.uri)
    back = reader.option("collection", "spark_tls").option("tls_ca", ca).load()
    assert sorted(r["id"] for r in back.select("id").collect()) == list(range(100))

    untrusting = spark.read.format("elanus").option("uri", tls_stack.uri)
    with pytest.raises(Exception, match="TLS handshake"):
        untrusting.option("collection", "spark_tls").load().count()
