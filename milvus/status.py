"""Elanus's error codes as Milvus's statuses, so pymilvus raises what it raises against
Milvus: ``code`` is Milvus's ``merr`` code (pymilvus's ``MilvusException.code``),
``error_code`` the legacy ``common_pb2.ErrorCode`` (its ``compatible_code``)."""

from __future__ import annotations

from pymilvus.grpc_gen import common_pb2

from elanus.errors import ElanusError, ErrorCode

UNEXPECTED = 65535
"""Milvus's ``ErrUndefined``: what its server answers for an error without a class."""
UNIMPLEMENTED = 10
"""Milvus's ``ErrServiceUnimplemented``."""

_CODES: dict[str, tuple[int, int]] = {
    # Elanus code: (Milvus merr code, legacy error_code)
    ErrorCode.INVALID_ARGUMENT: (1100, common_pb2.IllegalArgument),
    ErrorCode.SCHEMA_MISMATCH: (1100, common_pb2.IllegalArgument),
    ErrorCode.BAD_EXPRESSION: (1100, common_pb2.IllegalArgument),
    ErrorCode.PATH_NOT_ALLOWED: (1100, common_pb2.IllegalArgument),
    ErrorCode.UNKNOWN_ACTION: (1100, common_pb2.IllegalArgument),
    ErrorCode.COLLECTION_NOT_FOUND: (100, common_pb2.CollectionNotExists),
    ErrorCode.COLLECTION_NOT_LOADED: (101, common_pb2.UnexpectedError),
    ErrorCode.COLLECTION_ALREADY_EXISTS: (1, common_pb2.UnexpectedError),
    ErrorCode.PARTITION_NOT_FOUND: (200, common_pb2.UnexpectedError),
    ErrorCode.PARTITION_ALREADY_EXISTS: (1, common_pb2.UnexpectedError),
    ErrorCode.INDEX_NOT_FOUND: (700, common_pb2.IndexNotExist),
    ErrorCode.INDEX_ALREADY_EXISTS: (702, common_pb2.UnexpectedError),
    ErrorCode.SEGMENT_NOT_FOUND: (600, common_pb2.SegmentNotFound),
    ErrorCode.DATABASE_NOT_FOUND: (800, common_pb2.UnexpectedError),
    ErrorCode.ALIAS_NOT_FOUND: (1600, common_pb2.UnexpectedError),
    ErrorCode.ALIAS_ALREADY_EXISTS: (1602, common_pb2.UnexpectedError),
    ErrorCode.COMPACTION_NOT_FOUND: (1100, common_pb2.IllegalArgument),
    ErrorCode.IMPORT_JOB_NOT_FOUND: (1100, common_pb2.IllegalArgument),
    ErrorCode.SNAPSHOT_NOT_FOUND: (1100, common_pb2.IllegalArgument),
    ErrorCode.REQUEST_TOO_LARGE: (1102, common_pb2.IllegalArgument),
    ErrorCode.LIMIT_EXCEEDED: (1102, common_pb2.IllegalArgument),
    ErrorCode.COLLECTION_LIMIT_EXCEEDED: (102, common_pb2.UnexpectedError),
    ErrorCode.RATE_LIMITED: (8, common_pb2.RateLimit),
    ErrorCode.FORCE_DENIED: (9, common_pb2.ForceDeny),
    ErrorCode.UNAUTHENTICATED: (1400, common_pb2.PermissionDenied),
    ErrorCode.PERMISSION_DENIED: (1401, common_pb2.PermissionDenied),
    ErrorCode.USER_NOT_FOUND: (1100, common_pb2.IllegalArgument),
    ErrorCode.USER_ALREADY_EXISTS: (1100, common_pb2.CreateCredentialFailure),
    ErrorCode.ROLE_NOT_FOUND: (1100, common_pb2.IllegalArgument),
    ErrorCode.ROLE_ALREADY_EXISTS: (1100, common_pb2.CreateRoleFailure),
    ErrorCode.TIMEOUT: (5, common_pb2.UnexpectedError),
    ErrorCode.UNAVAILABLE: (2, common_pb2.NotReadyServe),
    ErrorCode.INTERNAL: (5, common_pb2.UnexpectedError),
}
_RETRIABLE = {ErrorCode.RATE_LIMITED, ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT}
_INPUT = {c for c, (code, _) in _CODES.items() if code in (1100, 1102)}


def ok() -> common_pb2.Status:
    return common_pb2.Status(code=0, error_code=common_pb2.Success)


def status_of(exc: ElanusError) -> common_pb2.Status:
    """The Milvus status of an Elanus error; the reason keeps Elanus's ``[CODE]`` so a
    reader of either protocol sees the same words."""
    code, legacy = _CODES.get(str(exc.code), (UNEXPECTED, common_pb2.UnexpectedError))
    status = common_pb2.Status(
        code=code,
        error_code=legacy,
        reason=f"[{exc.code}] {exc.message}",
        retriable=exc.code in _RETRIABLE,
    )
    if exc.code in _INPUT:
        status.extra_info["is_input_error"] = "true"
    return status


def not_supported(rpc: str, why: str = "") -> common_pb2.Status:
    """Milvus's answer to a call its deployment does not serve (``why``: what Elanus
    lacks, for a call it serves only in part)."""
    return common_pb2.Status(
        code=UNIMPLEMENTED,
        error_code=common_pb2.UnexpectedError,
        reason=f"Elanus does not support {rpc} over Milvus's protocol"
        + (f": {why}" if why else "")
        + " (docs/milvus-compat.md lists what it serves)",
    )
