"""The proxy's request limits, in the manner of Milvus's quotas (docs/security.md).

- **Size**: a DoAction body, DoGet ticket, or DoPut / DoExchange / GetFlightInfo /
  GetSchema command larger than ``max_action_bytes`` is refused with REQUEST_TOO_LARGE
  from its length alone, before a byte of it is parsed.
- **Streams**: a DoPut stream may carry at most ``max_put_batches`` messages and
  ``max_put_bytes`` bytes (``PutBudget``); past either it fails with REQUEST_TOO_LARGE.
- **Rates**: per user, DML and DQL requests pass through token buckets of
  ``dml_rate_per_user`` / ``dql_rate_per_user`` requests per second that hold one
  second's worth (the burst); an empty bucket refuses the request with RATE_LIMITED
  before it does anything. 0 turns a rate off.

Flight calls run on many threads at once; the limiter takes one lock for a few
arithmetic steps per request.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.flight as flight

from elanus.errors import ElanusError, ErrorCode
from elanus.settings import Settings


class Kind(enum.StrEnum):
    """The two request classes with a rate of their own (Milvus's DML and DQL quotas).
    Each DoAction declares its own (``rate`` in ``flight/actions.py``; DDL, state polls
    and index coordination count against none); every DoPut is DML, every DoGet,
    DoExchange and GetFlightInfo DQL."""

    DML = "DML"
    DQL = "DQL"


MAX_BUCKETS = 10_000
"""Buckets kept before full ones (users idle for a second or more) are forgotten."""


def _mib(n: int) -> str:
    return f"{n} bytes ({n / (1 << 20):.1f} MiB)" if n >= 1 << 20 else f"{n} bytes"


class _Bucket:
    __slots__ = ("stamp", "tokens")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp


class RateLimiter:
    """Token buckets keyed by (kind, user); thread-safe."""

    def __init__(
        self, rates: dict[Kind, float], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rates = {kind: float(rate) for kind, rate in rates.items() if rate > 0}
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[Kind, str], _Bucket] = {}

    def rate(self, kind: Kind) -> float:
        """Requests per second allowed for ``kind`` (0: unlimited)."""
        return self._rates.get(kind, 0.0)

    def take(self, user: str, kind: Kind) -> None:
        """Spend one request of ``user``'s ``kind`` bucket, or raise RATE_LIMITED."""
        rate = self._rates.get(kind)
        if rate is None:
            return
        burst = max(rate, 1.0)
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get((kind, user))
            if bucket is None:
                if len(self._buckets) >= MAX_BUCKETS:
                    self._forget_idle(now)
                bucket = self._buckets[(kind, user)] = _Bucket(burst, now)
            else:
                bucket.tokens = min(burst, bucket.tokens + (now - bucket.stamp) * rate)
                bucket.stamp = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return
            wait = (1.0 - bucket.tokens) / rate
        setting = "dml_rate_per_user" if kind is Kind.DML else "dql_rate_per_user"
        raise ElanusError(
            ErrorCode.RATE_LIMITED,
            f"user {user!r} is over the {kind} rate limit of {rate:g} requests/s "
            f"(setting {setting}); nothing was done: retry in {wait:.2f} s",
        )

    def _forget_idle(self, now: float) -> None:
        """Drop the buckets that have refilled: forgetting them changes no answer."""
        for key, bucket in list(self._buckets.items()):
            rate = self._rates[key[0]]
            if bucket.tokens + (now - bucket.stamp) * rate >= max(rate, 1.0):
                del self._buckets[key]


FLIGHT_ADVICE = "send large data as a DoPut or DoExchange stream"
"""What a Flight client over ``max_action_bytes`` is told to do instead."""
SMALLER_ADVICE = "send it in smaller requests (fewer rows or query vectors each)"
"""The same for a Milvus client, which has no streams."""


class Limits:
    """Every limit a proxy applies to incoming calls, from its settings."""

    def __init__(self, settings: Settings) -> None:
        self.max_action_bytes = settings.max_action_bytes
        self.max_put_bytes = settings.max_put_bytes
        self.max_put_batches = settings.max_put_batches
        self.rates = RateLimiter(
            {Kind.DML: settings.dml_rate_per_user, Kind.DQL: settings.dql_rate_per_user}
        )

    def check_size(self, size: int, what: str, advice: str = FLIGHT_ADVICE) -> None:
        """REQUEST_TOO_LARGE for a body, ticket or command over ``max_action_bytes``;
        ``advice`` says what to do in the words of the caller's protocol."""
        if size > self.max_action_bytes > 0:
            raise ElanusError(
                ErrorCode.REQUEST_TOO_LARGE,
                f"{what} is {_mib(size)}; the limit is {_mib(self.max_action_bytes)} "
                f"(setting max_action_bytes): {advice}",
            )

    def admit(
        self, user: str, kind: Kind | None, size: int, what: str, advice: str = FLIGHT_ADVICE
    ) -> None:
        """The checks at the door of every call: its size, then the user's rate."""
        self.check_size(size, what, advice)
        if kind is not None:
            self.rates.take(user, kind)

    def put_budget(self, mode: str) -> PutBudget:
        return PutBudget(self.max_put_bytes, self.max_put_batches, mode)


class PutBudget:
    """Counts the messages and bytes of one DoPut stream and ends it past a cap.

    ``mode`` says what a refusal leaves behind: ``atomic`` streams write nothing (every
    batch is checked before any is published), ``stream`` (non-atomic) and ``staged``
    streams keep the batches handled before the one over the cap. Those were written (or
    staged) and acknowledged before the next batch was read, so the budget knows them as
    the batches it handed out.
    """

    def __init__(self, max_bytes: int, max_batches: int, mode: str) -> None:
        self.max_bytes = max_bytes
        self.max_batches = max_batches
        self.mode = mode
        self.messages = 0
        self.nbytes = 0
        self.handed_batches = 0
        self.handed_rows = 0

    def batches(self, reader: Iterable[flight.FlightStreamChunk]) -> Iterator[pa.RecordBatch]:
        """The stream's non-empty batches; every message (empty ones and metadata-only
        ones too) counts against the caps."""
        for chunk in reader:
            data, meta = chunk.data, chunk.app_metadata
            self.messages += 1
            self.nbytes += (data.nbytes if data is not None else 0) + (
                meta.size if meta is not None else 0
            )
            if self.max_batches > 0 and self.messages > self.max_batches:
                raise self._refusal(f"more than {self.max_batches} messages (max_put_batches)")
            if self.max_bytes > 0 and self.nbytes > self.max_bytes:
                raise self._refusal(
                    f"at least {_mib(self.nbytes)}, over the limit of {_mib(self.max_bytes)} "
                    "(max_put_bytes)"
                )
            if data is not None and data.num_rows:
                self.handed_batches += 1
                self.handed_rows += data.num_rows
                yield data

    def _refusal(self, over: str) -> ElanusError:
        done = f"{self.handed_batches} batches ({self.handed_rows} rows)"
        if self.mode == "atomic":
            left = "nothing was written"
        elif self.mode == "staged":
            left = f"the {done} before it were staged and stay so until commit_write or abort_write"
        else:
            left = f"the {done} before it were written and acknowledged, and stay written"
        advice = "send the rest in another" if self.mode != "atomic" else "send smaller streams"
        return ElanusError(
            ErrorCode.REQUEST_TOO_LARGE, f"DoPut stream refused: {over}; {left}: {advice}"
        )
