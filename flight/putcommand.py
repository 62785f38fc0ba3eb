"""The command of a DoPut (insert, upsert, upload): checked before a batch is read.

Not an action: the proxy's ``do_put`` reads it from the descriptor, so it lives below the
action registry's executors."""

from __future__ import annotations

from typing import Final, Literal, NotRequired, TypedDict

from elanus import layout
from elanus.errors import invalid
from elanus.flight.partial import check_field_ops
from elanus.flight.registry import check_db, check_named
from elanus.requests import Body
from elanus.schema import check_name
from elanus.wire.codec import decode_request

PUT_OPS = ("insert", "upsert")
UPLOAD_OP: Final = "upload"
"""A DoPut that carries a file into the server's import area (``flight/uploads.py``)."""


class PutCommand(TypedDict):
    """An insert or upsert: into ``collection`` (``partition``: one of its partitions),
    all batches or none (``atomic``), or staged under the write id ``stage``."""

    op: Literal["insert", "upsert"]
    atomic: bool
    db: str
    collection: str
    partition: str | None
    stage: str | None
    stage_part: NotRequired[str]
    """The staged write's part (``layout.DEFAULT_PART`` unless given), with ``stage``."""
    partial: dict[str, str] | None
    """A partial upsert's field operators (``flight/partial.py``), or None: whole rows."""


class UploadCommand(TypedDict):
    """A file, ``name``, into the import area for an import into ``collection``."""

    op: Literal["upload"]
    db: str
    collection: str
    name: str


def check_put(raw: bytes) -> PutCommand | UploadCommand:
    """The JSON command of a DoPut descriptor: op, collection, partition, db, atomic, and
    for a staged write (``flight/imports.py``) stage (the write id) and stage_part."""
    b = Body(decode_request(raw, "DoPut command"), "DoPut command")
    op = b.str("op", "insert")
    if op == UPLOAD_OP:
        return _check_upload(b)
    if op not in PUT_OPS:
        ops = ", ".join((*PUT_OPS, UPLOAD_OP))
        raise invalid(f"DoPut command: 'op' must be one of {ops}, not {op!r}")
    partition = b.str("partition", None)
    request: PutCommand = {
        "op": "upsert" if op == "upsert" else "insert",
        "atomic": b.bool("atomic", False),
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "partition": check_name(partition, "partition") if partition else None,
        "stage": None,
        "partial": _partial(b, op),
    }
    stage = b.str("stage", None)
    part = b.str("stage_part", None)
    if stage is not None:
        request["stage"] = layout.check_write_id(stage, "DoPut command: 'stage'")
        request["stage_part"] = layout.check_write_id(
            part or layout.DEFAULT_PART, "DoPut command: 'stage_part'"
        )
    elif part is not None:
        raise invalid("DoPut command: 'stage_part' needs 'stage'")
    if stage is not None and request["partial"] is not None:
        raise invalid("DoPut command: a staged write cannot be a partial upsert")
    b.done()
    return request


def _partial(b: Body, op: str) -> dict[str, str] | None:
    """A partial upsert's ``field_ops`` (``flight/partial.py``; empty: none), or None for
    whole rows. An array operator makes the upsert partial, as in Milvus."""
    ops = check_field_ops(b.dict("field_ops", {}), "DoPut command")
    partial = b.bool("partial_update", False) or bool(ops)
    if partial and op != "upsert":
        raise invalid("DoPut command: 'partial_update' and 'field_ops' are for op upsert")
    return ops if partial else None


def _check_upload(b: Body) -> UploadCommand:
    """``{"op": "upload", "collection", "name", "db"}``: the collection the file is for
    (it must exist; privileges are the import's) and the file's name (sanitised)."""
    request: UploadCommand = {
        "op": UPLOAD_OP,
        "db": check_db(b),
        "collection": check_named(b, "collection", "collection"),
        "name": b.str("name"),
    }
    b.done()
    return request
