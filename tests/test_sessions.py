"""A role's session (``channels/runtime/sessions.py``) on a real nats-server: once ``stop``
returns, the session is gone for whoever lists them, whatever update of it was under way.

CI found a stopped query node's session listed by the coord started next (``Stack.restart``
in test_partition_key): a memory update of the node, spawned by a handoff that raced its
stop, put the key back after the purge, and the new coord placed a load on a node gone.
"""

from __future__ import annotations

import asyncio

from elanus.channels.bus import Bus
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.runtime.sessions import Session, SessionInfo, list_sessions

TTL_S = 2.0


async def _publish_later(session: Session, turns: int) -> None:
    """An update that starts ``turns`` loop turns later: one of them starts while the
    stop waits for its purge."""
    for _ in range(turns):
        await asyncio.sleep(0)
    await session.publish()


async def _stop_amid_updates(url: str, nats: EmbeddedNats, rounds: int) -> list[str]:
    """Sessions that outlived their ``stop``: each round stops one while updates of it
    (a role's ``meta_changed`` tasks) start before, with and after the stop."""
    bus = await Bus(url, name="roles", credentials=nats.credentials).connect()
    lister = await Bus(url, name="coord", credentials=nats.credentials).connect()
    survivors: list[str] = []
    try:
        for i in range(rounds):
            session = await Session(bus, SessionInfo("querynode", f"qn{i}"), TTL_S).start()
            before = [asyncio.ensure_future(session.publish()) for _ in range(3)]
            await asyncio.sleep(0)  # the updates are under way when the stop begins
            stopping = asyncio.ensure_future(session.stop())
            after = [asyncio.ensure_future(_publish_later(session, k)) for k in range(12)]
            await asyncio.gather(*before, stopping, *after)
            listed = {s.node_id for s in await list_sessions(lister, TTL_S)}
            survivors += sorted(listed & {f"qn{i}"})
    finally:
        await lister.close()
        await bus.close()
    return survivors


def test_a_stopped_session_is_not_listed_even_with_updates_racing_its_stop(
    nats_server: EmbeddedNats,
) -> None:
    assert asyncio.run(_stop_amid_updates(nats_server.url, nats_server, rounds=20)) == []


async def _update_after_stop(url: str, nats: EmbeddedNats) -> list[str]:
    bus = await Bus(url, name="roles", credentials=nats.credentials).connect()
    try:
        session = await Session(bus, SessionInfo("datanode", "dn1"), TTL_S).start()
        assert [s.node_id for s in await list_sessions(bus, TTL_S)] == ["dn1"]
        await session.stop()
        await session.publish()  # a late update: nothing, and no error
        return [s.node_id for s in await list_sessions(bus, TTL_S)]
    finally:
        await bus.close()


def test_an_update_after_stop_puts_nothing_back(nats_server: EmbeddedNats) -> None:
    assert asyncio.run(_update_after_stop(nats_server.url, nats_server)) == []
