"""The malformed-request suite of the Milvus port (issue 33): hostile and careless
``MilvusService`` calls as raw bytes through a bare gRPC channel (no pymilvus client code)
against one real ``elanus standalone`` process serving Milvus's protocol.

For every case: the process is alive and ``CheckHealth`` still answers; no answer takes
2 s or more; a refusal is a Milvus status with a non-zero code whose reason starts with an
Elanus ``[CODE]`` (never INTERNAL: that is a bug in whichever check let the input through),
or Elanus's "not supported", or, for bytes that are not the request message, gRPC's own
error status; no message leaks a traceback, a path or a Python name; where an RPC that
could write was refused, the main collection's row count (Strong) is unchanged. The cases
are in ``milvus_fuzz_cases.py`` and ``milvus_fuzz_values.py``.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from conftest import StandaloneProcess
from fuzz_cases import LEAK, seed_collections
from milvus_fuzz_cases import (
    BIG,
    MAIN,
    MAIN_ROWS,
    WRITES,
    Case,
    base_cases,
    name_cases,
    raw_cases,
)
from milvus_fuzz_values import value_cases
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from elanus.channels.nats_server import free_port
from elanus.client.client import Client
from elanus.errors import ErrorCode
from elanus.milvus.servicer import SERVICE, reply_class

pytestmark = pytest.mark.fuzz

CALL_TIMEOUT_S = 10.0
SLOW_S = 2.0
"""No answer, refusal or not, may take this long."""
SETTINGS: dict[str, object] = {}
"""What the server runs with besides its defaults (as ``ELANUS_*`` variables)."""
KNOWN_CODES = set(ErrorCode.__members__) - {"INTERNAL"}
_CODE = re.compile(r"^\[([A-Z_]+)\] ")
NOT_SUPPORTED = "Elanus does not support "
_INTERNAL_CODES = {5, 65535}
"""Milvus's codes for an unexpected error: never the answer to bad input."""


def served_rpcs() -> list[str]:
    from elanus.milvus.server import MilvusServicer

    return [m.name for m in SERVICE.methods if getattr(getattr(MilvusServicer, m.name, None),
                                                        "_milvus_served", False)]  # fmt: skip


def all_cases() -> list[Case]:
    """Every case, each named once (the ids are the test ids)."""
    served = served_rpcs()
    cases = [*base_cases(), *raw_cases(served), *name_cases(), *value_cases()]
    assert {c.rpc for c in base_cases()} == set(served), "a served RPC without a base request"
    ids = Counter(c.id for c in cases)
    assert max(ids.values()) == 1, [i for i, n in ids.items() if n > 1]
    return cases


@dataclass
class Env:
    server: StandaloneProcess
    channel: grpc.Channel

    def call(self, rpc: str, payload: bytes) -> Any:
        """One raw call; the reply message (a gRPC error raises ``grpc.RpcError``)."""
        method = self.channel.unary_unary(f"/{SERVICE.full_name}/{rpc}")
        raw = method(payload, timeout=CALL_TIMEOUT_S)
        return reply_class(rpc).FromString(raw)

    def count(self) -> int:
        request = milvus_pb2.QueryRequest(
            collection_name=MAIN, output_fields=["count(*)"], consistency_level=common_pb2.Strong
        )
        reply = self.call("Query", request.SerializeToString())
        assert reply.status.code == 0, reply.status.reason
        return int(reply.fields_data[0].scalars.long_data.data[0])

    def assert_alive(self) -> None:
        self.server.check_alive()
        reply = self.call("CheckHealth", milvus_pb2.CheckHealthRequest().SerializeToString())
        assert reply.status.code == 0 and reply.isHealthy, reply


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    data = tmp_path_factory.mktemp("mfuzz") / "data"
    port = free_port()
    server = StandaloneProcess(data, "--milvus-port", str(port))
    server.env = {f"ELANUS_{k.upper()}": str(v) for k, v in SETTINGS.items()}
    channel = None
    try:
        server.start().wait_ready()
        client = Client(server.uri, timeout=CALL_TIMEOUT_S)
        seed_collections(client, MAIN, BIG, index=True)
        client.create_privilege_group("mfz_group")
        client.close()
        channel = grpc.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 << 20)]
        )
        env = Env(server, channel)
        assert env.count() == MAIN_ROWS
        yield env
    finally:
        if channel is not None:
            channel.close()
        server.stop()


