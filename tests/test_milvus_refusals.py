"""What the Milvus port answers for the RPCs it does not serve, and how pymilvus takes it
(issue 36): at once, in the RPC's own response type or as gRPC UNIMPLEMENTED, never
UNKNOWN (which pymilvus retries for minutes); UNIMPLEMENTED exactly where pymilvus falls
back to an older RPC on it. Every ``MilvusClient`` method docs/milvus-compat.md marks
refused fails so, as its row says. And keepalive pings from an idle client are taken, as
Milvus takes pymilvus's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from compat_doc import method_rows
from conftest import own_stack
from google.protobuf import message_factory
from milvus_stack import MilvusStack, milvus_stack
from pymilvus import DataType, Function, FunctionType, MilvusClient
from pymilvus.exceptions import MilvusException
from pymilvus.grpc_gen import common_pb2

from elanus.milvus.servicer import FALLS_BACK, SERVICE, status_field

ANSWER_S = 1.0
"""How long a refusal may take, pymilvus's retries included."""
RETRIED = {8}
"""Milvus codes pymilvus retries (``retry_on_rpc_failure``: rate limited)."""


@pytest.fixture(scope="module")
def mstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusStack]:
    """One stack for the file: every test but the last asks what is refused (one makes
    the collection ``c``); the last needs settings of its own."""
    tmp = tmp_path_factory.mktemp("refusals")
    with own_stack(tmp, "milvus-refusals", kind=MilvusStack) as stack:
        stack.add_indexnode()  # as ``milvus_stack`` gives
        yield stack


def _address(mstack: MilvusStack) -> str:
    return mstack.milvus_uri.removeprefix("http://")


def _call(channel: grpc.Channel, method: Any) -> Any:
    """``method`` called with an empty request: its reply, or the gRPC error raised."""
    request = message_factory.GetMessageClass(method.input_type)()
    reply = message_factory.GetMessageClass(method.output_type)
    path = f"/{SERVICE.full_name}/{method.name}"
    codec = {
        "request_serializer": type(request).SerializeToString,
        "response_deserializer": reply.FromString,
    }
    try:
        if method.client_streaming:
            return list(channel.stream_stream(path, **codec)(iter([request]), timeout=ANSWER_S))
        if method.server_streaming:
            return list(channel.unary_stream(path, **codec)(request, timeout=ANSWER_S))
        return channel.unary_unary(path, **codec)(request, timeout=ANSWER_S)
    except grpc.RpcError as exc:
        return exc


def test_every_unserved_rpc_refuses_at_once(mstack: MilvusStack) -> None:
    face = mstack.proxy.milvus
    assert face is not None and face.servicer is not None
    served = set(face.servicer.served_rpcs())
    unserved = [m for m in SERVICE.methods if m.name not in served]
    assert {m.name for m in unserved} >= FALLS_BACK
    with grpc.insecure_channel(_address(mstack)) as channel:
        flaws = {m.name: _flaw(channel, m) for m in unserved}
    assert {rpc: flaw for rpc, flaw in flaws.items() if flaw} == {}


def _flaw(channel: grpc.Channel, method: Any) -> str:
    """What is wrong with ``method``'s answer to an empty request ("" if nothing)."""
    start = time.monotonic()
    answer = _call(channel, method)
    took = time.monotonic() - start
    if took >= ANSWER_S:
        return f"took {took:.2f} s"
    if isinstance(answer, grpc.RpcError):
        if answer.code() != grpc.StatusCode.UNIMPLEMENTED:
            return f"gRPC {answer.code()}: {answer.details()}"
        named = method.name in (answer.details() or "")
        return "" if named else f"UNIMPLEMENTED not naming it: {answer.details()}"
    if method.name in FALLS_BACK:
        return "answered where pymilvus needs UNIMPLEMENTED to fall back"
    field = status_field(method.name)
    if field is None:
        return "a reply without a status says nothing"
    status = answer if field == "" else getattr(answer, field)
    if status.code == 0 or status.code in RETRIED or status.error_code == common_pb2.RateLimit:
        return f"status {status.code}/{status.error_code} is success or retried"
    return "" if method.name in status.reason else f"reason not naming it: {status.reason}"


