"""Client side of uploads: a local file streamed into the server's import area (the DoPut
op ``upload`` of ``flight/uploads.py``), and which of a bulk import's files need it.

A server reads import files only inside its import roots. A path that exists on this
machine is a local file: a server on this machine (a loopback address) is first asked to
read it where it is; when it refuses (PATH_NOT_ALLOWED: outside its roots), or when the
server is elsewhere, the file is uploaded and the uploaded path imported instead. Any other
path is the server's own (relative: under its first import root) and is sent as is.
Imports only pyarrow and shared types.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.flight as flight

from elanus.errors import ElanusError, ErrorCode
from elanus.ops.replies import Uploaded
from elanus.settings import is_loopback_host
from elanus.wire.codec import encode_json, from_flight_error

CHUNK_BYTES = 4 << 20
"""Bytes per uploaded batch (one binary value each)."""
UPLOAD_SCHEMA = pa.schema([pa.field("chunk", pa.binary(), nullable=False)])

Entry = str | list[str]


def is_loopback(uri: str) -> bool:
    """Whether the server is on this machine (so it may see this machine's paths)."""
    parsed = urlparse(uri)
    if parsed.scheme.endswith("unix"):
        return True
    return is_loopback_host(parsed.hostname or "")


def local_files(entries: list[Entry]) -> dict[str, str]:
    """Each path of ``entries`` that is a file here, with its absolute path."""
    found = {}
    for entry in entries:
        for p in entry if isinstance(entry, list) else [entry]:
            if os.path.isfile(p):
                found[p] = os.path.abspath(p)
    return found


def replaced(entries: list[Entry], paths: dict[str, str]) -> list[Entry]:
    """``entries`` with each path that ``paths`` maps swapped for its value."""
    return [
        [paths.get(p, p) for p in e] if isinstance(e, list) else paths.get(e, e) for e in entries
    ]


def upload(
    conn: flight.FlightClient,
    options: flight.FlightCallOptions,
    command: dict[str, Any],
    path: str | os.PathLike[str],
) -> Uploaded:
    """Stream one local file to the server; ``{"upload_id", "path", "bytes"}``."""
    descriptor = flight.FlightDescriptor.for_command(
        encode_json({**command, "op": "upload", "name": Path(path).name})
    )
    try:
        writer, reader = conn.do_put(descriptor, UPLOAD_SCHEMA, options)
    except (flight.FlightError, pa.ArrowException) as exc:
        raise from_flight_error(exc) from None
    try:
        try:
            with open(path, "rb") as source:
                while data := source.read(CHUNK_BYTES):
                    column = pa.array([data], type=pa.binary())
                    writer.write_batch(pa.record_batch([column], schema=UPLOAD_SCHEMA))
            writer.done_writing()
            answer = reader.read()
        finally:
            writer.close()
    except (flight.FlightError, pa.ArrowException) as exc:
        raise from_flight_error(exc) from None
    except OSError as exc:
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT, f"cannot read {os.fspath(path)!r}: {exc.strerror}"
        ) from None
    if answer is None:
        raise ElanusError(ErrorCode.INTERNAL, "the server did not say where the upload went")
    uploaded: Uploaded = json.loads(answer.to_pybytes())
    return uploaded


def import_with_uploads(
    entries: list[Entry],
    start: Callable[[list[Entry]], int],
    send: Callable[[str], str],
    *,
    upload_mode: bool | None,
    loopback: bool,
) -> int:
    """Start the import (``start``), uploading local files (``send``: local path → server
    path) as ``upload_mode`` says: True always, False never, None when needed."""
    local = local_files(entries) if upload_mode is not False else {}
    if not local:
        return start(entries)
    if upload_mode is None and loopback:
        try:
            return start(replaced(entries, local))
        except ElanusError as exc:
            if exc.code != ErrorCode.PATH_NOT_ALLOWED:
                raise
    uploaded = {given: send(absolute) for given, absolute in local.items()}
    return start(replaced(entries, uploaded))
