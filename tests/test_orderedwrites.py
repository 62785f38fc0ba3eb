"""Writes to several segments at once, each segment's in order (datanode/orderedwrites.py)."""

from __future__ import annotations

import threading
import time

import pytest

from elanus.segments.datanode.orderedwrites import OrderedWrites


def test_a_keys_writes_run_in_order_and_other_keys_meanwhile() -> None:
    done: list[tuple[str, int]] = []
    running: set[str] = set()
    overlapped = threading.Event()
    lock = threading.Lock()

    def write(key: str, i: int) -> None:
        with lock:
            assert key not in running, "two writes of one key at once"
            running.add(key)
            if len(running) > 1:
                overlapped.set()
        time.sleep(0.02)
        with lock:
            running.discard(key)
            done.append((key, i))

    with OrderedWrites(threads=2) as writes:
        for i in range(5):
            for key in ("a", "b"):
                writes.submit(key, write, key, i)
    assert len(done) == 10
    for key in ("a", "b"):
        assert [i for k, i in done if k == key] == list(range(5))
    assert overlapped.is_set(), "the two keys' writes never ran at the same time"


def test_a_failed_write_is_raised_and_every_started_one_waited_for() -> None:
    finished: list[int] = []

    def slow(i: int) -> None:
        time.sleep(0.05)
        finished.append(i)

    def fail() -> None:
        raise OSError("disk full")

    writes = OrderedWrites(threads=2)
    writes.submit("a", fail)
    writes.submit("b", slow, 1)
    with pytest.raises(OSError, match="disk full"):
        writes.close()
    assert finished == [1]  # close returned only after the other write ended


def test_an_error_on_its_way_out_is_not_replaced_by_a_writes_failure() -> None:
    def fail() -> None:
        raise OSError("disk full")

    with pytest.raises(ValueError, match="the caller's"), OrderedWrites(threads=1) as writes:
        writes.submit("a", fail)
        raise ValueError("the caller's")