def _refused_calls(client: MilvusClient) -> dict[str, Any]:
    """A plausible call of each method docs/milvus-compat.md marks refused, on collection
    ``c`` (a quick setup: ``id``, a 4-dimensional ``vector``)."""
    bm25 = Function("bm", FunctionType.BM25, input_field_names=["text"], output_field_names=["sp"])
    struct = MilvusClient.create_struct_field_schema()
    struct.add_field("n", DataType.INT32)
    group = {"requests": {"node_num": 1}, "limits": {"node_num": 1}}
    cluster = {"cluster_id": "b", "connection_param": {"uri": "http://b:19530", "token": ""}}
    c = client
    return {
        "alter_role": lambda: c.alter_role("public", "everyone"),
        "update_user": lambda: c.update_user("root", "the superuser"),
        "create_resource_group": lambda: c.create_resource_group("rg"),
        "describe_resource_group": lambda: c.describe_resource_group("rg"),
        "list_resource_groups": lambda: c.list_resource_groups(),
        "update_resource_groups": lambda: c.update_resource_groups({"rg": group}),
        "transfer_replica": lambda: c.transfer_replica("__default_resource_group", "rg", "c", 1),
        "drop_resource_group": lambda: c.drop_resource_group("rg"),
        "add_file_resource": lambda: c.add_file_resource("words", "s3://b/words.txt"),
        "list_file_resources": lambda: c.list_file_resources(),
        "remove_file_resource": lambda: c.remove_file_resource("words"),
        "get_replicate_configuration": lambda: c.get_replicate_configuration(),
        "update_replicate_configuration": lambda: c.update_replicate_configuration([cluster]),
        "get_replicate_info": lambda: c.get_replicate_info("b", "p0"),
        "dump_messages": lambda: list(c.dump_messages("p0", {"id": "1", "wal_name": "Kafka"})),
        "refresh_external_collection": lambda: c.refresh_external_collection("c", "s3://b/x"),
        "get_refresh_external_collection_progress": (
            lambda: c.get_refresh_external_collection_progress(1)
        ),
        "list_refresh_external_collection_jobs": (
            lambda: c.list_refresh_external_collection_jobs("c")
        ),
        "add_collection_struct_field": lambda: c.add_collection_struct_field("c", "s", struct, 4),
        "add_collection_function": lambda: c.add_collection_function("c", bm25),
        "alter_collection_function": lambda: c.alter_collection_function("c", "bm", bm25),
        "drop_collection_function": lambda: c.drop_collection_function("c", "bm"),
        "session": lambda: c.session("b").search("c", [[0.1, 0.2, 0.3, 0.4]], limit=1),
    }


def test_every_refused_client_method_fails_at_once(mstack: MilvusStack) -> None:
    """Each ``MilvusClient`` method the doc marks refused fails within a second (pymilvus's
    retries included) with the error its row gives, naming what is not supported, and
    leaves the collection as it was."""
    refused = {n: row for n, row in method_rows().items() if row.status == "refused"}
    client = MilvusClient(uri=mstack.milvus_uri, timeout=30)
    try:
        client.create_collection("c", dimension=4)
        before = client.describe_collection("c")
        calls = _refused_calls(client)
        assert sorted(calls) == sorted(refused), "a call for each refused row, and no other"
        flaws = {
            name: _client_flaw(call, refused[name].error, refused[name].rpcs[-1])
            for name, call in calls.items()
        }
        assert {name: flaw for name, flaw in flaws.items() if flaw} == {}
        assert client.describe_collection("c") == before
    finally:
        client.close()


