"""Sending a write again after the proxy's flow control refused it (RATE_LIMITED), or the
coordinator could not give it a timestamp (its lease lapsed: a NATS election, a standby
taking over).

A RATE_LIMITED write did nothing (docs/protocol.md), so sending it again is always safe.
So did a write refused for a lapsed lease, when it was one request (an atomic insert, a
delete): its timestamp comes before anything of it reaches the log. A write streamed in
several requests is not sent again for a lapse, as a later batch may meet it after an
earlier one was written.
The waits grow exponentially from ``FIRST_WAIT_S`` to ``MAX_WAIT_S``, each with jitter
(half fixed, half random) so that many writers refused at once do not all come back at
once, until the client's ``retry_deadline_s`` has passed since the first attempt; the
last refusal is then raised, saying how long the client tried.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from elanus.errors import ElanusError, ErrorCode, is_coord_lapse

T = TypeVar("T")

FIRST_WAIT_S = 0.05
MAX_WAIT_S = 2.0
OnWait = Callable[[ElanusError, float], None]
"""Told of each refusal and the seconds the client waits before the next attempt."""


def backoff(attempt: int, rng: Callable[[], float] = random.random) -> float:
    """The wait after the ``attempt``-th refusal (0-based): half of the exponential step
    fixed, the other half random."""
    step = min(MAX_WAIT_S, FIRST_WAIT_S * 2**attempt)
    return step / 2 + step / 2 * rng()


def retrying(
    call: Callable[[], T],
    deadline_s: float,
    on_wait: OnWait | None = None,
    *,
    one_request: bool = False,
) -> T:
    """``call()``, again after each RATE_LIMITED until ``deadline_s`` (0: no retry); and
    after a lapsed coordinator lease if the write is ``one_request``."""
    started = time.monotonic()
    attempt = 0
    while True:
        try:
            return call()
        except ElanusError as exc:
            lapse = one_request and is_coord_lapse(exc)
            if exc.code != ErrorCode.RATE_LIMITED and not lapse:
                raise
            left = deadline_s - (time.monotonic() - started)
            if left <= 0:
                if deadline_s <= 0:
                    raise
                raise ElanusError(
                    exc.code,
                    f"{exc.message} (the client retried for {deadline_s:g} s: retry_deadline_s)",
                ) from None
            wait = min(left, backoff(attempt))
            if on_wait is not None:
                on_wait(exc, wait)
            time.sleep(wait)
            attempt += 1
