"""Full-text benchmark: BM25 search and hybrid (dense + BM25) search beside LanceDB.

    .venv/bin/python bench/fulltext.py                 # 50,000 documents, 200 queries
    .venv/bin/python bench/fulltext.py --quick         # 5,000 documents, 50 queries
    .venv/bin/python bench/fulltext.py --docs 80000 --queries 500 --json out.json

The corpus is built from text on this machine: the paragraphs of the docstrings (modules,
classes, functions) of Python's standard library and of the packages installed beside this
interpreter, read with ``ast``, de-duplicated, in a fixed order. Each document also gets a
64-d dense vector: its words hashed into 2^16 buckets and projected by a fixed Gaussian
matrix (a cheap stand-in for a text embedding, the same for both systems). Queries are 2
to 4 words drawn from random documents (seeded), with their vectors made the same way.

Both systems hold the same rows: Elanus in an ``elanus standalone`` child process (a BM25
function on a VarChar with the ``standard`` analyzer, the dense field searched exactly with
COSINE), LanceDB in-process (a native FTS index with the same tokenisation: simple split,
lower case, no stemming or stop words; the dense column searched without a vector index,
cosine). Rows:

* **BM25 search**: top 10 by BM25 for one query text per call, scored exactly (no index),
  then again once a ``SPARSE_INVERTED_INDEX`` (metric BM25) is built and served.
* **hybrid search**: dense top 10 and BM25 top 10 fused by RRF (k=60), top 10.

Columns: queries/s (one client, sequential calls), p50 latency, and **agree@10**: the mean
share of Elanus's top-10 ids also in LanceDB's top-10 for the same query ("vs LanceDB" is
Elanus's queries/s over LanceDB's). Agreement below 1 comes from ties and from the two BM25
implementations' statistics (LanceDB's index counts the documents it indexed; Elanus counts
the rows visible at the read timestamp).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Standalone  # noqa: E402
from elanus.client.client import Client  # noqa: E402

DIM = 64
BUCKETS = 1 << 16
WORD = re.compile(r"[0-9A-Za-z]+")
MAX_CHARS = 4000


# -- corpus ---------------------------------------------------------------------------------
def _docstrings(path: Path) -> Iterator[str]:
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (SyntaxError, ValueError, RecursionError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            for para in (ast.get_docstring(node) or "").split("\n\n"):
                if len(para) >= 40:
                    yield " ".join(para.split())[:MAX_CHARS]


def build_corpus(n: int) -> list[str]:
    """``n`` distinct docstring paragraphs of the standard library and the installed
    packages, in a fixed order."""
    paths = sysconfig.get_paths()
    roots = sorted({Path(paths[k]).resolve() for k in ("stdlib", "purelib", "platlib")})
    seen: set[str] = set()
    docs: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for doc in _docstrings(path):
                if doc not in seen:
                    seen.add(doc)
                    docs.append(doc)
                    if len(docs) == n:
                        return docs
    raise SystemExit(f"only {len(docs)} docstrings found; ask for fewer --docs")


def embed(texts: list[str]) -> np.ndarray:
    """Hashed bag of words, projected to DIM and normalised (deterministic)."""
    proj = np.random.default_rng(7).standard_normal((BUCKETS, DIM)).astype(np.float32)
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        words = WORD.findall(text.lower())
        if words:
            ids = np.fromiter((hash_word(w) for w in words), dtype=np.int64, count=len(words))
            out[i] = proj[ids].sum(axis=0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


def hash_word(word: str) -> int:
    import zlib

    return zlib.crc32(word.encode()) % BUCKETS


def make_queries(docs: list[str], n: int) -> list[str]:
    rng = np.random.default_rng(11)
    out: list[str] = []
    while len(out) < n:
        words = [w for w in WORD.findall(docs[int(rng.integers(len(docs)))]) if len(w) > 3]
        if len(words) >= 2:
            k = int(rng.integers(2, 5))
            out.append(" ".join(rng.choice(words, size=min(k, len(words)), replace=False)))
    return out


# -- the two systems ---------------------------------------------------------------------------
def load_elanus(client: Any, table: pa.Table) -> None:
    from elanus import DataType, Function, FunctionType, Schema

    schema = Schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_CHARS * 4, enable_analyzer=True)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_function(Function("bm25", FunctionType.BM25, "text", "sparse"))
    client.create_collection("docs", schema=schema)
    for start in range(0, table.num_rows, 5000):
        client.insert("docs", table.slice(start, 5000).to_pylist())
    client.flush("docs")
    client.load_collection("docs")


def load_lancedb(path: Path, table: pa.Table) -> Any:
    import lancedb

    db = lancedb.connect(str(path))
    tbl = db.create_table("docs", table)
    from lancedb.index import FTS

    fts = FTS(
        base_tokenizer="simple", lower_case=True, stem=False, remove_stop_words=False,
        ascii_folding=False, max_token_length=None,
    )  # fmt: skip
    tbl.create_index("text", config=fts)
    return tbl


def timed(calls: list[Callable[[], list[int]]]) -> tuple[list[list[int]], list[float]]:
    """Each call's answer and seconds, after a warm-up of the first few (lazy loads)."""
    for call in calls[:5]:
        call()
    answers, seconds = [], []
    for call in calls:
        t0 = time.perf_counter()
        answers.append(call())
        seconds.append(time.perf_counter() - t0)
    return answers, seconds