def _client_flaw(call: Any, error: str, rpc: str) -> str:
    """What is wrong with how ``call`` failed ("" if nothing): ``error`` is the row's
    ``10``, ``UNIMPLEMENTED`` or ``1100``; ``rpc`` the RPC that refuses it."""
    start = time.monotonic()
    try:
        call()
    except MilvusException as exc:
        got, said = str(exc.code), exc.message
    except grpc.RpcError as exc:
        got, said = exc.code().name, exc.details() or ""
    else:
        return "succeeded"
    took = time.monotonic() - start
    if took >= ANSWER_S:
        return f"took {took:.2f} s"
    if got != error:
        return f"failed with {got} ({said}), not {error}"
    named = "is refused" in said if error == "1100" else f"support {rpc} " in said
    return "" if named else f"the message does not name it: {said}"


def test_served_replies_carry_a_status() -> None:
    """``failed`` puts a served RPC's errors in its reply's status."""
    from elanus.milvus.server import MilvusServicer

    names = [m.name for m in SERVICE.methods]
    served = [n for n in names if getattr(getattr(MilvusServicer, n), "_milvus_served", False)]
    assert "AddCollectionField" in served and "AllocTimestamp" in served
    assert [n for n in served if status_field(n) is None] == []


def test_pymilvus_fails_at_once_where_it_cannot_fall_back(mstack: MilvusStack) -> None:
    """``get_replicate_info`` has no older RPC and fails at once on UNIMPLEMENTED; a
    refusal with a status is not retried; ``alloc_timestamp`` (0 on UNIMPLEMENTED) is
    served. (``AlterCollectionSchema``, which ``add_collection_field`` tried before
    ``AddCollectionField``, is served: ``tests/test_milvus_schema_alter.py``.)"""
    client = MilvusClient(uri=mstack.milvus_uri, timeout=30)
    try:
        # its reply has no status: not an empty reply pymilvus would read as no checkpoint
        _unimplemented("GetReplicateInfo", lambda: client.get_replicate_info("c", "p"))

        start = time.monotonic()
        with pytest.raises(MilvusException) as refused:
            client.list_resource_groups()
        assert time.monotonic() - start < ANSWER_S and refused.value.code == 10

        assert client._get_connection().alloc_timestamp() > 0
    finally:
        client.close()


def _unimplemented(rpc: str, call: Any) -> None:
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as info:
        call()
    assert time.monotonic() - start < ANSWER_S
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert rpc in (info.value.details() or "")


def test_idle_pings_keep_the_connection(mstack: MilvusStack) -> None:
    """A client pinging every second while idle (pymilvus: every 10 s) keeps its
    connection: gRPC's default policy closed it with GOAWAY ``too_many_pings`` at the
    third ping, so the channel left READY within 3 s."""
    options = [
        ("grpc.keepalive_time_ms", 1000),
        ("grpc.keepalive_timeout_ms", 1000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),  # idle pings without limit
    ]
    states: list[grpc.ChannelConnectivity] = []
    method = SERVICE.methods_by_name["CheckHealth"]
    with grpc.insecure_channel(_address(mstack), options=options) as channel:
        assert not isinstance(_call(channel, method), grpc.RpcError)
        channel.subscribe(states.append, try_to_connect=False)
        time.sleep(5.0)  # idle: five pings
        assert not isinstance(_call(channel, method), grpc.RpcError)
        seen = list(states)
    assert set(seen) == {grpc.ChannelConnectivity.READY}, seen


def test_a_request_over_the_size_limit_is_told_in_milvus_words(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A pymilvus insert over ``max_action_bytes`` is told to send smaller requests, never
    to use Flight's streams (DoPut, DoExchange), which a Milvus client does not have."""
    for stack in milvus_stack(request, tmp_path, max_action_bytes=1 << 20):
        client = MilvusClient(stack.milvus_uri)
        client.create_collection("big", dimension=256)
        rows = [{"id": i, "vector": [0.5] * 256} for i in range(2000)]  # ~2 MiB
        with pytest.raises(MilvusException) as refused:
            client.insert("big", rows)
        said = str(refused.value)
        assert "max_action_bytes" in said and "smaller requests" in said, said
        assert "DoPut" not in said and "DoExchange" not in said, said
        client.close()
