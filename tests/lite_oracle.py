"""Answers of Milvus Lite to a list of reads, for differential tests.

Milvus Lite runs gRPC threads in its process, and a process with gRPC threads must not fork
(our fixtures fork nats-server), so it runs in a child Python: the rows and the reads go in
as JSON, the answers come back as JSON. Tests skip when pymilvus or milvus-lite is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from elanus import DataType, Schema

# A small collection both kinds of tests use: a JSON field with a missing key, a JSON null,
# a value of another type and a null field; dynamic keys present, missing, null and of
# several types; a nullable scalar.
SAMPLE_ROWS: list[dict[str, Any]] = [
    {"pk": 3, "v": [0.1, 0.2], "j": {"x": 1, "tags": [1, 2]}, "n": 5, "d": 1, "s": "a"},
    {"pk": 1, "v": [0.3, 0.4], "j": {"x": "1"}, "n": None, "d": "x"},
    {"pk": 2, "v": [0.5, 0.6], "j": None, "n": 7, "d": None},
    {"pk": 0, "v": [0.7, 0.8], "j": {"y": 2, "tags": [3]}, "n": 1},
    {"pk": 5, "v": [0.9, 1.0], "j": {"x": None, "tags": None}, "n": 1, "d": [1, 2]},
]
SAMPLE_FIELDS: list[dict[str, Any]] = [
    {"name": "pk", "type": "INT64", "is_primary": True},
    {"name": "v", "type": "FLOAT_VECTOR", "dim": 2},
    {"name": "j", "type": "JSON", "nullable": True},
    {"name": "n", "type": "INT64", "nullable": True},
]


def sample_schema() -> Schema:
    """``SAMPLE_FIELDS`` as an Elanus schema, dynamic fields on."""
    schema = Schema(enable_dynamic_field=True)
    for f in SAMPLE_FIELDS:
        kw = {k: v for k, v in f.items() if k not in ("name", "type")}
        schema.add_field(f["name"], getattr(DataType, f["type"]), **kw)
    return schema


_SCRIPT = r"""
import json, sys
from pymilvus import DataType, MilvusClient

spec = json.load(sys.stdin)
c = MilvusClient(spec["path"])
schema = c.create_schema(auto_id=False, enable_dynamic_field=True)
for f in spec["fields"]:
    kw = {k: v for k, v in f.items() if k not in ("name", "type")}
    if "element_type" in kw:
        kw["element_type"] = getattr(DataType, kw["element_type"])
    schema.add_field(f["name"], getattr(DataType, f["type"]), **kw)
index = c.prepare_index_params()
index.add_index(spec["vector"], index_type="FLAT", metric_type="L2")
c.create_collection("c", schema=schema, index_params=index)
c.insert("c", spec["rows"])
out = []
for kind, arg in spec["reads"]:
    try:
        if kind == "partial":
            c.upsert("c", arg, partial_update=True)
            out.append("ok")
        elif kind == "insert":
            c.insert("c", arg)
            out.append("ok")
        elif kind == "page":
            rows = c.query("c", filter=spec["pk"] + " >= 0", output_fields=arg[0], limit=arg[1])
            out.append([dict(r) for r in rows])
        elif kind == "count":
            out.append(c.query("c", filter=arg, output_fields=["count(*)"])[0]["count(*)"])
        elif kind == "filter":
            rows = c.query("c", filter=arg, output_fields=[spec["pk"]])
            out.append(sorted(r[spec["pk"]] for r in rows))
        elif kind == "query":
            rows = c.query("c", filter=spec["pk"] + " >= 0", output_fields=arg)
            out.append(sorted((dict(r) for r in rows), key=lambda r: r[spec["pk"]]))
        else:
            hits = c.search("c", data=[spec["query"]], limit=3, output_fields=arg)[0]
            out.append([[h[spec["pk"]], dict(h["entity"])] for h in hits])
    except Exception as exc:  # an error is an answer too
        out.append({"error": str(exc)[:200]})
c.close()
json.dump(out, sys.stdout)
"""


def lite_answers(
    tmp: Path,
    fields: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    reads: list[tuple[str, Any]],
    query_vector: list[float] | None = None,
) -> list[Any]:
    """Milvus Lite's answer to each read: ``("filter", expr)`` gives the sorted primary keys
    it matches, ``("query", output_fields)`` the rows of ``pk >= 0`` sorted by key,
    ``("search", output_fields)`` ``[pk, entity]`` per hit of a limit-3 search. A write
    may come between them: ``("partial", rows)``, a partial upsert, and ``("insert", rows)``
    answer ``"ok"``. ``("page", (output_fields, limit))`` gives the first ``limit`` rows in
    Lite's order, ``("count", filter)`` its ``count(*)``."""
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    pk = next(f["name"] for f in fields if f.get("is_primary"))
    vector = next(f["name"] for f in fields if f["type"].endswith("VECTOR"))
    spec = {
        "path": str(tmp / "lite.db"),
        "fields": fields,
        "rows": rows,
        "reads": reads,
        "pk": pk,
        "vector": vector,
        "query": query_vector,
    }
    answers: list[Any] = run_in_child(_SCRIPT, spec, timeout=120)
    return answers


def run_in_child(script: str, spec: dict[str, Any], timeout: float) -> Any:
    """What ``script``, run in a child Python with ``spec`` as JSON on its stdin, writes as
    JSON to its stdout; the child must exit 0 (its stderr's tail is the failure)."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)
