"""Issue 13 item 4b: a builder's report is verified before its task is Finished.

A bare Flight client claims a build task and reports forged results (made-up files, files
outside the task's output directory, a file that is no index, an index for another
dimension, a symbolic link): none makes the index Finished; each sends the task back to
Unissued under a new version with a reason naming what failed (never file content), and a
real builder then builds it and searches use the index. A Finished index whose file is
corrupted on disk is reported by the query node that cannot load it, and built again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.flight as flight
import pytest
from conftest import Stack, wait_for
from test_index_service import DIM, collection_id, make_collection, served_indexes, tasks

from elanus.index.build import build_index
from elanus.index.engine import INDEX_FILE
from elanus.index.files import META_FILE
from elanus.index.verify import verify_report
from elanus.indexparams import make_index_spec

pytestmark = pytest.mark.timeout(240)

SECRET = b"SECRET-CONTENT-7f3a"
"""Planted in forged files: no reason, reply or log line may ever quote it."""
ROWS = 3000
IVF = {"index_type": "IVF_FLAT", "metric_type": "L2", "params": {"nlist": 16}}


def spec_dict(dim: int = DIM, metric: str = "L2") -> dict[str, Any]:
    return make_index_spec_for(dim, metric).to_dict()


def make_index_spec_for(dim: int, metric: str = "L2") -> Any:
    from elanus.schema import DataType

    return make_index_spec(DataType.FLOAT_VECTOR, dim, "IVF_FLAT", metric, {"nlist": 16})


def write_real_index(directory: Path, dim: int = DIM, rows: int = ROWS, metric: str = "L2") -> None:
    """A genuine index of ``rows`` random vectors, as a builder writes it."""
    vectors = np.random.default_rng(dim).random((rows, dim), dtype=np.float32)
    build_index(make_index_spec_for(dim, metric), vectors).write(directory)


class Forger:
    """A bare Flight client (pyarrow only) acting as an index builder."""

    def __init__(self, uri: str, node_id: str) -> None:
        self.conn = flight.connect(uri)
        self.node_id = node_id

    def action(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        [result] = self.conn.do_action(flight.Action(name, json.dumps(body).encode()))
        reply: dict[str, Any] = json.loads(result.body.to_pybytes())
        return reply

    def claim(self, collection: str) -> dict[str, Any]:
        reply = self.action(
            "claim_index_tasks", {"collection": collection, "node_id": self.node_id}
        )
        (task,) = reply["tasks"]
        return task

    def report(self, task: dict[str, Any], files: list[str]) -> dict[str, Any]:
        body = {
            "build_id": task["build_id"],
            "version": task["version"],
            "node_id": self.node_id,
            "ok": True,
            "files": files,
        }
        return self.action("report_index_task", body)

    def close(self) -> None:
        self.conn.close()


def the_task(stack: Stack, cid: int) -> dict[str, Any]:
    (task,) = tasks(stack, cid)
    return task


def test_forged_reports_never_finish_an_index(stack: Stack, tmp_path: Path) -> None:
    client = stack.client()
    vectors = make_collection(client, "f", [(0, ROWS)])
    cid = collection_id(client, "f")
    client.create_index("f", "vector", **IVF)
    client.load_collection("f")
    forger = Forger(stack.uri, "forger-1")
    elsewhere = tmp_path / "elsewhere"
    write_real_index(elsewhere)  # a genuine index, but not where the task writes

    def garbage_index(out: Path) -> list[str]:
        write_real_index(out)
        (out / INDEX_FILE).write_bytes(SECRET * 100)
        return [str(out / INDEX_FILE), str(out / META_FILE)]

    def garbage_meta(out: Path) -> list[str]:
        write_real_index(out)
        (out / META_FILE).write_bytes(b"{" + SECRET)
        return [str(out / INDEX_FILE), str(out / META_FILE)]

    def wrong_dimension(out: Path) -> list[str]:
        write_real_index(out, dim=DIM // 2)
        return [str(out / INDEX_FILE), str(out / META_FILE)]

    def wrong_rows(out: Path) -> list[str]:
        write_real_index(out, rows=ROWS - 1)
        return [str(out / INDEX_FILE), str(out / META_FILE)]

    def symlinked(out: Path) -> list[str]:
        out.mkdir(parents=True, exist_ok=True)
        for name in (INDEX_FILE, META_FILE):
            os.symlink(elsewhere / name, out / name)
        return [str(out / INDEX_FILE), str(out / META_FILE)]

    def made_up(out: Path) -> list[str]:
        return [str(out / INDEX_FILE), str(out / META_FILE)]

    def outside(out: Path) -> list[str]:
        return made_up(elsewhere)

    def dot_dot(out: Path) -> list[str]:
        return [f"{out}/../../../x/{INDEX_FILE}", str(out / META_FILE)]

    cases: list[tuple[str, Any, str]] = [
        ("made-up files", made_up, "does not exist"),
        ("outside the out dir", outside, "outside"),
        ("dot-dot out of the out dir", dot_dot, "outside"),
        ("a file that is no index", garbage_index, f"{INDEX_FILE} does not load"),
        ("metadata that is no metadata", garbage_meta, f"{META_FILE} is not index metadata"),
        ("an index for the wrong dimension", wrong_dimension, "dimension"),
        ("an index of another row count", wrong_rows, "rows"),
        ("symbolic links to a real index", symlinked, "symbolic link"),
        ("no files at all", lambda out: [], "no files"),
    ]
    last_version = 0
    try:
        for what, forge, reason in cases:
            task = forger.claim("f")
            assert task["version"] > last_version, what
            out = Path(task["out_dir"])
            reply = forger.report(task, forge(out))
            assert reply["accepted"] is False, what
            assert reason in reply["reason"], (what, reply)
            after = the_task(stack, cid)
            # Back to Unissued under a new version, the reason kept; never Finished.
            assert after["state"] == "Unissued", what
            assert after["version"] == task["version"] + 1, what
            assert reason in after["fail_reason"], (what, after)
            assert SECRET.decode() not in after["fail_reason"] + reply["reason"]
            assert client.describe_index("f")[0]["state"] != "Finished", what
            # The rejected attempt's version is retired: the same report again is stale.
            again = forger.report(task, [str(out / INDEX_FILE), str(out / META_FILE)])
            assert again["accepted"] is False and "stale" in again["reason"], what
            last_version = after["version"]

        # Someone else's task: a report from a builder it was not issued to is refused.
        task = forger.claim("f")
        other = Forger(stack.uri, "forger-2")
        try:
            write_real_index(Path(task["out_dir"]))
            reply = other.report(task, [])
            assert reply["accepted"] is False and "another builder" in reply["reason"]
            assert the_task(stack, cid)["state"] == "InProgress"
        finally:
            other.close()
    finally:
        forger.close()
    assert not served_indexes(stack)
    hits = client.search("f", vectors[[5, 2500]], limit=1, consistency_level="Strong")
    assert [h[0]["id"] for h in hits] == [5, 2500]  # exact search meanwhile, still right

    # A real builder takes the task over (the forger's lease lapses) and its report holds.
    stack.add_indexnode()
    info = client.wait_for_index("f", timeout=120)
    assert info["state"] == "Finished" and info["indexed_rows"] == ROWS
    done = the_task(stack, cid)
    assert done["version"] > last_version and done["fail_reason"] is None
    assert all(str(done["version"]) in Path(f).parts for f in done["file_paths"])
    wait_for(lambda: len(served_indexes(stack)) == 1, what="the rebuilt index served")
    hits = client.search("f", vectors[[5, 2500]], limit=1, consistency_level="Strong")
    assert [h[0]["id"] for h in hits] == [5, 2500]


def test_corrupted_index_is_built_again(stack: Stack) -> None:
    client = stack.client()
    vectors = make_collection(client, "c", [(0, ROWS)])
    cid = collection_id(client, "c")
    client.create_index("c", "vector", **IVF)
    builder = stack.add_indexnode()
    client.load_collection("c")
    client.wait_for_index("c", timeout=120)
    wait_for(lambda: len(served_indexes(stack)) == 1, what="the index served")
    first = the_task(stack, cid)
    assert first["state"] == "Finished"

    # No builder for now, so the state between report and rebuild can be looked at.
    stack.call(builder.stop())
    stack.indexnodes.remove(builder)
    coord = stack.coord
    assert coord is not None
    wait_for(lambda: not coord.sessions.of_role("indexnode"), what="the builder's session gone")
    (index_file,) = [f for f in first["file_paths"] if f.endswith(INDEX_FILE)]
    Path(index_file).write_bytes(SECRET * 50)
    client.release_collection("c")
    client.load_collection("c")
    reissued = wait_for(
        lambda: (t := the_task(stack, cid))["state"] == "Unissued" and t,
        what="the coord to issue the task again",
    )
    assert reissued["version"] == first["version"] + 1
    assert "could not load" in reissued["fail_reason"]
    assert f"{INDEX_FILE} does not load" in reissued["fail_reason"]
    assert SECRET.decode() not in reissued["fail_reason"]
    assert not served_indexes(stack)
    queries = vectors[[7, 1234, 2999]] + np.float32(0.01)
    hits = client.search("c", queries, limit=1, consistency_level="Strong")
    assert [h[0]["id"] for h in hits] == [7, 1234, 2999]  # exact meanwhile, and right

    stack.add_indexnode()
    wait_for(
        lambda: (t := the_task(stack, cid))["state"] == "Finished" and t,
        timeout=120,
        what="the index built again",
    )
    rebuilt = the_task(stack, cid)
    assert rebuilt["version"] > reissued["version"]
    wait_for(lambda: len(served_indexes(stack)) == 1, what="the rebuilt index served")
    hits = client.search("c", queries, limit=1, consistency_level="Strong")
    assert [h[0]["id"] for h in hits] == [7, 1234, 2999]
    assert client.describe_index("c")[0]["state"] == "Finished"


# -- the checks themselves, without a cluster ----------------------------------------------------


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    storage = tmp_path / "storage"
    out = storage / "indexes" / "11" / "1" / "2" / "3"
    write_real_index(out, rows=500)
    return storage, out


def files_of(out: Path) -> list[str]:
    return [str(out / INDEX_FILE), str(out / META_FILE)]


def test_a_real_build_verifies(layout: tuple[Path, Path]) -> None:
    storage, out = layout
    assert verify_report(storage, out, files_of(out), spec_dict(), 500) is None
    # Names relative to the output directory are accepted as well.
    assert verify_report(storage, out, [INDEX_FILE, META_FILE], spec_dict(), 500) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda s, o: {"spec": spec_dict(metric="IP")}, "metric"),
        (lambda s, o: {"spec": spec_dict(dim=DIM * 2)}, "dimension"),
        (lambda s, o: {"rows": 501}, "rows"),
        (lambda s, o: {"files": [str(o / INDEX_FILE)]}, f"lacks {META_FILE}"),
        (lambda s, o: {"files": [str(o)]}, "outside"),
        (lambda s, o: {"files": [str(o / "sub" / "..")]}, "outside"),
        (lambda s, o: {"files": [*files_of(o), "x"] * 40}, "at most"),
        (lambda s, o: {"files": [*files_of(o), 5]}, "not a path"),
    ],
)
def test_reports_that_do_not_hold(layout: tuple[Path, Path], change: Any, reason: str) -> None:
    storage, out = layout
    args: dict[str, Any] = {"spec": spec_dict(), "rows": 500, "files": files_of(out)}
    args.update(change(storage, out))
    why = verify_report(storage, out, args["files"], args["spec"], args["rows"])
    assert why is not None and reason in why, why


def test_files_that_are_not_plain_index_files(layout: tuple[Path, Path], tmp_path: Path) -> None:
    storage, out = layout
    (out / "empty").write_bytes(b"")
    (out / "dir").mkdir()
    os.mkfifo(out / "fifo")
    for name, reason in (("empty", "is empty"), ("dir", "not a regular file"),
                         ("fifo", "not a regular file")):  # fmt: skip
        why = verify_report(storage, out, [*files_of(out), str(out / name)], spec_dict(), 500)
        assert why is not None and reason in why, (name, why)

    # An output directory reached through a symbolic link is refused, whatever it holds.
    real = tmp_path / "real-out"
    write_real_index(real, rows=500)
    linked = storage / "indexes" / "12" / "1" / "2" / "3"
    linked.parent.mkdir(parents=True)
    linked.symlink_to(real)
    why = verify_report(storage, linked, files_of(linked), spec_dict(), 500)
    assert why is not None and "symbolic link" in why


@pytest.mark.parametrize(
    ("dtype", "index_type", "metric", "params"),
    [
        ("FloatVector", "FLAT", "L2", {}),
        ("FloatVector", "IVF_FLAT", "IP", {"nlist": 8}),
        ("FloatVector", "IVF_SQ8", "L2", {"nlist": 8}),
        ("FloatVector", "IVF_PQ", "L2", {"nlist": 8, "m": 4, "nbits": 8}),
        ("FloatVector", "HNSW", "COSINE", {"M": 8, "efConstruction": 32}),
        ("FloatVector", "AUTOINDEX", "L2", {}),
        ("BinaryVector", "BIN_FLAT", "HAMMING", {}),
        ("BinaryVector", "BIN_IVF_FLAT", "HAMMING", {"nlist": 8}),
        ("BinaryVector", "BIN_FLAT", "JACCARD", {}),
    ],
)
@pytest.mark.parametrize("rows", [300, 5000])
@pytest.mark.parametrize("nulls", [False, True])
def test_every_index_a_builder_makes_verifies(
    tmp_path: Path,
    dtype: str,
    index_type: str,
    metric: str,
    params: dict[str, Any],
    rows: int,
    nulls: bool,
) -> None:
    """No false alarm: a rejected genuine index would be rebuilt forever."""
    spec = make_index_spec(dtype, 32, index_type, metric, params)
    rng = np.random.default_rng(rows)
    if dtype == "BinaryVector":
        vectors: np.ndarray = rng.integers(0, 256, (rows, 4), dtype=np.uint8)
    else:
        vectors = rng.random((rows, 32), dtype=np.float32)
    valid = (np.arange(rows) % 7 != 0) if nulls else None
    storage = tmp_path / "storage"
    out = storage / "indexes" / "1" / "1" / "1" / "1"
    keys = build_index(spec, vectors, valid).write(out)
    files = [str(out / k) for k in keys]
    assert verify_report(storage, out, files, spec.to_dict(), rows) is None
