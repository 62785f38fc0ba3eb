"""A JetStream publish that rides out a server's death and a stream leader's election.

When a server of a NATS cluster dies, the connection moves to another within a fraction of
a second, but what was in flight on the dead socket is never acknowledged; when the dead
server led a stream, the stream has no leader until the others elect one (nats-server's
Raft waits 4-9 s for a lost leader before it campaigns) and every publish to it meets "no
responders" meanwhile. ``publish_acked`` sends again, with a short timeout per attempt,
until its window (the ``log_retry_window_s`` setting) is over: long enough for an
election, short enough that a cluster which lost its quorum answers with a clear
UNAVAILABLE, never a hang. Retries of DML messages are safe: each carries a
``Nats-Msg-Id`` the stream dedupes.
"""

from __future__ import annotations

import asyncio
import time

import nats
from nats.js import JetStreamContext
from nats.js.api import PubAck
from nats.js.errors import APIError, NoStreamResponseError, ServiceUnavailableError

from elanus.errors import ElanusError, ErrorCode
from elanus.settings import Settings

LOG_RETRY_WINDOW_S = Settings.log_retry_window_s
"""How long a publish keeps trying by default: one Raft election (at most 9 s) and its
aftermath."""
ATTEMPT_TIMEOUT_S = 2.0
"""How long one attempt waits for its acknowledgement before sending again."""
TRANSIENT = (
    NoStreamResponseError,  # no leader (an election), or the connection is moving
    ServiceUnavailableError,  # JetStream answered 503: its metadata has no leader
    nats.errors.NoRespondersError,
    nats.errors.TimeoutError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.OutboundBufferLimitError,
    TimeoutError,
)


DUPLICATE_IN_PROCESS = 10158
"""JetStream's "duplicate message id is in process": the first send of this message (same
``Nats-Msg-Id``) is still being stored; the next attempt gets its acknowledgement."""


def is_transient(exc: BaseException) -> bool:
    """Whether a failed publish may succeed when sent again (no stream refused it)."""
    if isinstance(exc, APIError) and exc.err_code == DUPLICATE_IN_PROCESS:
        return True
    return isinstance(exc, TRANSIENT)


async def publish_acked(
    js: JetStreamContext,
    subject: str,
    payload: bytes,
    headers: dict[str, str] | None = None,
    *,
    window: float = LOG_RETRY_WINDOW_S,
    what: str | None = None,
) -> PubAck:
    """``js.publish`` until acknowledged; UNAVAILABLE, naming ``what`` (default: the
    subject) and the cause, once ``window`` is over. A refusal by the stream itself (an
    ``APIError``) is raised at once."""
    deadline = time.monotonic() + window
    pause = 0.05
    while True:
        left = deadline - time.monotonic()
        try:
            return await js.publish(
                subject, payload, headers=headers, timeout=max(0.1, min(ATTEMPT_TIMEOUT_S, left))
            )
        except Exception as exc:
            if not is_transient(exc):
                raise
            if time.monotonic() + pause >= deadline:
                raise log_unavailable(what or subject, window, exc) from None
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)


def log_unavailable(what: str, window: float, exc: BaseException) -> ElanusError:
    """The error of a write the log did not take in time: most likely a NATS cluster
    without a quorum (a majority of its servers down), or no NATS server at all."""
    return ElanusError(
        ErrorCode.UNAVAILABLE,
        f"the log (NATS JetStream) did not accept {what} within {window:g}s: "
        f"{type(exc).__name__} {exc}. {QUORUM_HINT}",
    )


QUORUM_HINT = (
    "Is a majority of the NATS servers up (a stream at stream_replicas=R needs R//2+1 of its "
    "servers)?"
)
