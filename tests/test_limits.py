"""Request limits (issue 13, item 6): body size before parsing, DoPut stream caps in every
mode, and per-user DML/DQL rate limits (RATE_LIMITED, nothing done), on a real stack.

Each test starts its own proxy on the module's stack with the settings under test
(``limited``), so the limits come from settings exactly as in a server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from conftest import Stack, own_stack

from elanus import ElanusError, ErrorCode
from elanus.client.client import Client
from elanus.errors import parse_prefixed
from elanus.flight.limits import Kind, RateLimiter
from elanus.flight.proxy import ProxyServer
from elanus.wire.putresult import PutAck

DIM = 4
SCHEMA = pa.schema([("id", pa.int64()), ("vector", pa.list_(pa.float32(), DIM))])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with own_stack(tmp_path_factory.mktemp("limits"), "limits-stack") as s:
        c = s.client()
        c.create_collection("lim", dimension=DIM, metric_type="L2")
        c.load_collection("lim")
        yield s


def limited(stack: Stack, **settings: Any) -> str:
    """The uri of a new proxy on ``stack`` whose settings differ by ``settings``."""
    proxy = ProxyServer(stack.settings.replace(**settings), stack.bus)
    stack.call(proxy.start())
    stack.proxies.append(proxy)  # stopped with the stack
    return proxy.uri


def rows(ids: range | list[int]) -> pa.RecordBatch:
    ids = list(ids)
    vectors = np.random.default_rng(len(ids)).random((len(ids), DIM), dtype=np.float32)
    return pa.record_batch(
        [pa.array(ids, pa.int64()), pa.FixedSizeListArray.from_arrays(vectors.ravel(), DIM)],
        schema=SCHEMA,
    )


def count(stack: Stack, expr: str) -> int:
    """Rows matching ``expr`` at a Strong read, through the module's unlimited proxy."""
    (row,) = stack.client().query("lim", expr, ["count(*)"], consistency_level="Strong")
    return int(row["count(*)"])


def flight_code(exc: BaseException) -> tuple[str, str]:
    """(code, message) of a Flight error raised by the proxy."""
    info = getattr(exc, "extra_info", None)
    if info:
        doc = json.loads(info)
        return doc["code"], doc["message"]
    parsed = parse_prefixed(str(exc))
    assert parsed is not None, str(exc)
    return parsed


def put(uri: str, command: dict[str, Any], batches: list[pa.RecordBatch]) -> tuple[int, Any]:
    """A bare DoPut: send ``batches``, read the acks; (rows acknowledged, error or None)."""
    fc = flight.FlightClient(uri)
    acked, error = 0, None
    try:
        descriptor = flight.FlightDescriptor.for_command(json.dumps(command).encode())
        writer, reader = fc.do_put(descriptor, SCHEMA)
        write_error = read_error = None
        try:
            for batch in batches:
                writer.write_batch(batch)
            writer.done_writing()
        except (flight.FlightError, pa.ArrowException) as exc:
            write_error = exc  # the server may refuse while we still write: read on
        try:  # the acks sent before a refusal arrive before its status
            while (buf := reader.read()) is not None:
                acked += len(PutAck.decode(buf).pks)
        except (flight.FlightError, pa.ArrowException) as exc:
            read_error = exc
        error = read_error or write_error
        try:
            writer.close()
        except (flight.FlightError, pa.ArrowException) as exc:
            error = error or exc
    finally:
        fc.close()
    return acked, error


# -- size of bodies, tickets and commands ---------------------------------------------------------


@pytest.mark.slow
def test_200_mib_action_body_is_refused_from_its_length(stack: Stack) -> None:
    """Not JSON at all: were it parsed, the answer would be INVALID_ARGUMENT (malformed)."""
    body = b"[" * (200 << 20)
    fc = flight.FlightClient(stack.uri)
    try:
        started = time.monotonic()
        with pytest.raises(flight.FlightServerError) as info:
            list(fc.do_action(flight.Action("search", body)))
        seconds = time.monotonic() - started
    finally:
        fc.close()
    code, message = flight_code(info.value)
    assert code == "REQUEST_TOO_LARGE", message
    assert "max_action_bytes" in message and "search body" in message
    assert seconds < 10, f"refusing took {seconds:.1f} s"
    # the same bytes under the limit are parsed, and refused for what they are
    fc = flight.FlightClient(stack.uri)
    try:
        with pytest.raises(flight.FlightServerError) as info:
            list(fc.do_action(flight.Action("search", b"[" * 1000)))
    finally:
        fc.close()
    assert flight_code(info.value)[0] == "INVALID_ARGUMENT"


