"""The seeded data set the differential suite loads into Milvus Lite and into Elanus.

One collection, described once as plain specs so each side builds its own schema from the
same words: every scalar type, nullable fields, JSON with missing keys and mixed types,
arrays, dynamic fields, and three vector fields, one per float metric.
"""

from __future__ import annotations

from typing import Any

import numpy as np

COLLECTION = "conformance"
DIM = 8
ROWS = 300
SEED = 20261124

VECTOR_FIELDS = {"v_l2": "L2", "v_ip": "IP", "v_cos": "COSINE"}
"""Each vector field and the metric of its FLAT index (so search is exact on both sides)."""

FIELDS: list[tuple[str, str, dict[str, Any]]] = [
    ("id", "INT64", {"is_primary": True}),
    ("i8", "INT8", {}),
    ("i16", "INT16", {}),
    ("i32", "INT32", {}),
    ("i64", "INT64", {}),
    ("f", "FLOAT", {}),
    ("d", "DOUBLE", {}),
    ("b", "BOOL", {}),
    ("s", "VARCHAR", {"max_length": 64}),
    ("j", "JSON", {}),
    ("arr", "ARRAY", {"element_type": "INT64", "max_capacity": 8}),
    ("sarr", "ARRAY", {"element_type": "VARCHAR", "max_capacity": 4, "max_length": 16}),
    ("ni", "INT64", {"nullable": True}),
    ("ns", "VARCHAR", {"max_length": 32, "nullable": True}),
    ("nj", "JSON", {"nullable": True}),
    *((name, "FLOAT_VECTOR", {"dim": DIM}) for name in VECTOR_FIELDS),
]

WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "Apple", "a_b", "x%y"]
TAGS = ["red", "green", "blue", "gold"]


def _json_value(rng: np.random.Generator, i: int) -> dict[str, Any]:
    """Keys present on some rows only, one key whose type varies, nesting and arrays."""
    doc: dict[str, Any] = {"k": int(i % 17), "name": WORDS[i % len(WORDS)]}
    if i % 3 == 0:
        doc["tags"] = [TAGS[(i + t) % 4] for t in range(1 + i % 3)]
    if i % 4 == 0:
        doc["nums"] = [int(x) for x in rng.integers(0, 10, size=1 + i % 4)]
    if i % 5 == 0:
        doc["nested"] = {"x": int(i % 11), "y": {"z": WORDS[i % 3]}}
    if i % 7 == 0:
        doc["mixed"] = str(i % 5)  # a string where other rows hold a number
    elif i % 7 == 1:
        doc["mixed"] = int(i % 5)
    if i % 9 == 0:
        doc["flag"] = bool(i % 2)
    if i % 11 == 0:
        doc["f"] = float(i) / 4
    return doc


def rows() -> list[dict[str, Any]]:
    """The ``ROWS`` seeded rows as dicts (dynamic keys included), identical on both sides."""
    rng = np.random.default_rng(SEED)
    vectors = {name: rng.standard_normal((ROWS, DIM)).astype(np.float32) for name in VECTOR_FIELDS}
    out = []
    for i in range(ROWS):
        row: dict[str, Any] = {
            "id": i * 3 + 1,
            "i8": int((i % 200) - 100),
            "i16": int((i * 37) % 2000 - 1000),
            "i32": int((i * 7919) % 100000 - 50000),
            "i64": int(i * 1_000_003 - 150_000_000),
            "f": float(np.float32((i % 50) / 8 - 3)),
            "d": float(i) / 3 - 40.0,
            "b": i % 2 == 0,
            "s": f"{WORDS[i % len(WORDS)]}_{i % 13}",
            "j": _json_value(rng, i),
            "arr": [int(x) for x in rng.integers(0, 20, size=i % 6)],
            "sarr": [TAGS[(i + t) % 4] for t in range(i % 4)],
            "ni": None if i % 4 == 0 else int(i % 23),
            "ns": None if i % 5 == 0 else WORDS[i % 4],
            "nj": None if i % 6 == 0 else {"a": int(i % 8)},
        }
        for name in VECTOR_FIELDS:
            row[name] = [float(x) for x in vectors[name][i]]
        if i % 2 == 0:
            row["dyn_i"] = int(i % 10)
        if i % 3 == 0:
            row["dyn_s"] = WORDS[i % 5]
        out.append(row)
    return out


def query_vectors(n: int = 3, seed: int = 7) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [[float(x) for x in v] for v in rng.standard_normal((n, DIM)).astype(np.float32)]
