"""The cases of the malformed-request suite (tests/test_fuzz_requests.py), as plain data:
the shared vocabulary and the DoAction cases (the stream calls are in fuzz_streams.py).
The collections both fuzz suites (this and the Milvus port's) seed, and what no message
may leak, are here too.

Each case is one Flight call a hostile or careless client could make: the call kind, the
raw bytes it carries (action body, DoGet ticket, command) and, for the streaming calls, the
record batches it writes. The cases are generated where they can be (wrong types from the
action catalogue, bad JSON for every action), so a new action or key gets covered by itself.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from elanus import DataType, Schema
from elanus.client.client import Client
from elanus.flight.actions import catalogue

DIM = 4
MAIN = "fz"
"""The collection every case reads, or must leave unchanged when it writes."""
BIG = "fzbig"
"""Where the oversized writes go: before the limits exist they are accepted, and must not
disturb the row count of ``MAIN``."""
ABSENT = "fz_absent"
MIB = 1 << 20
SETTINGS = {
    "max_action_bytes": MIB,
    "max_put_bytes": MIB,
    "max_put_batches": 16,
}
"""What the suite's standalone server runs with (as ``ELANUS_*`` variables)."""

Batches = Callable[[], tuple[pa.Schema, list[pa.RecordBatch]]]


@dataclass(frozen=True)
class Case:
    """One malformed call and what it may answer.

    ``codes``: the error codes allowed (empty: any known code but INTERNAL). ``ok``: the
    call may also succeed (a harmless reading of odd input). ``words``: text the error
    message must hold. ``writes``: a collection whose row count must not change.
    """

    id: str
    call: str
    """action | put | get | info | schema | exchange | raw_put"""
    payload: bytes = b""
    action: str = ""
    path: tuple[str, ...] | None = None
    """A path descriptor instead of a command one."""
    batches: Batches | None = None
    codes: frozenset[str] = frozenset()
    ok: bool = False
    words: tuple[str, ...] = ()
    writes: str | None = None
    oversized: bool = False
    """A case for the size limits being built on another branch (expected to fail here)."""
    frames: tuple[bytes, ...] = field(default=())
    """raw_put only: raw FlightData messages after the descriptor one."""


LEAK = re.compile(
    r"Traceback|File \"|\.pyx?\b|site-packages|/work/|/tmp/|/home/|/usr/|"
    r"line \d+, in |elanus\.\w+\.\w+|0x[0-9a-f]{8,}"
)
"""What a message to a client must not hold (both fuzz suites): tracebacks, source files,
paths on the server, qualified Python names, memory addresses."""
INV = frozenset({"INVALID_ARGUMENT"})
TOO_LARGE = frozenset({"REQUEST_TOO_LARGE"})


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def with_raw(body: dict[str, Any], key: str, literal: str) -> bytes:
    """``body`` with ``key`` set to a raw JSON literal (NaN, 2**64, -0 ...)."""
    placeholder = "__fz_literal__"
    return dumps({**body, key: placeholder}).replace(f'"{placeholder}"'.encode(), literal.encode())


def fuzz_schema() -> Schema:
    """The schema of the collections both fuzz suites read and write."""
    return (
        Schema(enable_dynamic_field=False)
        .add_field("id", DataType.INT64, is_primary=True)
        .add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
        .add_field("title", DataType.VARCHAR, max_length=16)
        .add_field("doc", DataType.JSON, nullable=True)
    )


def seed_collections(client: Client, main: str, big: str, index: bool = False) -> None:
    """Create and load ``main`` (60 flushed rows and 20 growing: 80) and ``big`` (60 rows),
    both of ``fuzz_schema``; ``index``: ``main``'s vectors get a FLAT index."""
    rng = np.random.default_rng(7)
    for name in (main, big):
        client.create_collection(name, schema=fuzz_schema(), properties={"metric_type": "L2"})
    rows = {
        "id": np.arange(60),
        "vec": rng.random((60, DIM), dtype=np.float32),
        "title": [f"t{i}" for i in range(60)],
        "doc": [None] * 60,
    }
    client.insert(main, rows)
    client.flush(main, timeout=30)  # a sealed segment (a read ticket) and growing rows
    client.insert(main, {k: v[:20] for k, v in rows.items()} | {"id": np.arange(60, 80)})
    client.insert(big, rows)
    if index:
        client.create_index(main, field_name="vec", index_type="FLAT", metric_type="L2")
    for name in (main, big):
        client.load_collection(name)


