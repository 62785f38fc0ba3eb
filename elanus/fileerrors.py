"""Error messages about import files that never carry the files' bytes.

A server that quotes what it read turns every import into a way to read files: pyarrow's
CSV and JSON errors quote the offending row, numpy's quote a bad header, and the insert
checks (``elanus.validation``) quote values and unknown column names, which in a CSV file
are its first line. So a failure while reading a file becomes a message that names the
file, the row or column when the reader said which (numbers only), and the kind of problem
(``reader_failure``), and a check's message has every quoted text that is not a schema
field replaced (``without_file_text``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from elanus.errors import ElanusError, ErrorCode, invalid

HIDDEN = "<text from the file>"

_KINDS: tuple[tuple[str, str], ...] = (
    ("magic bytes", "it is not a Parquet file (or it is damaged)"),
    ("parquet", "it is not a readable Parquet file"),
    ("empty csv", "it is empty"),
    ("invalid utf8", "it holds text that is not valid UTF-8"),
    ("utf-8", "it holds text that is not valid UTF-8"),
    ("changed from", "one key holds values of different types"),
    ("json parse", "a line is not a JSON object"),
    ("csv parse", "a row cannot be parsed as CSV"),
    ("conversion error", "a value cannot be read as its column's type"),
    ("pickled", "it holds pickled objects, which are never loaded"),
    ("magic string", "it is not a .npy file"),
    ("header", "its header cannot be read"),
    ("decompress", "it cannot be decompressed"),
    ("gzip", "it cannot be decompressed"),
    ("ipc", "it is not an Arrow IPC file"),
    ("flatbuffer", "it is not an Arrow IPC file"),
)


def reader_failure(path: str | Path, exc: BaseException, what: str = "") -> ElanusError:
    """A reader's exception as INVALID_ARGUMENT naming the file and the kind of problem."""
    name = Path(path).name
    if isinstance(exc, ElanusError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return invalid(f"{name}: no such file")
    if isinstance(exc, PermissionError):
        return invalid(f"{name}: the server may not read it")
    if isinstance(exc, IsADirectoryError):
        return invalid(f"{name}: it is a directory")
    text = str(exc)
    low = text.lower()
    kind = next((k for key, k in _KINDS if key in low), "")
    if not kind:
        kind = f"it cannot be read{' as ' + what if what else ''}"
    columns = re.search(r"expected (\d+) columns, got (\d+)", low)
    if columns:
        kind = f"a row has {columns.group(2)} columns where the header has {columns.group(1)}"
    conversion = re.search(r"conversion error to (\w+)", low)
    if conversion:
        kind = f"a value cannot be read as {conversion.group(1)}"
    where = []
    column = re.search(r"column #(\d+)", low)
    if column:
        where.append(f"column #{column.group(1)}")
    row = re.search(r"\brow #?(\d+)", low)
    if row:
        where.append(f"row {row.group(1)}")
    at = f" ({', '.join(where)})" if where else ""
    return invalid(f"{name}: {kind}{at}")


_QUOTED = re.compile(
    r"""(?:'(?:[^'\\\n]|\\.)*(?:'|\.\.\.)|"(?:[^"\\\n]|\\.)*(?:"|\.\.\.))"""
    r"""(?:\.[^\s,;:()]+|\[\])*"""
)
"""A quoted text (also one a preview cut short with ``...``), with any ``.key`` path after."""
_DETAIL = re.compile(r"(cannot convert the values|is not JSON|cannot be stored as JSON): .*$")
"""Where a message goes on with a library's own text, which may quote values."""
_VALUE = re.compile(r"\bvalue -?(?:\d[\d.]*(?:e[+-]?\d+)?|nan|inf)\b", re.I)


def without_file_text(err: ElanusError, names: Iterable[str]) -> ElanusError:
    """``err`` with every quoted text except ``names`` (the schema's fields), every nested
    type description (``struct<...>`` names a file's keys) and every ``value N`` left out."""
    keep = {repr(n) for n in names} | {f'"{n}"' for n in names}

    def quoted(m: re.Match[str]) -> str:
        return m.group(0) if m.group(0) in keep else HIDDEN

    message = _DETAIL.sub(r"\1", err.message)
    message = _QUOTED.sub(quoted, message)
    message = _strip_angles(message)
    message = _VALUE.sub("value", message)
    return ElanusError(err.code, message)


def _strip_angles(text: str) -> str:
    """``struct<a: int64, b: list<item: string>>`` → ``struct<…>`` (only a ``<`` right after
    a word opens a type's parameters)."""
    out: list[str] = []
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<" and (depth or (i and (text[i - 1].isalnum() or text[i - 1] == "_"))):
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def unknown_columns(name: str, columns: list[str], fields: Iterable[str]) -> ElanusError | None:
    """A file with columns that are not schema fields (dynamic fields off), named by their
    position only: a CSV header is the file's first line."""
    known = set(fields)
    positions = [i for i, c in enumerate(columns) if c not in known]
    if not positions:
        return None
    listed = ", ".join(f"#{i}" for i in positions[:10]) + (" …" if len(positions) > 10 else "")
    return ElanusError(
        ErrorCode.SCHEMA_MISMATCH,
        f"{name}: column(s) {listed} (counted from 0) are not fields of the collection schema "
        "(dynamic fields are disabled); name the file's columns after the schema's fields",
    )
