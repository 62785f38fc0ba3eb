"""DML payloads handed from a proxy to the consumers of its process (``channels/handoff.py``):
consumers read the log's headers only and take payloads by msg id, and read whole messages
from the log for whatever was not handed over, so the rows stored are the same either way."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from conftest import Stack, StandaloneProcess, bare_collection, wait_for
from test_recovery import stored_pks

from elanus.channels.consumer import ChannelConsumer
from elanus.channels.dml import (
    H_MSG_ID,
    H_TYPE,
    H_VCHANNEL,
    DmlMessage,
    aligned,
    ipc_bytes,
    ipc_payload,
)
from elanus.channels.handoff import Handoff, handoff_for
from elanus.client import Client
from elanus.flight.proxy import ProxyServer
from elanus.wire.putresult import PutAck

DIM = 8


def wire(msg_id: str, vchannel: str, payload: bytes) -> tuple[str, dict[str, str], bytes]:
    return "s", {H_MSG_ID: msg_id, H_VCHANNEL: vchannel}, payload


def test_a_payload_waits_for_every_consumer_of_its_vchannel() -> None:
    h = Handoff()
    h.watch("v1")
    h.watch("v1")
    h.offer([wire("a", "v1", b"xx"), wire("b", "v2", b"yy")])  # nobody watches v2
    assert h.take("b") is None
    assert h.take("a") == b"xx"
    assert h.held_bytes == 2  # the second consumer has not taken it yet
    assert h.take("a") == b"xx"
    assert h.take("a") is None and h.held_bytes == 0


def test_a_payload_looked_at_stays_until_taken() -> None:
    """A consumer looks payloads up when it fetches and takes them as it reads each
    message: a fetch dropped unread (the consumer made anew) finds them again."""
    h = Handoff()
    h.watch("v")
    h.offer([wire("a", "v", b"aa")])
    assert h.peek("a") == b"aa" and h.peek("a") == b"aa"
    assert h.take("a") == b"aa" and h.peek("a") is None


def test_the_oldest_payloads_go_first_when_full_and_a_last_consumer_takes_its_own() -> None:
    h = Handoff(cap_bytes=5)
    h.watch("v")
    h.offer([wire("a", "v", b"aaa"), wire("b", "v", b"bbb")])
    assert h.take("a") is None and h.dropped == 1
    assert h.take("b") == b"bbb"
    h.offer([wire("c", "v", b"c")])
    h.unwatch("v")  # the channel's last consumer stopped: nobody will take "c"
    assert h.held_bytes == 0 and h.take("c") is None


def test_an_ipc_payload_is_the_stream_ipc_bytes_makes_with_the_batch_not_copied() -> None:
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(4000, dtype="f4")), 4)
    batch = pa.record_batch({"id": pa.array(np.arange(1000)), "v": vectors}).slice(100, 500)
    payload = ipc_payload(batch)
    assert bytes(payload) == ipc_bytes(batch).to_pybytes() and len(payload) == payload.nbytes
    body = batch.column(1).values.buffers()[1].address + 100 * 4 * 4
    assert body in [p.address for p in payload.parts if isinstance(p, pa.Buffer)]
    assert payload.batch is batch
    decoded = DmlMessage.decode({H_TYPE: "insert"}, payload).batch
    assert decoded is batch


def test_a_batch_off_its_alignment_is_handed_over_decoded_from_the_stream() -> None:
    """A client's batch can sit at any offset of its gRPC message; Lance refuses such
    buffers, so the consumer decodes the joined stream, which aligns them."""
    raw = pa.py_buffer(b"\0" + np.arange(64, dtype="i8").tobytes())
    odd = pa.Array.from_buffers(pa.int64(), 64, [None, raw.slice(1)])
    batch = pa.record_batch([odd], names=["id"])
    assert not aligned(batch)
    payload = ipc_payload(batch)
    assert payload.batch is None
    decoded = DmlMessage.decode({H_TYPE: "insert"}, payload).batch
    assert decoded.equals(batch) and aligned(decoded)


def insert(client: object, name: str, start: int, n: int) -> list[int]:
    rng = np.random.default_rng(start)
    data = {"id": np.arange(start, start + n), "vector": rng.random((n, DIM), "f4")}
    return list(client.insert(name, data)["ids"])  # type: ignore[attr-defined]


def datanode_consumer(stack: Stack) -> ChannelConsumer:
    channels = wait_for(lambda: stack.datanodes[0].channels, what="a watched vchannel")
    (writer,) = channels.values()
    return writer.consumer


def test_a_standalone_datanode_takes_payloads_from_its_proxy(stack: Stack) -> None:
    client = stack.client()
    client.create_collection("h", dimension=DIM)  # loaded: a delegator consumes it too
    acked = insert(client, "h", 0, 10)
    consumer = datanode_consumer(stack)
    wait_for(lambda: consumer.headers_only, what="the datanode reading headers only")
    handoff = handoff_for(stack.settings.nats_url or "")
    handed = handoff.handed
    for k in range(1, 6):
        acked += insert(client, "h", k * 1000, 200)
    client.flush("h", timeout=30)
    assert handoff.handed >= handed + 5  # at least one message per insert came this way
    assert consumer.headers_only
    assert stored_pks(client, "h") == sorted(acked)
    more = insert(client, "h", 10_000, 50)
    got = client.query("h", filter="id >= 10000", output_fields=["id"], consistency_level="Strong")
    assert sorted(r["id"] for r in got) == sorted(more)


@pytest.mark.parametrize("why", ["another process's proxy", "payloads dropped"])
def test_what_was_not_handed_over_is_read_whole_from_the_log(stack: Stack, why: str) -> None:
    client = stack.client()
    bare_collection(client, "w", DIM)  # not loaded: the datanode alone consumes it
    acked = insert(client, "w", 0, 10)
    consumer = datanode_consumer(stack)
    wait_for(lambda: consumer.headers_only, what="the datanode reading headers only")
    handoff = handoff_for(stack.settings.nats_url or "")
    if why == "payloads dropped":
        cap, handoff.cap_bytes = handoff.cap_bytes, 1
        other = client
    else:  # a proxy on its own connection, as in a process of its own: it hands nothing
        bus = stack.new_bus("elsewhere")
        bus.in_process = False  # what a proxy of another process would have
        stack._buses.append(stack.call(bus.connect()))
        proxy = ProxyServer(stack.settings, bus)
        stack.call(proxy.start())
        stack.proxies.append(proxy)
        assert proxy.dml.handoff is None
        other = stack.client(proxy.uri)
    try:
        for k in range(1, 4):
            acked += insert(other, "w", k * 1000, 200)
        other.flush("w", timeout=30)
    finally:
        if why == "payloads dropped":
            handoff.cap_bytes = cap
    assert consumer.whole_reads > 0  # it went back to the log for them
    assert stored_pks(client, "w") == sorted(acked)


def test_sdk_batches_are_handed_over_without_a_copy_unpadded_ones_are_realigned(
    stack: Stack,
) -> None:
    """The SDK pads each DoPut batch so its body lands 8-aligned in the proxy
    (``elanus/client/bodyalign.py``): the consumer takes it as it is. A Flight client that
    does not pad sends 2 MiB batches that land at 1 mod 8: the consumer copies each into
    alignment, and stores the same rows."""
    client = stack.client()
    bare_collection(client, "a", DIM)  # not loaded: the datanode alone consumes it
    acked = insert(client, "a", 0, 10)
    consumer = datanode_consumer(stack)
    wait_for(lambda: consumer.headers_only, what="the datanode reading headers only")
    client.flush("a", timeout=30)
    # a message of a few KiB sits wherever gRPC's buffer has it: the padding is for the
    # large ones (a copy of a few KiB costs nothing)
    small = consumer.realigned
    rows = 100_000  # 4 MiB of vectors in one batch (split into 1 MB messages by the proxy)
    acked += list(client.insert("a", big_batch(1000, rows))["ids"])
    client.flush("a", timeout=30)
    assert consumer.whole_reads == 0 and consumer.realigned == small

    batch = big_batch(1000 + rows, rows)
    command = {"op": "insert", "collection": "a", "db": "default", "atomic": True}
    with flight.connect(stack.uri) as conn:
        writer, reader = conn.do_put(
            flight.FlightDescriptor.for_command(json.dumps(command).encode()), batch.schema
        )
        writer.write_batch(batch)  # no padding: the body lands off alignment
        writer.done_writing()
        ack = PutAck.decode(reader.read())
        writer.close()
    acked += ack.pks.to_pylist()
    client.flush("a", timeout=30)
    assert consumer.whole_reads == 0 and consumer.realigned >= small + 4  # one per message
    assert stored_pks(client, "a") == sorted(acked)


def big_batch(start: int, n: int) -> pa.RecordBatch:
    rng = np.random.default_rng(start)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * DIM, "f4")), DIM)
    return pa.record_batch({"id": pa.array(np.arange(start, start + n)), "vector": vectors})


def test_a_pack_cut_by_a_missing_payload_is_neither_lost_nor_doubled(stack: Stack) -> None:
    """A payload missing in the middle of a pack: the consumer reads whole messages from
    that one on and keeps what it collected before it."""
    client = stack.client()
    bare_collection(client, "m", DIM)
    acked = insert(client, "m", 0, 10)
    consumer = datanode_consumer(stack)
    wait_for(lambda: consumer.headers_only, what="the datanode reading headers only")
    handoff = handoff_for(stack.settings.nats_url or "")
    peek = handoff.peek
    calls = [0]

    def every_third_missing(msg_id: str | None) -> pa.Buffer | None:
        calls[0] += 1
        return None if calls[0] % 3 == 0 else peek(msg_id)

    handoff.peek = every_third_missing  # type: ignore[method-assign]
    try:
        for k in range(1, 6):
            acked += insert(client, "m", k * 1000, 300)
        client.flush("m", timeout=30)
    finally:
        del handoff.peek
    assert consumer.whole_reads > 0
    assert stored_pks(client, "m") == sorted(acked)


@pytest.mark.chaos
def test_kill_9_of_a_standalone_loses_no_row_it_handed_over(
    standalone_factory: Callable[..., StandaloneProcess],
) -> None:
    """Acknowledged rows the datanode had only taken from the proxy (in memory, nothing
    synced) when the whole standalone died: the restarted one reads them whole from the
    log, from the channel's checkpoint, each once."""
    lease = {"ELANUS_COORD_LEASE_TTL_S": "2"}
    sp = standalone_factory(env=lease).start().wait_ready()
    with Client(sp.uri, timeout=60) as client:
        bare_collection(client, "k", DIM)
        acked = insert(client, "k", 0, 10)
        for k in range(1, 6):
            time.sleep(0.2)  # a few packs, some read headers only
            acked += insert(client, "k", k * 1000, 500)
    sp.send(signal.SIGKILL)
    assert sp.wait(5) == -signal.SIGKILL
    again = standalone_factory(data_dir=sp.data_dir, env=lease).start().wait_ready()
    with Client(again.uri, timeout=60) as client:
        client.flush("k", timeout=60)
        assert stored_pks(client, "k") == sorted(acked)
    assert again.stop() == 0