# -- a valid body for every action ---------------------------------------------------------
# Each is well formed (refused, if at all, for a reason that is not its shape: an absent
# collection, say) and harmless should it run: destructive actions name absent objects.
VEC = [0.1, 0.2, 0.3, 0.4]
BACKUPS = str(Path(tempfile.gettempdir()) / f"elanus-fuzz-backups-{os.getpid()}")
"""Where the base ``backup_create`` writes (the fuzz fixture removes it)."""

BASE: dict[str, dict[str, Any]] = {
    "create_collection": {"name": MAIN, "dimension": DIM},
    "drop_collection": {"name": ABSENT},
    "has_collection": {"name": MAIN},
    "describe_collection": {"name": MAIN},
    "list_collections": {},
    "rename_collection": {"name": ABSENT, "new_name": "fz_absent2"},
    "alter_collection_properties": {"name": ABSENT, "properties": {"collection.ttl.seconds": 5}},
    "add_collection_field": {
        "collection": ABSENT, "field": {"name": "fz_added", "type": "Int64", "nullable": True},
    },
    "drop_collection_field": {"collection": ABSENT, "field_name": "fz_added"},
    "drop_function_field": {"collection": ABSENT, "function_name": "fz_bm25"},
    "add_function_field": {
        "collection": ABSENT,
        "field": {"name": "fz_sparse", "type": "SparseFloatVector"},
        "function": {"name": "fz_bm25", "type": "BM25", "input_field_names": ["text"],
                     "output_field_names": ["fz_sparse"]},
    },
    "alter_mmap": {"collection": ABSENT, "enabled": True},
    "alter_index_properties": {
        "collection": ABSENT, "index_name": "vec", "properties": {"warmup": "sync"},
    },
    "alter_collection_field": {
        "collection": ABSENT, "field_name": "vec", "properties": {"mmap.enabled": True},
    },
    "create_partition": {"collection": ABSENT, "partition": "p1"},
    "drop_partition": {"collection": ABSENT, "partition": "p1"},
    "has_partition": {"collection": MAIN, "partition": "_default"},
    "list_partitions": {"collection": MAIN},
    "create_database": {"name": "fzdb"},
    "drop_database": {"name": "fzdb_absent"},
    "list_databases": {},
    "describe_database": {"name": "default"},
    "alter_database_properties": {
        "name": "fzdb_absent", "properties": {"database.max.collections": 5},
    },
    "list_sessions": {},
    "health": {},
    "get_timestamp": {"count": 1},
    "create_index": {"collection": ABSENT, "field_name": "vec"},
    "drop_index": {"collection": ABSENT, "field_name": "vec"},
    "describe_index": {"collection": MAIN, "field_name": "vec"},
    "list_indexes": {"collection": MAIN},
    "claim_index_tasks": {"node_id": "fz_node", "collection": ABSENT},
    "index_heartbeat": {"node_id": "fz_node"},
    "report_index_task": {"build_id": 987654321, "version": 1, "node_id": "fz_node", "ok": False},
    "delete": {"collection": MAIN, "ids": [999_999]},
    "get_collection_stats": {"collection": MAIN},
    "flush": {"collection": ABSENT},
    "get_flush_state": {"segment_ids": [1]},
    "get_segment_info": {"segment_ids": [1]},
    "compact": {"collection": ABSENT},
    "get_compaction_state": {"compaction_id": 1},
    "import": {"collection": ABSENT, "files": ["/nonexistent/a.parquet"]},
    "get_import_state": {"job_id": 1},
    "list_import_jobs": {"collection": MAIN},
    "commit_write": {"collection": ABSENT, "write_id": "w_absent"},
    "abort_write": {"write_id": "w_absent"},
    "load_collection": {"collection": ABSENT},
    "release_collection": {"collection": ABSENT},
    "get_load_state": {"collection": MAIN},
    "search": {"collection": MAIN, "data": [VEC], "limit": 3},
    "hybrid_search": {
        "collection": MAIN, "reqs": [{"data": [VEC], "limit": 3}],
        "ranker": {"strategy": "rrf", "params": {"k": 60}}, "limit": 3,
    },
    "query": {"collection": MAIN, "filter": "id < 3"},
    "read_plan": {"collection": MAIN},
    "whoami": {},
    "create_user": {"user_name": "fz_user", "password": "fz-password"},
    "drop_user": {"user_name": "fz_absent_user"},
    "update_password": {"user_name": "fz_absent_user", "new_password": "fz-password-2"},
    "list_users": {},
    "describe_user": {"user_name": "root"},
    "create_role": {"role_name": "fz_role"},
    "drop_role": {"role_name": "fz_absent_role"},
    "grant_role": {"user_name": "fz_absent_user", "role_name": "public"},
    "revoke_role": {"user_name": "fz_absent_user", "role_name": "public"},
    "grant_privilege": {
        "role_name": "fz_absent_role", "object_type": "Collection", "privilege": "Search",
        "object_name": MAIN,
    },
    "revoke_privilege": {
        "role_name": "fz_absent_role", "object_type": "Collection", "privilege": "Search",
        "object_name": MAIN,
    },
    "list_roles": {},
    "describe_role": {"role_name": "public"},
    "create_alias": {"collection": ABSENT, "alias": "fz_alias"},
    "alter_alias": {"collection": ABSENT, "alias": "fz_alias"},
    "drop_alias": {"alias": "fz_absent_alias"},
    "describe_alias": {"alias": "fz_absent_alias"},
    "list_aliases": {},
    "create_privilege_group": {"group_name": "fz_new_group"},
    "drop_privilege_group": {"group_name": "fz_group_to_drop"},
    "add_privileges_to_group": {"group_name": "fz_group", "privileges": ["Query"]},
    "remove_privileges_from_group": {"group_name": "fz_group", "privileges": ["Query"]},
    "list_privilege_groups": {},
    "describe_replica": {"collection": MAIN},
    "list_compactions": {"limit": 5},
    "list_backup_tasks": {},
    "list_requests": {"limit": 5},
    "describe_config": {},
    "watch_collection": {"collection": MAIN},
    "backup_create": {"target": BACKUPS, "name": "fz_backup", "timeout_s": 60},
    "create_snapshot": {"collection": ABSENT, "name": "fz_snap", "description": "d"},
    "list_snapshots": {"collection": MAIN},
    "describe_snapshot": {"collection": MAIN, "name": "fz_absent"},
    "drop_snapshot": {"collection": MAIN, "name": "fz_absent"},
    "restore_snapshot": {"collection": MAIN, "name": "fz_absent", "target_collection": ABSENT},
    "get_restore_snapshot_state": {"job_id": 1},
    "list_restore_snapshot_jobs": {"collection": MAIN},
    "pin_snapshot_data": {"collection": MAIN, "name": "fz_absent", "ttl_seconds": 60},
    "unpin_snapshot_data": {"pin_id": 1},
}  # fmt: skip
WRITE_ACTIONS = {"delete"}
"""Actions whose refusal must leave ``MAIN``'s row count as it was."""


