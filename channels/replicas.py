"""Streams and KV buckets at ``stream_replicas`` copies: the log's replication is JetStream's.

Every stream or bucket Elanus creates goes through ``ensure_stream``: it creates it with
the wanted replica count, raises an existing one that has fewer (JetStream copies the data
to the new peers itself), and never lowers one. A server that cannot hold that many copies
(a single server, or a cluster with too few live peers) answers with an error that names
the setting rather than JetStream's own words alone.
"""

from __future__ import annotations

import logging

from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import APIError, NotFoundError

from elanus.errors import ElanusError, ErrorCode

log = logging.getLogger(__name__)


async def ensure_stream(js: JetStreamContext, config: StreamConfig) -> None:
    """Create ``config``'s stream, or raise the replicas of the existing one to its own."""
    assert config.name is not None
    wanted = config.num_replicas or 1
    try:
        info = await js.stream_info(config.name)
    except NotFoundError:
        try:
            await js.add_stream(config)
        except APIError as exc:
            if exc.err_code == 10058:  # stream name already in use: another process won
                return
            raise replica_error(config.name, wanted, exc) from None
        return
    await raise_replicas(js, config.name, wanted, info.config)


async def raise_replicas(
    js: JetStreamContext, name: str, wanted: int, config: StreamConfig | None = None
) -> None:
    """Give stream ``name`` (a KV bucket's is ``KV_<bucket>``) ``wanted`` replicas if it
    has fewer; ``config`` is its current one, when the caller just read it."""
    if config is None:
        config = (await js.stream_info(name)).config
    have = config.num_replicas or 1
    if have >= wanted:
        return
    log.warning("raising stream %s from %d to %d replicas", name, have, wanted)
    config.num_replicas = wanted
    try:
        await js.update_stream(config)
    except APIError as exc:
        raise replica_error(name, wanted, exc) from None


def replica_error(name: str, wanted: int, exc: APIError) -> ElanusError:
    hint = ""
    text = str(exc.description or exc).lower()
    if wanted > 1 and ("non-clustered" in text or "insufficient resources" in text):
        hint = (
            f": the NATS server(s) cannot hold {wanted} copies; run a JetStream cluster "
            f"of at least {wanted} servers or lower the setting stream_replicas"
        )
    return ElanusError(
        ErrorCode.UNAVAILABLE,
        f"cannot create stream {name} with stream_replicas={wanted}{hint} "
        f"(JetStream: {exc.description or exc})",
    )
