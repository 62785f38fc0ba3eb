"""Reading ahead: a collection's next pages are fetched while DuckDB works on this one.

A scan alternates two kinds of work: the query node paging a segment (and the proxy
shaping the page), and DuckDB consuming it. One thread per scan does the first, up to
``depth`` pages ahead, so on two cores they overlap. The thread stops when the scan
ends, fails, or is abandoned (DuckDB closes its stream early for a ``LIMIT``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")
_END = object()
POLL_S = 0.1


def readahead(items: Iterator[T], depth: int = 2, name: str = "sql-readahead") -> Iterator[T]:
    """``items``, produced on a thread of their own at most ``depth`` ahead; an error
    there is raised here, in order."""
    ready: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_END)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put(exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=produce, name=name, daemon=True)
    worker.start()
    try:
        while True:
            item = ready.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
