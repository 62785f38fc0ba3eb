"""Which failed role starts ``RoleHost`` tries again: a NATS request that timed out or
found no responder (a stream electing its leader after a server died), directly or as the
cause of a role's error; never a storage or settings error, which fails the start at once
(a missing bucket must not take a minute to report)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import nats.errors
import pytest
from nats.js.errors import NoStreamResponseError

from elanus.cli.host import start_may_succeed_again
from elanus.cli.roles import BACKOFF_FIRST_S, RESTARTED, Exited, keep_step
from elanus.errors import ElanusError, ErrorCode


def raised(
    outer: BaseException, cause: BaseException | None, *, suppress: bool = False
) -> BaseException:
    try:
        try:
            if cause is not None:
                raise cause
            raise outer
        except BaseException:
            if cause is None:
                raise
            if suppress:
                raise outer from None
            raise outer  # noqa: B904 - the implicit context is what is tested
    except BaseException as exc:  # noqa: BLE001
        return exc


@pytest.mark.parametrize(
    ("exc", "again"),
    [
        (nats.errors.TimeoutError(), True),
        (NoStreamResponseError(), True),
        (nats.errors.NoRespondersError(), True),
        (raised(ElanusError(ErrorCode.TIMEOUT, "nats: timeout"), nats.errors.TimeoutError()), True),
        (raised(RuntimeError("x"), NoStreamResponseError()), True),
        (ElanusError(ErrorCode.UNAVAILABLE, "bucket 'b' does not exist"), False),
        (raised(ElanusError(ErrorCode.UNAVAILABLE, "s3"), TimeoutError(), suppress=True), False),
        (ValueError("bad setting"), False),
    ],
)
def test_only_nats_failing_over_is_tried_again(exc: BaseException, again: bool) -> None:
    assert start_may_succeed_again(exc) is again


class _Proc:
    """What ``keep_step`` reads of a process: whether it exited, and its status."""

    def __init__(self) -> None:
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


@dataclass
class _Kept:
    proc: Any
    started: float = 0.0
    restarts: int = 0
    due: float | None = None


def test_keep_step_restarts_an_exited_process_after_its_backoff() -> None:
    """The restart rule ``cluster up`` and a standalone's serving processes share: an exit
    is seen once, the process starts again once its backoff is over (doubling while it
    keeps exiting soon after its start), and a running one is left alone."""
    launched: list[float] = []
    child = _Kept(_Proc(), started=100.0)

    def launch() -> None:
        launched.append(now)
        child.proc, child.started = _Proc(), now

    now = 101.0
    assert keep_step(child, now, launch) is None  # running
    child.proc.returncode = -9
    assert keep_step(child, now, launch) == Exited(-9, BACKOFF_FIRST_S)
    now += BACKOFF_FIRST_S / 2
    assert keep_step(child, now, launch) is None and launched == []  # waiting it out
    now += BACKOFF_FIRST_S
    assert keep_step(child, now, launch) == RESTARTED and launched == [now]
    assert child.restarts == 1 and child.due is None
    child.proc.returncode = 1  # exits again at once: the wait doubles
    assert keep_step(child, now + 1, launch) == Exited(1, 2 * BACKOFF_FIRST_S)
