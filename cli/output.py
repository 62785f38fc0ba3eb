"""How the CLI talks back: Rich for people, plain JSON for scripts, one line for errors.

Errors go through ``error_line`` so that every failure, whatever raised it, reads
``error: [CODE] message`` on one stderr line that scripts can match.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow.flight as flight
from rich import box
from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from elanus.errors import ElanusError, ErrorCode, parse_prefixed

T = TypeVar("T")
PLAIN_WIDTH = 1 << 16
"""The width of plain output: wider than any row, so none is cut (nothing is padded to it)."""

console = Console(soft_wrap=False, highlight=False)
PLAIN = not console.is_terminal
"""Output into a pipe or a file: tables without borders or colour, at their full width.
Without a terminal Rich would take 80 columns (or ``$COLUMNS``) and cut the cells."""
if PLAIN:
    console = Console(soft_wrap=False, highlight=False, width=PLAIN_WIDTH, no_color=True)


def emit(data: T, render: Callable[[T], RenderableType | None], as_json: bool) -> None:
    """Print ``data`` as JSON for scripts, or what ``render`` makes of it for people."""
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=False, default=str))
        return
    shown = render(data)
    if shown is not None:
        console.print(shown)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> Table:
    t = Table(
        *columns,
        title=title,
        title_justify="left",
        min_width=len(title or ""),
        box=None if PLAIN else box.HEAVY_HEAD,
    )
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    return t


def kv_table(values: Mapping[str, Any], title: str | None = None) -> Table:
    t = Table(show_header=False, title=title, title_justify="left", box=None, padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    for key, value in values.items():
        t.add_row(key, _plain(value))
    return t


def _plain(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    return str(value)


def duration(seconds: float | None) -> str:
    """``93784`` → ``1d 2h 3m``: uptimes people can read at a glance."""
    if seconds is None:
        return "-"
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {s}s"
    return f"{seconds:.1f}s"


def error_parts(exc: BaseException) -> tuple[str, str]:
    """The stable code and the message of any error the CLI may meet."""
    if isinstance(exc, ElanusError):
        return str(exc.code), exc.message
    text = str(exc)
    parsed = parse_prefixed(text)
    if parsed is not None:
        return parsed
    if isinstance(exc, flight.FlightUnavailableError):
        return str(ErrorCode.UNAVAILABLE), text
    if isinstance(exc, flight.FlightTimedOutError):
        return str(ErrorCode.TIMEOUT), text
    if isinstance(exc, ConnectionError | TimeoutError):
        code = ErrorCode.TIMEOUT if isinstance(exc, TimeoutError) else ErrorCode.UNAVAILABLE
        return str(code), text or type(exc).__name__
    return str(ErrorCode.INTERNAL), f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_line(code: str, message: str) -> str:
    one_line = " ".join(message.split())
    return f"error: [{code}] {one_line}"


def print_error(code: str, message: str) -> None:
    sys.stdout.flush()
    print(error_line(code, message), file=sys.stderr, flush=True)


def stderr_progress(quiet: bool, *columns: Any) -> Progress:
    """A progress bar on stderr (stdout stays clean for ``--json``); shown on terminals only."""
    err = Console(stderr=True, highlight=False)
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        *columns,
        TimeElapsedColumn(),
        console=err,
        transient=quiet,
        disable=not err.is_terminal,
    )