def test_every_call_checks_the_size_of_what_it_is_sent(stack: Stack) -> None:
    uri = limited(stack, max_action_bytes=1 << 20)
    big = json.dumps({"collection": "lim", "pad": "x" * (2 << 20)}).encode()
    fc = flight.FlightClient(uri)
    calls = {
        "DoAction": lambda: list(fc.do_action(flight.Action("query", big))),
        "DoGet": lambda: fc.do_get(flight.Ticket(big)).read_all(),
        "GetFlightInfo": lambda: fc.get_flight_info(flight.FlightDescriptor.for_command(big)),
        "GetSchema": lambda: fc.get_schema(flight.FlightDescriptor.for_command(big)),
    }
    try:
        for call, run in calls.items():
            with pytest.raises((flight.FlightError, pa.ArrowException)) as info:
                run()
            code, message = flight_code(info.value)
            assert code == "REQUEST_TOO_LARGE", (call, message)
        writer, reader = fc.do_exchange(flight.FlightDescriptor.for_command(big))
        with pytest.raises(flight.FlightError) as info:
            writer.begin(pa.schema([("q", pa.list_(pa.float32(), DIM))]))
            writer.done_writing()
            reader.read_all()
        assert flight_code(info.value)[0] == "REQUEST_TOO_LARGE"
    finally:
        fc.close()
    acked, error = put(uri, {"collection": "lim", "pad": "x" * (2 << 20)}, [rows([1])])
    assert acked == 0 and flight_code(error)[0] == "REQUEST_TOO_LARGE"
    # under the limit the same proxy answers
    assert Client(uri).list_collections() == ["lim"]


# -- DoPut stream caps ----------------------------------------------------------------------------


def test_put_byte_cap_atomic_writes_nothing(stack: Stack) -> None:
    batch = rows(range(1000, 1100))
    uri = limited(stack, max_put_bytes=3 * batch.nbytes + 10)
    client = Client(uri)
    with pytest.raises(ElanusError) as info:  # five batches of the SDK's one atomic stream
        client.insert("lim", rows(range(1000, 1500)), batch_bytes=batch.nbytes)
    assert info.value.code == ErrorCode.REQUEST_TOO_LARGE
    assert "max_put_bytes" in info.value.message and "nothing was written" in info.value.message
    assert count(stack, "id >= 1000 and id < 1500") == 0
    # a stream under the cap goes through on the same proxy
    assert client.insert("lim", rows(range(1000, 1200)))["insert_count"] == 200
    assert count(stack, "id >= 1000 and id < 1500") == 200


def test_put_byte_cap_non_atomic_keeps_what_was_acknowledged(stack: Stack) -> None:
    batches = [rows(range(2000 + 10 * i, 2010 + 10 * i)) for i in range(6)]
    uri = limited(stack, max_put_bytes=int(2.5 * batches[0].nbytes))
    acked, error = put(uri, {"collection": "lim", "atomic": False}, batches)
    code, message = flight_code(error)
    assert code == "REQUEST_TOO_LARGE" and "max_put_bytes" in message
    assert "2 batches (20 rows)" in message and "stay written" in message
    assert acked == 20
    assert count(stack, "id >= 2000 and id < 2100") == 20


def test_put_batch_cap_in_every_mode(stack: Stack) -> None:
    uri = limited(stack, max_put_batches=3)
    batches = [rows(range(3000 + 10 * i, 3010 + 10 * i)) for i in range(5)]
    acked, error = put(uri, {"collection": "lim", "atomic": True}, batches)
    code, message = flight_code(error)
    assert code == "REQUEST_TOO_LARGE" and "max_put_batches" in message
    assert "nothing was written" in message and acked == 0
    assert count(stack, "id >= 3000 and id < 3100") == 0

    acked, error = put(uri, {"collection": "lim", "atomic": False}, batches)
    code, message = flight_code(error)
    assert code == "REQUEST_TOO_LARGE" and "3 batches (30 rows)" in message
    assert acked == 30 and count(stack, "id >= 3000 and id < 3100") == 30

    staged = [rows(range(3100 + 10 * i, 3110 + 10 * i)) for i in range(5)]
    acked, error = put(uri, {"collection": "lim", "stage": "capped", "stage_part": "p0"}, staged)
    code, message = flight_code(error)
    assert code == "REQUEST_TOO_LARGE" and "were staged" in message and acked == 30
    Client(uri).abort_write("capped")
    assert count(stack, "id >= 3100 and id < 3200") == 0
    # three batches are fine
    acked, error = put(uri, {"collection": "lim", "atomic": True}, staged[:3])
    assert error is None and acked == 30


# -- rate limits ----------------------------------------------------------------------------------


def test_rate_limiter_burst_and_refill() -> None:
    now = [100.0]
    limiter = RateLimiter({Kind.DML: 4, Kind.DQL: 0}, clock=lambda: now[0])
    for _ in range(4):  # the burst: one second's worth
        limiter.take("ann", Kind.DML)
    with pytest.raises(ElanusError) as info:
        limiter.take("ann", Kind.DML)
    err = info.value
    assert err.code == ErrorCode.RATE_LIMITED and err.retryable
    assert "'ann'" in err.message and "DML" in err.message and "4 requests/s" in err.message
    limiter.take("bob", Kind.DML)  # buckets are per user
    for _ in range(1000):
        limiter.take("ann", Kind.DQL)  # 0: unlimited
    now[0] += 0.5  # half a second refills two
    limiter.take("ann", Kind.DML)
    limiter.take("ann", Kind.DML)
    with pytest.raises(ElanusError):
        limiter.take("ann", Kind.DML)
    now[0] += 60  # never more than the burst
    for _ in range(4):
        limiter.take("ann", Kind.DML)
    with pytest.raises(ElanusError):
        limiter.take("ann", Kind.DML)


