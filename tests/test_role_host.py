"""Which failed role starts ``RoleHost`` tries again: a NATS request that timed out or
found no responder (a stream electing its leader after a server died), directly or as the
cause of a role's error; never a storage or settings error, which fails the start at once
(a missing bucket must not take a minute to report)."""

from __future__ import annotations

import nats.errors
import pytest
from nats.js.errors import NoStreamResponseError

from elanus.cli.host import start_may_succeed_again
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
