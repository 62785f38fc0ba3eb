"""JetStream from a thread, against a real nats-server. Publishing
(``channels/syncpublish.py``): what the log took is acknowledged, and whatever it did not
take comes back to the caller (who sends it the loop's way), never an exception or a hang.
Fetching (``channels/syncfetch.py``): what the stream has now at once, a long poll when it
has nothing, positions read from the delivery, and a lost server is UNAVAILABLE."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.syncfetch import ThreadFetcher, positions
from elanus.channels.syncnats import SyncRequester
from elanus.channels.syncpublish import ThreadPublisher, Wire
from elanus.errors import ElanusError, ErrorCode


def stream_messages(server: EmbeddedNats, name: str) -> int:
    async def count() -> int:
        creds = server.credentials
        nc = await nats.connect(server.url, user=creds.user, password=creds.password)
        try:
            js = nc.jetstream()
            if name == "-":  # create, with a pull consumer of every message
                await js.add_stream(name="S", subjects=["s.>"])
                config = ConsumerConfig(durable_name="d", ack_policy=AckPolicy.NONE)
                await js.add_consumer("S", config)
                return 0
            return (await js.stream_info(name)).state.messages
        finally:
            await nc.close()

    return asyncio.run(count())


def wire(subject: str, msg_id: str, size: int = 1000) -> Wire:
    return subject, {"Nats-Msg-Id": msg_id}, bytes(size)


def ids(messages: list[Wire]) -> list[str]:
    return [headers["Nats-Msg-Id"] for _, headers, _ in messages]


@pytest.fixture
def requester(nats_server: EmbeddedNats) -> Iterator[SyncRequester]:
    stream_messages(nats_server, "-")
    sync = SyncRequester(nats_server.url, nats_server.credentials, "test")
    yield sync
    sync.close()


def test_batches_are_acknowledged_in_any_order_of_waiting(
    nats_server: EmbeddedNats, requester: SyncRequester
) -> None:
    pub = ThreadPublisher(requester)
    first = pub.send([wire("s.a", f"a{i}", 900_000) for i in range(5)])
    second = pub.send([wire("s.b", f"b{i}") for i in range(3)])
    assert pub.wait(second) == []  # the first batch's answers are read on the way
    assert pub.wait(first) == []
    again = pub.send([wire("s.a", "a0", 900_000)])  # a repeated id: stored once, still ok
    assert pub.wait(again) == []
    pub.close()
    assert stream_messages(nats_server, "S") == 8


def test_what_no_stream_takes_comes_back_to_the_caller(requester: SyncRequester) -> None:
    pub = ThreadPublisher(requester)
    sending = pub.send([wire("s.a", "x1"), wire("nostream.a", "x2"), wire("s.a", "x3")])
    assert ids(pub.wait(sending)) == ["x2"]
    too_big = ("s.a", {"Nats-Msg-Id": "x4"}, bytes(2 * 1024 * 1024))
    assert pub.wait(pub.send([too_big])) == [too_big]  # not sent: over the server's limit
    pub.close()


def test_a_lost_server_hands_everything_unacknowledged_back(
    nats_server: EmbeddedNats, requester: SyncRequester
) -> None:
    pub = ThreadPublisher(requester)
    assert pub.wait(pub.send([wire("s.a", "y0")])) == []
    nats_server.stop()
    started = time.monotonic()
    batch = [wire("s.a", f"y{i}", 500_000) for i in range(1, 20)]
    failed = pub.wait(pub.send(batch))
    assert sorted(ids(failed)) == sorted(ids(batch))
    assert time.monotonic() - started < 5
    later = [wire("s.a", "y99")]
    assert pub.wait(pub.send(later)) == later  # the connection is gone for good
    pub.close()


def test_a_fetch_takes_what_is_there_and_long_polls_when_nothing_is(
    requester: SyncRequester,
) -> None:
    pub = ThreadPublisher(requester)
    assert pub.wait(pub.send([wire("s.a", f"f{i}", 200_000 * (i % 2)) for i in range(5)])) == []
    fetcher = ThreadFetcher(requester, "S", "d", "test-fetch")
    try:
        got = fetcher.fetch_here(16, 1.0)  # five there, sixteen asked: the five, at once
        assert [(m.seq, m.consumer_seq, m.pending) for m in got] == [
            (i + 1, i + 1, 4 - i) for i in range(5)
        ]
        assert [m.headers["Nats-Msg-Id"] for m in got] == [f"f{i}" for i in range(5)]
        assert [len(m.data) for m in got] == [0, 200_000, 0, 200_000, 0]
        started = time.monotonic()
        assert fetcher.fetch_here(16, 0.5) == []  # nothing: the long poll ends empty
        assert 0.4 < time.monotonic() - started < 3
        assert pub.wait(pub.send([wire("s.b", "late")])) == []
        assert [m.seq for m in fetcher.fetch_here(16, 5.0)] == [6]
    finally:
        fetcher.close()
        pub.close()


def test_a_lost_server_fails_a_fetch_as_unavailable(
    nats_server: EmbeddedNats, requester: SyncRequester
) -> None:
    fetcher = ThreadFetcher(requester, "S", "d", "test-fetch")
    try:
        assert fetcher.fetch_here(4, 0.1) == []
        nats_server.stop()
        with pytest.raises(ElanusError) as err:
            fetcher.fetch_here(4, 0.5)
        assert err.value.code is ErrorCode.UNAVAILABLE
    finally:
        fetcher.close()


def test_positions_are_read_from_both_forms_of_the_ack_subject() -> None:
    assert positions("$JS.ACK.S.d.1.42.7.1700000000000000000.3") == (42, 7, 3)
    assert positions("$JS.ACK.hub.ACCHASH.S.d.1.42.7.1700000000000000000.3.tok") == (42, 7, 3)
    with pytest.raises(ValueError):
        positions("_INBOX.abc")


def test_closing_a_fetcher_wakes_its_long_poll_at_once(requester: SyncRequester) -> None:
    """A consumer that stops (a release, a channel moving) must not leave its fetch
    thread blocked until the long poll times out: process exit waits for that thread."""
    fetcher = ThreadFetcher(requester, "S", "d", "test-fetch")
    polling = fetcher._thread.submit(fetcher.fetch_here, 16, 30.0)
    time.sleep(0.3)  # in its long poll now
    started = time.monotonic()
    fetcher.close()
    with pytest.raises(ElanusError):
        polling.result(timeout=10)
    assert time.monotonic() - started < 2


def test_a_pull_nobody_answers_fails_rather_than_reading_as_empty(
    requester: SyncRequester,
) -> None:
    """NATS answers 503 (no responders) to a pull on a consumer that has no leader (its
    servers electing one after a kill) or no longer exists: that is a failed fetch, which
    the consumer logs, counts its flow lag from, and recovers from by subscribing again,
    never "at the log's end" (a query node read nothing for 30 s in a chaos run so)."""
    fetcher = ThreadFetcher(requester, "S", "no-such-consumer", "test-fetch")
    try:
        with pytest.raises(ElanusError) as err:
            fetcher.fetch_here(4, 0.5)
        assert err.value.code is ErrorCode.UNAVAILABLE
        assert "503" in err.value.message
    finally:
        fetcher.close()