def test_dml_rate_limit_from_16_threads(stack: Stack) -> None:
    rate = 5
    uri = limited(stack, dml_rate_per_user=rate)
    accepted: list[int] = []
    refused: list[ElanusError] = []
    other: list[BaseException] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        with Client(uri, timeout=30, retry_deadline_s=0) as c:  # see every refusal
            for i in range(4):
                key = 4000 + 10 * t + i
                try:
                    c.insert("lim", rows([key]))
                except ElanusError as exc:
                    with lock:
                        (refused if exc.code == ErrorCode.RATE_LIMITED else other).append(exc)
                except BaseException as exc:  # noqa: BLE001
                    with lock:
                        other.append(exc)
                else:
                    with lock:
                        accepted.append(key)

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    seconds = time.monotonic() - started
    assert not other, other[:3]
    assert len(accepted) + len(refused) == 64
    assert refused, "16 threads x 4 inserts met no limit"
    assert rate <= len(accepted) <= rate + rate * seconds + 1
    first = refused[0]
    assert (
        "'anonymous'" in first.message
        and "DML" in first.message
        and "5 requests/s" in first.message
    )
    assert "dml_rate_per_user" in first.message
    # exactly the accepted calls wrote rows; the refused ones changed nothing
    assert count(stack, "id >= 4000 and id < 4200") == len(accepted)
    ids = {
        r["id"]
        for r in stack.client().query(
            "lim", "id >= 4000 and id < 4200", ["id"], consistency_level="Strong"
        )
    }
    assert ids == set(accepted)
    # a refused delete deletes nothing either
    c = Client(uri, retry_deadline_s=0)
    with pytest.raises(ElanusError) as info:
        for key in accepted * 3:
            c.delete("lim", ids=[key])
    assert info.value.code == ErrorCode.RATE_LIMITED
    time.sleep(1.1)  # a second refills the bucket: calls pass again
    assert c.insert("lim", rows([4199]))["insert_count"] == 1


def test_dql_and_dml_buckets_are_independent(stack: Stack) -> None:
    uri = limited(stack, dml_rate_per_user=1, dql_rate_per_user=1)  # refills in 1 s
    c = Client(uri, retry_deadline_s=0)  # writes refused are not sent again
    query = lambda: c.query("lim", "id >= 0", ["count(*)"], consistency_level="Eventually")  # noqa: E731

    def exhaust(call: Any, kind: str) -> int:
        passed = 0
        for _ in range(50):
            try:
                call()
                passed += 1
            except ElanusError as exc:
                assert exc.code == ErrorCode.RATE_LIMITED and kind in exc.message
                return passed
        raise AssertionError(f"{kind}: 50 calls met no limit")

    assert exhaust(lambda: c.insert("lim", rows([5000])), "DML") >= 1
    # DML is spent; searches, queries and DDL still pass
    assert exhaust(query, "DQL") >= 1
    assert c.list_collections() == ["lim"] and c.describe_collection("lim")["name"] == "lim"
    # DQL is spent too: every read path says so, the DML bucket is refilling on its own
    fc = flight.FlightClient(uri)
    try:
        with pytest.raises(flight.FlightError) as info:
            fc.get_flight_info(
                flight.FlightDescriptor.for_command(json.dumps({"collection": "lim"}).encode())
            )
        assert flight_code(info.value)[0] == "RATE_LIMITED"
    finally:
        fc.close()
    with pytest.raises(ElanusError) as refused:
        c.search("lim", [[0.0] * DIM], limit=1, consistency_level="Eventually")
    assert refused.value.code == ErrorCode.RATE_LIMITED
    time.sleep(1.1)
    assert c.insert("lim", rows([5001]))["insert_count"] == 1
    assert len(c.search("lim", [[0.0] * DIM], limit=1, consistency_level="Eventually")) == 1


def test_default_limits_are_on(tmp_path: Path) -> None:
    from elanus.settings import Settings

    s = Settings()
    assert s.dml_rate_per_user > 0 and s.dql_rate_per_user > 0
    assert s.max_action_bytes == 64 << 20


def test_a_huge_action_name_counts_and_is_not_echoed(stack: Stack) -> None:
    uri = limited(stack, max_action_bytes=1 << 20)
    fc = flight.FlightClient(uri)
    try:
        with pytest.raises(flight.FlightServerError) as info:
            list(fc.do_action(flight.Action("x" * (2 << 20), b"{}")))
    finally:
        fc.close()
    code, message = flight_code(info.value)
    assert code == "REQUEST_TOO_LARGE" and len(message) < 500
