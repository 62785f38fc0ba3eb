"""A database's properties, as Milvus keeps them (``pkg/common/common.go``: the
``database.*`` keys): text stored with the database and described back, set and dropped
by ``alter_database_properties``. Elanus acts on the keys it can honour and refuses, with
a message naming the key, those Milvus acts on and Elanus would only store; any other key
is stored, as Milvus stores a key it does not know.

Milvus reads a value when it uses it (a bad one fails the create or load later); Elanus
checks the values of the keys it acts on when they are set, so a stored value always
works."""

from __future__ import annotations

from elanus.errors import ElanusError, ErrorCode, invalid

REPLICA_NUMBER = "database.replica.number"
MAX_COLLECTIONS = "database.max.collections"
DENY_WRITING = "database.force.deny.writing"
DENY_READING = "database.force.deny.reading"

HONOURED: dict[str, str] = {
    REPLICA_NUMBER: "the replica number of a load in the database that names none",
    MAX_COLLECTIONS: "creating a collection beyond it is refused (Milvus's code 102)",
    DENY_WRITING: "true: insert, upsert, delete and import are refused (Milvus's code 9)",
    DENY_READING: "true: search and query are refused (Milvus's code 9)",
}
"""The keys Elanus acts on, and what it does."""

REFUSED: dict[str, str] = {
    "database.resource_groups": "resource groups",
    "database.diskQuota.mb": "a database's disk quota",
    "database.force.deny.ddl": "denying a database's DDL",
    "database.force.deny.collectionDDL": "denying a database's collection DDL",
    "database.force.deny.partitionDDL": "denying a database's partition DDL",
    "database.force.deny.index": "denying a database's index DDL",
    "database.force.deny.flush": "denying a database's flushes",
    "database.force.deny.compaction": "denying a database's compactions",
    "cipher.enabled": "encryption at rest",
    "cipher.key": "encryption at rest",
    "cipher.ezID": "encryption at rest",
    "timezone": "a database's default time zone (Timestamptz fields)",
}
"""The keys Milvus acts on that Elanus would only store: refused, naming the key."""

_BOOLS = {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}
"""Go's ``strconv.ParseBool`` (Milvus's parser of the deny flags), case folded."""


def check_database_property(key: str, value: str, what: str) -> None:
    """Refuse a key Elanus cannot honour (``what``: the request, for the message) and a
    value of a key it acts on that it could not use."""
    if key in REFUSED:
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT,
            f"{what}: database property {key!r} is not supported: Elanus has no "
            f"{REFUSED[key]}, so it would store the key without effect",
        )
    text = value.strip()
    if key in (DENY_WRITING, DENY_READING) and text.lower() not in _BOOLS:
        raise invalid(f"{what}: property {key!r} must be true or false, got {value[:40]!r}")
    if key == MAX_COLLECTIONS and not text.isdigit():
        raise invalid(
            f"{what}: property {key!r} must be a whole number of collections (0 or more), "
            f"got {value[:40]!r}"
        )
    if key == REPLICA_NUMBER and (not text.isdigit() or int(text) < 1):
        raise invalid(
            f"{what}: property {key!r} must be a whole number of replicas (1 or more), "
            f"got {value[:40]!r}"
        )


def denies(properties: dict[str, str], key: str) -> bool:
    """Whether a deny flag (``DENY_WRITING``, ``DENY_READING``) is set true."""
    return _BOOLS.get(properties.get(key, "").strip().lower(), False)


def max_collections(properties: dict[str, str]) -> int | None:
    """The database's collection limit, if it has one."""
    text = properties.get(MAX_COLLECTIONS, "").strip()
    return int(text) if text.isdigit() else None


def replica_number(properties: dict[str, str]) -> int | None:
    """The database's default replica number of a load, if it has one."""
    text = properties.get(REPLICA_NUMBER, "").strip()
    return int(text) if text.isdigit() and int(text) >= 1 else None


def force_denied(db: str, key: str) -> ElanusError:
    """Milvus's refusal of a request in a database whose deny flag ``key`` is set: its
    quota error (code 9) with its reason, naming the database and the key."""
    doing = "writing" if key == DENY_WRITING else "reading"
    return ElanusError(
        ErrorCode.FORCE_DENIED,
        f"quota exceeded[reason=access has been disabled by the administrator]: database "
        f"{db!r} denies {doing} ({key} is true)",
    )