def base_body_cases() -> list[Case]:
    """Every base body is well formed: nothing of it is refused as INVALID_ARGUMENT, so the
    wrong-type cases built on it are refused for the key they break."""
    out = []
    for name in catalogue():
        codes = frozenset(
            {
                "COLLECTION_NOT_FOUND",
                "COLLECTION_ALREADY_EXISTS",
                "PARTITION_NOT_FOUND",
                "DATABASE_NOT_FOUND",
                "INDEX_NOT_FOUND",
                "SEGMENT_NOT_FOUND",
                "COMPACTION_NOT_FOUND",
                "IMPORT_JOB_NOT_FOUND",
                "SNAPSHOT_NOT_FOUND",
                "USER_NOT_FOUND",
                "USER_ALREADY_EXISTS",
                "ROLE_NOT_FOUND",
                "ROLE_ALREADY_EXISTS",
                "ALIAS_NOT_FOUND",
                "ALIAS_ALREADY_EXISTS",
            }
        )
        out.append(Case(f"base/{name}", "action", dumps(BASE[name]), name, codes=codes, ok=True))
    return out


# -- wrong types for every key of every action -------------------------------------------
_KEYS_BY_KIND = {
    "str": """db name new_name new_db collection partition consistency_level description
        primary_field vector_field id_type metric_type field_name index_type index_name
        node_id fail_reason filter write_id anns_field group_by_field user_name password
        old_password new_password role_name object_type privilege object_name db_name
        alias group_name target target_collection target_db function_name""",
    "int": """dimension num_shards max_length count limit build_id version compaction_id job_id
        expected_rows offset group_size guarantee_timestamp session_ts as_of snapshot_ts
        num_partitions replica_number ttl_seconds pin_id target_size_mb field_id""",
    "float": "seconds wait_s timeout_s",
    "bool": """auto_id retry_failed ok upsert strict_group_size force_drop files_only enabled
        clustering""",
    "dict": """schema properties params filter_params options search_params ranker field
        highlighter function""",
    "list": """files ids segment_ids parts partition_names data output_fields columns reqs
        privileges delete_keys""",
}
KINDS: dict[str, str] = {
    key: kind
    for kind, keys in _KEYS_BY_KIND.items()
    for key in keys.split()  # noqa: SIM905
}
"""What each body key of the catalogue takes."""
KINDS["group_by_fields"] = "list"  # query aggregation
KINDS["order_by_fields"] = "list"  # query ordering
WRONG: dict[str, list[tuple[str, Any]]] = {
    "str": [("int", 42), ("object", {"name": "fz"})],
    "int": [("string", "5"), ("float", 2.5), ("bool", True)],
    "float": [("string", "1.5"), ("list", [1.0])],
    "bool": [("string", "true"), ("int", 1)],
    "dict": [("list", []), ("string", "metric_type=L2")],
    "list": [("string", "fz"), ("object", {"0": 1}), ("int", 7)],
}