# -- the checks --------------------------------------------------------------------------
def check_status(case: Case, status: Any) -> int:
    """A refusal's Milvus status: a known code, Elanus's ``[CODE]`` (or "not supported"),
    the words asked for, no leak. Returns the Milvus code."""
    reason = status.reason
    leak = LEAK.search(reason)
    assert leak is None, f"{case.id}: the message leaks {leak.group(0)!r}: {reason[:600]}"
    assert status.code not in _INTERNAL_CODES, f"{case.id}: an internal error: {reason[:600]}"
    if status.code == 10:
        assert reason.startswith(NOT_SUPPORTED), f"{case.id}: {reason[:600]}"
    else:
        match = _CODE.match(reason)
        assert match is not None, f"{case.id}: no [CODE] in {reason[:600]!r}"
        assert match.group(1) in KNOWN_CODES, f"{case.id}: code {match.group(1)}: {reason[:300]}"
    if case.codes:
        assert status.code in case.codes, (
            f"{case.id}: expected {sorted(case.codes)}, got {status.code}: {reason[:600]}"
        )
    for word in case.words:
        assert word in reason, f"{case.id}: {word!r} not in {reason[:600]!r}"
    return int(status.code)


def _status(reply: Any) -> Any:
    if isinstance(reply, common_pb2.Status):
        return reply
    # AlterCollectionSchemaResponse carries its status as alter_status
    return reply.alter_status if hasattr(reply, "alter_status") else reply.status


def run_case(env: Env, case: Case) -> int | None:
    """Run one case and check everything; the Milvus code of its refusal (None: accepted,
    or refused by gRPC for bytes that did not parse)."""
    started = time.monotonic()
    code: int | None = None
    try:
        reply = env.call(case.rpc, case.payload)
    except grpc.RpcError as exc:
        details = exc.details() or ""
        assert case.raw, f"{case.id}: gRPC error {exc.code()}: {details[:600]}"
        assert LEAK.search(details) is None, f"{case.id}: gRPC error leaks: {details[:600]}"
    else:
        status = _status(reply)
        if status.code or status.error_code:
            code = check_status(case, status)
        else:
            assert case.ok, f"{case.id}: accepted, but it should have been refused"
    elapsed = time.monotonic() - started
    assert elapsed < SLOW_S, f"{case.id}: answered in {elapsed:.1f} s"
    env.assert_alive()
    if case.rpc in WRITES and (code is not None or not case.ok):
        assert env.count() == MAIN_ROWS, f"{case.id}: refused, yet the rows of {MAIN} changed"
    return code


def _params() -> list[Any]:
    return [pytest.param(case, id=case.id) for case in all_cases()]


@pytest.mark.parametrize("case", _params())
def test_malformed_request(env: Env, case: Case) -> None:
    run_case(env, case)


def test_the_main_collection_is_intact(env: Env) -> None:
    """After every case (this runs last in the module): the rows written at set-up are
    all there and read back unchanged, and the index of the loaded collection is there."""
    request = milvus_pb2.QueryRequest(
        collection_name=MAIN,
        expr="id < 100",
        output_fields=["title"],
        query_params=[common_pb2.KeyValuePair(key="limit", value="100")],
        consistency_level=common_pb2.Strong,
    )
    reply = env.call("Query", request.SerializeToString())
    assert reply.status.code == 0, reply.status.reason
    columns = {fd.field_name: fd for fd in reply.fields_data}
    assert sorted(columns["id"].scalars.long_data.data) == list(range(MAIN_ROWS))
    assert set(columns["title"].scalars.string_data.data) == {f"t{i}" for i in range(60)}
    described = env.call(
        "DescribeIndex", milvus_pb2.DescribeIndexRequest(collection_name=MAIN).SerializeToString()
    )
    assert described.status.code == 0 and described.index_descriptions, described.status


def test_case_count() -> None:
    """The issue asks for at least 300 cases."""
    assert len(all_cases()) >= 300