def agreement(a: list[list[int]], b: list[list[int]]) -> float:
    return statistics.fmean(
        len(set(x) & set(y)) / max(len(y), 1) for x, y in zip(a, b, strict=True)
    )


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    t0 = time.perf_counter()
    docs = build_corpus(args.docs)
    vectors = embed(docs)
    queries = make_queries(docs, args.queries)
    qvecs = embed(queries)
    print(f"corpus: {len(docs)} docstrings, built in {time.perf_counter() - t0:.1f} s", flush=True)
    table = pa.table(
        {
            "id": pa.array(np.arange(len(docs)), pa.int64()),
            "text": pa.array(docs, pa.string()),
            "dense": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
    )
    work = Path(args.workdir or tempfile.mkdtemp(prefix="elanus-fulltext-"))
    rows: list[dict[str, Any]] = []
    server = Standalone(work / "elanus").start()  # before LanceDB's threads: a clean fork
    try:
        client = Client(server.uri, timeout=300)
        t0 = time.perf_counter()
        load_elanus(client, table)
        print(f"elanus: loaded in {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        tbl = load_lancedb(work / "lancedb", table)
        print(f"lancedb: loaded in {time.perf_counter() - t0:.1f} s", flush=True)
        from lancedb.rerankers import RRFReranker

        def lance_bm25(q: str) -> Callable[[], list[int]]:
            return lambda: tbl.search(q, query_type="fts").limit(10).to_arrow()["id"].to_pylist()

        def lance_hybrid(q: str, v: np.ndarray) -> Callable[[], list[int]]:
            return lambda: (
                tbl.search(query_type="hybrid").vector(v).text(q).distance_type("cosine")
                .rerank(RRFReranker(K=60)).limit(10).to_arrow()["id"].to_pylist()
            )  # fmt: skip

        lb_answers, lb_s = timed([lance_bm25(q) for q in queries])
        lh_answers, lh_s = timed([lance_hybrid(q, v) for q, v in zip(queries, qvecs, strict=True)])
        from elanus import AnnSearchRequest, RRFRanker

        def elanus_bm25(q: str) -> Callable[[], list[int]]:
            return lambda: [
                h["id"]
                for h in client.search(
                    "docs", data=[q], anns_field="sparse", limit=10,
                    search_params={"metric_type": "BM25"}, consistency_level="Eventually",
                )[0]
            ]  # fmt: skip

        def elanus_hybrid(q: str, v: np.ndarray) -> Callable[[], list[int]]:
            reqs = [
                AnnSearchRequest([v.tolist()], "dense", {"metric_type": "COSINE"}, 10),
                AnnSearchRequest([q], "sparse", {"metric_type": "BM25"}, 10),
            ]
            return lambda: [
                h["id"]
                for h in client.hybrid_search(
                    "docs", reqs, RRFRanker(60), limit=10, consistency_level="Eventually"
                )[0]
            ]

        eb_answers, eb_s = timed([elanus_bm25(q) for q in queries])
        eh_answers, eh_s = timed([elanus_hybrid(q, v) for q, v in zip(queries, qvecs, strict=True)])
        t0 = time.perf_counter()
        client.create_index(
            "docs", "sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25"
        )
        client.wait_for_index("docs", timeout=600)
        time.sleep(3)  # the query node swaps the finished index in
        (info,) = client.describe_index("docs", field_name="sparse")
        print(
            f"elanus: BM25 index built in {time.perf_counter() - t0:.1f} s "
            f"({info['state']}, {info['indexed_rows']} rows)",
            flush=True,
        )
        ei_answers, ei_s = timed([elanus_bm25(q) for q in queries])
        for case, e_s, e_ans, l_s, l_ans in (
            ("BM25 search", eb_s, eb_answers, lb_s, lb_answers),
            ("BM25 search, SPARSE_INVERTED_INDEX", ei_s, ei_answers, lb_s, lb_answers),
            ("hybrid search (dense + BM25, RRF)", eh_s, eh_answers, lh_s, lh_answers),
        ):
            e_qps, l_qps = len(e_s) / sum(e_s), len(l_s) / sum(l_s)
            rows.append(
                {
                    "case": case,
                    "elanus_qps": round(e_qps, 1),
                    "elanus_p50_ms": round(statistics.median(e_s) * 1000, 2),
                    "lancedb_qps": round(l_qps, 1),
                    "lancedb_p50_ms": round(statistics.median(l_s) * 1000, 2),
                    "vs_lancedb": round(e_qps / l_qps, 2),
                    "agree_at_10": round(agreement(e_ans, l_ans), 3),
                }
            )
    finally:
        server.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return rows


def print_table(rows: list[dict[str, Any]], docs: int, queries: int) -> None:
    print(f"\n{docs} documents, {queries} queries, top 10, one client\n")
    head = "| case | elanus q/s | p50 ms | LanceDB q/s | p50 ms | vs LanceDB | agree@10 |"
    print(head)
    print("|" + "---|" * 7)
    for r in rows:
        print(
            f"| {r['case']} | {r['elanus_qps']} | {r['elanus_p50_ms']} | {r['lancedb_qps']} "
            f"| {r['lancedb_p50_ms']} | {r['vs_lancedb']} | {r['agree_at_10']} |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--docs", type=int, default=50_000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--quick", action="store_true", help="5,000 documents, 50 queries")
    p.add_argument("--workdir", help="keep data here (default: a temp dir, removed)")
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args()
    if args.quick:
        args.docs, args.queries = 5_000, 50
    rows = run(args)
    print_table(rows, args.docs, args.queries)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
