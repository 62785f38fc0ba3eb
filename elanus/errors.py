"""Stable error codes shared by every role, the Flight protocol and the SDK.

An error crosses process boundaries as ``{"code": ..., "message": ...}``; over Flight the
message text is prefixed with ``[CODE]`` so clients in any language can read the code
without parsing extra metadata.
"""

from __future__ import annotations

import enum
import re
from typing import Any


class ErrorCode(enum.StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    SCHEMA_MISMATCH = "SCHEMA_MISMATCH"
    PATH_NOT_ALLOWED = "PATH_NOT_ALLOWED"
    """A path names no regular file inside the import roots (docs/security.md)."""
    COLLECTION_NOT_FOUND = "COLLECTION_NOT_FOUND"
    COLLECTION_ALREADY_EXISTS = "COLLECTION_ALREADY_EXISTS"
    ALIAS_NOT_FOUND = "ALIAS_NOT_FOUND"
    ALIAS_ALREADY_EXISTS = "ALIAS_ALREADY_EXISTS"
    """The name is an alias already (of another collection, for ``create_alias``)."""
    PARTITION_NOT_FOUND = "PARTITION_NOT_FOUND"
    PARTITION_ALREADY_EXISTS = "PARTITION_ALREADY_EXISTS"
    DATABASE_NOT_FOUND = "DATABASE_NOT_FOUND"
    INDEX_NOT_FOUND = "INDEX_NOT_FOUND"
    INDEX_ALREADY_EXISTS = "INDEX_ALREADY_EXISTS"
    SEGMENT_NOT_FOUND = "SEGMENT_NOT_FOUND"
    COMPACTION_NOT_FOUND = "COMPACTION_NOT_FOUND"
    IMPORT_JOB_NOT_FOUND = "IMPORT_JOB_NOT_FOUND"
    SNAPSHOT_NOT_FOUND = "SNAPSHOT_NOT_FOUND"
    """No live snapshot of that name in the collection, or no pin of that id."""
    COLLECTION_NOT_LOADED = "COLLECTION_NOT_LOADED"
    BAD_EXPRESSION = "BAD_EXPRESSION"
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    COLLECTION_LIMIT_EXCEEDED = "COLLECTION_LIMIT_EXCEEDED"
    """The database holds its ``database.max.collections`` already (Milvus's code 102)."""
    RATE_LIMITED = "RATE_LIMITED"
    FORCE_DENIED = "FORCE_DENIED"
    """The database's ``database.force.deny.writing`` / ``.reading`` refuses the request
    (Milvus's quota error); retrying does not help until the property is dropped."""
    UNKNOWN_ACTION = "UNKNOWN_ACTION"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    USER_NOT_FOUND = "USER_NOT_FOUND"
    USER_ALREADY_EXISTS = "USER_ALREADY_EXISTS"
    ROLE_NOT_FOUND = "ROLE_NOT_FOUND"
    ROLE_ALREADY_EXISTS = "ROLE_ALREADY_EXISTS"
    TIMEOUT = "TIMEOUT"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"


RETRYABLE = frozenset({ErrorCode.RATE_LIMITED, ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT})
"""Codes after which the same request may succeed if sent again later (a DDL that timed
out may have happened: check before repeating it)."""


class ElanusError(Exception):
    """An error with a stable code and a message that names the problem."""

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        self.code = ErrorCode(code) if code in ErrorCode.__members__ else code
        self.message = message
        super().__init__(f"[{self.code}] {message}")

    @property
    def retryable(self) -> bool:
        """Whether sending the same request again later may succeed (``RETRYABLE``)."""
        return self.code in RETRYABLE

    def to_dict(self) -> dict[str, str]:
        return {"code": str(self.code), "message": self.message}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ElanusError:
        return cls(d.get("code", ErrorCode.INTERNAL), str(d.get("message", "")))


COORD_LAPSED = "the coordinator's lease is "
"""How a coord that lost its lease (NATS electing or restarting) answers: it is alive and
counts no peer's silence until it serves again (``meta/lease.py``)."""


def coord_lapsed(state: str) -> ElanusError:
    return ElanusError(
        ErrorCode.UNAVAILABLE, f"{COORD_LAPSED}{state} (NATS away or restarting); retry"
    )


def is_coord_lapse(exc: ElanusError) -> bool:
    return exc.code == ErrorCode.UNAVAILABLE and exc.message.startswith(COORD_LAPSED)


def invalid(message: str) -> ElanusError:
    return ElanusError(ErrorCode.INVALID_ARGUMENT, message)


_PREFIX = re.compile(r"^(?:[A-Za-z ]{1,40}: )?\[([A-Z_]+)\]\s*(.*)$", re.S)


def parse_prefixed(text: str) -> tuple[str, str] | None:
    """Split ``"[CODE] message"`` (as carried in a Flight error) into its parts; a status
    name in front (pyarrow's ``"Unknown error: "``, as GetSchema errors read) is skipped."""
    m = _PREFIX.match(text.strip())
    if not m:
        return None
    msg = m.group(2)
    # pyarrow appends ". Detail: ..." to server-side messages; drop it.
    cut = msg.find(". Detail: ")
    if cut >= 0:
        msg = msg[:cut]
    return m.group(1), msg
