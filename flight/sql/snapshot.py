"""The one timestamp a SQL statement reads every collection at.

Explicit: ``AT (VERSION => <hybrid ts>)`` or ``AT (TIMESTAMP => <time>)`` after a table
(DuckDB's own time-travel clause; every clause of a statement must name the same moment),
or the ``elanus-as-of`` header; inside the time-travel retention and already handed out,
as ``as_of`` is for ``query``.

Otherwise a consistency level picks it, the ``elanus-consistency-level`` header's, else
the strictest of the statement's collections' levels: ``Strong`` a fresh TSO timestamp
(every write acknowledged before the statement is in), ``Bounded`` and ``Eventually``
``bounded_staleness_ms`` behind the clock (no wait for the newest writes). ``Session``
reads as ``Strong``: a SQL connection carries no session of writes to wait for, and
``Strong`` sees everything ``Session`` would.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from elanus import tsutil
from elanus.consistency import ConsistencyLevel
from elanus.errors import invalid
from elanus.flight.metacache import CollectionInfo
from elanus.flight.sql.options import SqlOptions
from elanus.flight.sql.statement import Parser, Statement
from elanus.ops.reads import ReadOptions

if TYPE_CHECKING:
    from elanus.flight.search import QueryService
    from elanus.settings import Settings

STRICTNESS = (
    ConsistencyLevel.EVENTUALLY,
    ConsistencyLevel.BOUNDED,
    ConsistencyLevel.SESSION,
    ConsistencyLevel.STRONG,
)


def explicit(
    parser: Parser, st: Statement, params: dict[str, Any] | None, options: SqlOptions
) -> int:
    """The statement's explicit snapshot (0: none), its clauses checked for agreement."""
    moments = {options.as_of} if options.as_of else set()
    for unit, expr in st.snapshots:
        value = parser.evaluate(expr, params)
        if unit == "VERSION":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise invalid("AT (VERSION => ...) takes a hybrid timestamp: a positive integer")
            moments.add(value)
        elif unit == "TIMESTAMP":
            if not isinstance(value, datetime.datetime):
                raise invalid(
                    "AT (TIMESTAMP => ...) takes a timestamp, e.g. now() - INTERVAL 1 MINUTE"
                )
            if value.tzinfo is None:  # DuckDB's TIMESTAMP is UTC
                value = value.replace(tzinfo=datetime.UTC)
            moments.add(tsutil.compose(int(value.timestamp() * 1000)))
        else:
            raise invalid(f"AT ({unit} => ...) is not supported: use VERSION or TIMESTAMP")
    if len(moments) > 1:
        raise invalid(
            "a statement reads every collection at one timestamp: its AT clauses (and the "
            "elanus-as-of header) name different ones"
        )
    return moments.pop() if moments else 0


def choose(
    query: QueryService,
    settings: Settings,
    infos: list[CollectionInfo],
    at: int,
    options: SqlOptions,
) -> int:
    """The statement's snapshot timestamp (``at``: its explicit one, or 0)."""
    if at:
        # as ``as_of`` is checked for a query: handed out, inside the retention window
        for info in infos[:1]:
            query.times.read_at(info, ReadOptions(as_of=at))
        return at
    if not infos:
        return 0
    level = options.consistency_level or max(
        (ConsistencyLevel.parse(i.consistency_level) for i in infos), key=STRICTNESS.index
    )
    if level in (ConsistencyLevel.STRONG, ConsistencyLevel.SESSION):
        return query.times.strong_ts()  # a tick past it now, not an interval later
    return tsutil.compose(tsutil.now_ms() - settings.bounded_staleness_ms)