def wrong_type_cases() -> list[Case]:
    out = []
    for name, spec in catalogue().items():
        for key in ("db", *spec.keys):
            kind = KINDS[key]  # a KeyError here: a new key, add it to KINDS
            for label, value in WRONG[kind]:
                body = {**BASE[name], key: value}
                out.append(
                    Case(
                        f"wrong-type/{name}/{key}/{label}",
                        "action",
                        dumps(body),
                        name,
                        codes=INV,
                        words=(key,),
                        writes=MAIN if name in WRITE_ACTIONS else None,
                    )
                )
    return out


# -- bad JSON, for every action ------------------------------------------------------------
def _bad_json(body: dict[str, Any]) -> list[tuple[str, bytes, tuple[str, ...]]]:
    body = body or {"db": "default"}
    raw = dumps(body)
    key, value = next(iter(body.items()))
    twice = b"{" + dumps(key) + b":" + dumps(value) + b"," + raw[1:]
    return [
        ("truncated", raw[: len(raw) // 2], ("malformed JSON",)),
        ("array", b"[" + raw + b"]", ("JSON object", "array")),
        ("string", dumps(raw.decode()), ("JSON object", "string")),
        ("null", b"null", ("JSON object",)),
        ("trailing-garbage", raw + b"}}", ("malformed JSON",)),
        ("not-utf8", raw[:-1] + b',"description":"caf\xe9"}', ("malformed JSON",)),
        ("duplicate-key", twice, ("twice", repr(key))),
        ("nan-db", with_raw(body, "db", "NaN"), ("db",)),
        ("infinity-db", with_raw(body, "db", "-Infinity"), ("db",)),
        ("single-quotes", raw.replace(b'"', b"'"), ("malformed JSON",)),
    ]


def bad_json_cases() -> list[Case]:
    out = []
    for name in catalogue():
        for label, raw, words in _bad_json(BASE[name]):
            out.append(
                Case(f"bad-json/{name}/{label}", "action", raw, name, codes=INV, words=words)
            )
    return out


# -- huge, negative and odd numbers ----------------------------------------------------------
NUMBERS = [
    ("2pow64", "18446744073709551616"),
    ("2pow64-1", "18446744073709551615"),
    ("2pow63", "9223372036854775808"),
    ("-2pow63-1", "-9223372036854775809"),
    ("1e308", "1e308"),
    ("1e999", "1e999"),
    ("-0", "-0"),
    ("-0.0", "-0.0"),
    ("-1", "-1"),
    ("denormal", "5e-324"),
    ("NaN", "NaN"),
]
# (action, key, smallest valid value, largest valid value or None): a number outside the
# range, or not an integer, is refused; one inside it may be taken.
INT_KEYS: list[tuple[str, str, int, int | None]] = [
    ("search", "limit", 1, 16384),
    ("search", "offset", 0, 16384),
    ("search", "group_size", 1, 16384),
    ("search", "guarantee_timestamp", 0, None),
    ("search", "session_ts", 0, None),
    ("search", "as_of", 0, None),
    ("hybrid_search", "limit", 1, 16384),
    ("hybrid_search", "offset", 0, 16384),
    ("hybrid_search", "group_size", 1, 16384),
    ("query", "limit", 1, 10_000_000),
    ("query", "offset", 0, None),
    ("query", "as_of", 0, None),
    ("create_collection", "dimension", 1, 32768),
    ("create_collection", "num_shards", 1, 16),
    ("create_collection", "max_length", 1, 65535),
    ("get_timestamp", "count", 1, 10_000),
    ("claim_index_tasks", "limit", 1, None),
    ("get_compaction_state", "compaction_id", 1, None),
    ("get_import_state", "job_id", 1, None),
    ("commit_write", "expected_rows", 0, None),
    ("read_plan", "snapshot_ts", 0, None),
]
WORD = {"dimension": "dim"}
"""The word an error uses for a key, where it is not the key itself."""
EXTRA = {
    ("search", "group_size"): {"group_by_field": "title"},
    ("hybrid_search", "group_size"): {"group_by_field": "title"},
    ("create_collection", "max_length"): {"id_type": "varchar"},
}


def _number(literal: str) -> Any:
    if literal in ("NaN", "1e999"):
        return float(literal.replace("1e999", "inf"))
    return json.loads(literal)


def huge_number_cases() -> list[Case]:
    out = []
    for name, key, lo, hi in INT_KEYS:
        base = {**BASE[name], **EXTRA.get((name, key), {})}
        for label, literal in NUMBERS:
            value = _number(literal)
            # orjson reads integers above 2**64 - 1 as floats: not integers either
            integral = type(value) is int and value < 2**64
            refused = not integral or value < lo or (hi is not None and value > hi)
            out.append(
                Case(
                    f"number/{name}/{key}/{label}",
                    "action",
                    with_raw(base, key, literal),
                    name,
                    codes=INV if refused else frozenset(),
                    ok=not refused,
                    words=(WORD.get(key, key),) if refused else (),
                )
            )
    # numbers inside lists and objects: ids, vectors, search params, float keys
    spots = [
        ("query-ids", "query", {"collection": MAIN, "ids": ["@"]}),
        ("delete-ids", "delete", {"collection": BIG, "ids": ["@"]}),  # -0 is the key 0
        ("search-vector", "search", {"collection": MAIN, "data": [[0.1, 0.2, 0.3, "@"]]}),
        (
            "search-nprobe",
            "search",
            {**BASE["search"], "search_params": {"params": {"nprobe": "@"}}},
        ),
        ("commit-wait", "commit_write", {**BASE["commit_write"], "wait_s": "@"}),
        ("flush-state-ids", "get_flush_state", {"segment_ids": ["@"]}),
        (
            "filter-param",
            "query",
            {"collection": MAIN, "filter": "id > {x}", "filter_params": {"x": "@"}},
        ),
    ]
    for spot, name, body in spots:
        for label, literal in NUMBERS:
            raw = dumps(body).replace(b'"@"', literal.encode())
            out.append(
                Case(
                    f"number/{spot}/{label}",
                    "action",
                    raw,
                    name,
                    ok=True,  # some are fine (a delete of key -1), none may be INTERNAL
                    writes=BIG if name in WRITE_ACTIONS else None,
                )
            )
    return out


# -- names: unicode, NUL, control characters, paths, length ------------------------------
NAMES = [
    ("nul", "fz\x00"),
    ("nul-only", "\x00"),
    ("newline", "fz\nx"),
    ("emoji", "fz_\U0001f600"),
    ("rtl", "\u202efz"),
    ("combining", "e\u0301"),
    ("fullwidth", "\uff46\uff5a"),
    ("zero-width", "fz\u200b"),
    ("dotdot", "../fz"),
    ("slash", "fz/x"),
    ("spaces", " fz "),
    ("sql", "fz'; DROP TABLE collections; --"),
    ("empty", ""),
    ("256-chars", "a" * 256),
    ("64k-chars", "a" * 65536),
    ("digit-first", "1fz"),
]
NAME_SPOTS: list[tuple[str, str, Callable[[str], dict[str, Any]]]] = [
    ("has_collection", "has_collection", lambda n: {"name": n}),
    ("create_collection", "create_collection", lambda n: {"name": n, "dimension": DIM}),
    ("create_partition", "create_partition", lambda n: {"collection": MAIN, "partition": n}),
    ("create_database", "create_database", lambda n: {"name": n}),
    ("db", "list_collections", lambda n: {"db": n}),
    ("field", "create_collection", lambda n: {"name": "fz_new", "schema": _schema(n)}),
    (
        "output_field",
        "query",
        lambda n: {"collection": MAIN, "filter": "id < 3", "output_fields": [n]},
    ),
    ("anns_field", "search", lambda n: {**BASE["search"], "anns_field": n}),
    (
        "index_name",
        "create_index",
        lambda n: {"collection": ABSENT, "field_name": "vec", "index_name": n},
    ),
]


def _schema(field_name: str) -> dict[str, Any]:
    return {
        "fields": [
            {"name": "id", "type": "Int64", "is_primary": True},
            {"name": "vec", "type": "FloatVector", "dim": DIM},
            {"name": field_name, "type": "Int64"},
        ]
    }


def name_cases() -> list[Case]:
    out = []
    for spot, name, make in NAME_SPOTS:
        for label, value in NAMES:
            codes = INV
            if spot == "index_name" and not value:  # no index name: the default one
                codes = INV | {"COLLECTION_NOT_FOUND"}
            out.append(
                Case(f"name/{spot}/{label}", "action", dumps(make(value)), name, codes=codes)
            )
    # a lone surrogate (valid JSON escape, not valid Unicode) and raw non-UTF-8 bytes
    for label, raw in [
        ("lone-surrogate", b'{"name":"fz\\ud800"}'),
        ("surrogate-pair-split", b'{"name":"\\udc00\\ud800"}'),
        ("overlong-utf8", b'{"name":"\xc0\xaf"}'),
        ("cesu-surrogate", b'{"name":"\xed\xa0\x80"}'),
    ]:
        out.append(Case(f"name/raw/{label}", "action", raw, "has_collection", codes=INV))
    # unknown action names
    for label, action in [
        ("empty", ""),
        ("nul", "health\x00"),
        ("unicode", "h\u00e9alth"),
        ("long", "x" * 100_000),
        ("case", "HEALTH"),
        ("path", "../health"),
    ]:
        out.append(
            Case(
                f"action-name/{label}", "action", b"{}", action, codes=frozenset({"UNKNOWN_ACTION"})
            )
        )
    return out


# -- nesting --------------------------------------------------------------------------------
def deep_array(n: int) -> bytes:
    return b"[" * n + b"]" * n


def deep_object(n: int) -> bytes:
    return b'{"a":' * n + b"1" + b"}" * n


def nesting_cases() -> list[Case]:
    out = []
    for n in (65, 200, 1025, 100_000):
        out.append(Case(f"nesting/body-array/{n}", "action", deep_array(n), "health", codes=INV))
        out.append(Case(f"nesting/body-object/{n}", "action", deep_object(n), "health", codes=INV))
        inner = (
            b'{"collection":"fz","filter":"id < 3","filter_params":{"x":' + deep_array(n) + b"}}"
        )
        out.append(Case(f"nesting/filter-params/{n}", "action", inner, "query", codes=INV))
        props = b'{"name":"fz_new","dimension":4,"properties":' + deep_object(n) + b"}"
        out.append(Case(f"nesting/properties/{n}", "action", props, "create_collection", codes=INV))
        schema = b'{"name":"fz_new","schema":{"fields":' + deep_array(n) + b"}}"
        out.append(Case(f"nesting/schema/{n}", "action", schema, "create_collection", codes=INV))
    # deep expressions (the filter grammar recurses); none matches a row, should it run
    for label, expr in [
        ("parens", "(" * 5000 + "id < -5" + ")" * 5000),
        ("not", "not " * 5000 + "id > -5"),
        ("unary-minus", "id < " + "-" * 5001 + "1"),
        ("arith", "id + " * 5000 + "1 < 0"),
        ("json-path", "doc" + '["a"]' * 5000 + " == 1"),
        ("list", "id in " + "[" * 5000 + "]" * 5000),
        ("and-chain", " and ".join(["id < -5"] * 2000)),
    ]:
        exprs = frozenset({"BAD_EXPRESSION", "INVALID_ARGUMENT"})
        body = dumps({"collection": MAIN, "filter": expr, "output_fields": ["count(*)"]})
        out.append(Case(f"nesting/expr/{label}", "action", body, "query", codes=exprs, ok=True))
        body = dumps({"collection": MAIN, "filter": expr})
        out.append(
            Case(
                f"nesting/expr-delete/{label}",
                "action",
                body,
                "delete",
                codes=exprs,
                ok=True,
                writes=MAIN,
            )
        )
    return out
