"""Spark index runs (issue 5): ``elanus index build COLLECTION --spark-master local[2]`` runs
the pending build tasks as a real local Spark job, one Spark task per segment; executors
read Lance, write the index files and report through the proxy into the coord's state
machine; searches then use the indexes. Also the same job through ``spark-submit``.

No index node runs here, so the tasks wait for Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import Stack, cli_env, run_elanus
from test_index_service import collection_id, make_collection, served_indexes, tasks
from test_read_path import wait_for

pytestmark = pytest.mark.spark  # every test here starts a Spark job (a JVM)

SPARK_TIMEOUT_S = 300


def test_cli_spark_index_run_builds_every_segment(stack: Stack) -> None:
    client = stack.client()
    vectors = make_collection(client, "s", [(0, 1000), (1000, 2000), (2000, 3000)])
    cid = collection_id(client, "s")
    client.create_index("s", "vector", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 8})
    client.load_collection("s")
    assert client.describe_index("s")[0]["state"] == "Unissued"

    env = cli_env(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = run_elanus(
        "index", "build", "s", "--spark-master", "local[2]", "--uri", stack.uri, "--json",
        env=env, timeout=SPARK_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert (run["claimed"], run["built"], run["failed"], run["rejected"]) == (3, 3, 0, 0)
    info = client.describe_index("s")[0]
    assert info["state"] == "Finished" and info["indexed_rows"] == 3000
    built = tasks(stack, cid)
    assert len(built) == 3 and {t["node_id"] for t in built} == {run["node_id"]}
    assert all(t["version"] == 1 and all(Path(f).exists() for f in t["file_paths"]) for t in built)
    wait_for(lambda: len(served_indexes(stack)) == 3, what="the Spark-built indexes served")
    queries = vectors[[10, 1500, 2900]] + np.float32(0.01)
    params = {"params": {"nprobe": 8}}
    hits = client.search("s", queries, limit=3, search_params=params, consistency_level="Strong")
    assert [h[0]["id"] for h in hits] == [10, 1500, 2900]

    again = run_elanus("index", "build", "s", "--uri", stack.uri, "--json", env=env, timeout=60)
    assert again.returncode == 0 and json.loads(again.stdout)["claimed"] == 0
    unknown = run_elanus("index", "build", "nope", "--uri", stack.uri, env=env, timeout=60)
    assert unknown.returncode == 1 and "COLLECTION_NOT_FOUND" in unknown.stderr


def test_spark_submit_runs_the_same_job(stack: Stack) -> None:
    client = stack.client()
    make_collection(client, "t", [(0, 500), (500, 1000)])
    client.create_index("t", "vector", index_type="FLAT", metric_type="L2")
    from elanus.spark import index_run

    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [str(submit), "--master", "local[2]", index_run.__file__, "t", "--uri", stack.uri],
        env=env, capture_output=True, text=True, timeout=SPARK_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    info = client.describe_index("t")[0]
    assert info["state"] == "Finished" and info["indexed_rows"] == 1000


@pytest.mark.timeout(600)
def test_spark_index_run_builds_scalar_indexes(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """STL_SORT on an Int64 field and INVERTED on a JSON path, built by a Spark run (the
    same build step as an index node's): the coord verifies and serves them, and filters
    answer exactly as without them."""
    from test_scalar_index import DIM as SCALAR_DIM
    from test_scalar_index import answers, scalar_uses, served
    from test_scalar_index import make_collection as make_scalar_collection

    from elanus.spark.index_run import run_index_build

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    client = stack.client()
    make_scalar_collection(client, "sc")  # two flushed segments of 2000 rows, loaded
    filters = ["i < 40", "i >= 2000", "i in [7, 70, 700]", 'j["a"] > 8', 'j["a"] == 2']
    queries = np.random.default_rng(9).normal(size=(2, SCALAR_DIM)).astype(np.float32)
    plain = answers(client, "sc", queries, filters)
    client.create_index("sc", field_name="i", index_type="STL_SORT", index_name="i_sorted")
    client.create_index(
        "sc", field_name="j", index_type="INVERTED", index_name="j_a",
        params={"json_path": 'j["a"]', "json_cast_type": "double"},
    )  # fmt: skip

    run = run_index_build(stack.uri, "sc", master="local[1]")
    assert (run.claimed, run.built, run.failed, run.rejected) == (4, 4, 0, 0), run.failures
    infos = {i["index_name"]: i for i in client.describe_index("sc")}
    assert {n: (i["state"], i["indexed_rows"]) for n, i in infos.items()} == {
        "i_sorted": ("Finished", 4000),
        "j_a": ("Finished", 4000),
    }
    built = tasks(stack, collection_id(client, "sc"))
    assert {t["node_id"] for t in built} == {run.node_id}
    assert {Path(f).name for t in built for f in t["file_paths"]} == {"scalar.arrow", "meta.json"}
    wait_for(lambda: served(stack, {"i", "j"}), what="the Spark-built scalar indexes served")

    before = scalar_uses(stack)
    assert answers(client, "sc", queries, filters) == plain
    assert scalar_uses(stack) - before >= 3 * len(filters)  # query, count, search per filter
