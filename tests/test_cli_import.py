"""``elanus import`` / ``import-state`` / ``import-jobs`` run as a user runs them, against a
real standalone server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import StandaloneProcess, cli, cli_json, run_elanus, wait_for
from s3 import MotoServer

from elanus import objstore
from elanus.client.client import Client
from elanus.settings import Settings

# Every test runs the elanus command as its own process.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

DIM = 8


def write_parquet(path: Path, ids: range, dim: int = DIM) -> Path:
    vec = np.random.default_rng(0).random((len(ids), dim), dtype=np.float32)
    table = pa.table(
        {
            "id": pa.array(ids, type=pa.int64()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), dim),
        }
    )
    pq.write_table(table, path)
    return path


def test_import_waits_shows_state_and_lists_jobs(server: StandaloneProcess, tmp_path: Path) -> None:
    with Client(server.uri) as client:
        client.create_collection("imported", DIM)
    files = [write_parquet(tmp_path / "a.parquet", range(300))]
    npy = tmp_path / "set"
    npy.mkdir()
    np.save(npy / "id.npy", np.arange(300, 400, dtype=np.int64))
    np.save(npy / "vector.npy", np.ones((100, DIM), dtype=np.float32))

    done = cli_json(
        server, "import", "imported", str(files[0]), str(npy / "id.npy"), str(npy / "vector.npy")
    )
    assert done["state"] == "Completed" and done["rows"] == 400 and done["progress"] == 1.0
    job = done["job_id"]
    shown = cli(server, "import-state", str(job))
    assert f"import job {job}: Completed" in shown and "400" in shown

    queued = cli_json(
        server, "import", "imported", str(write_parquet(tmp_path / "b.parquet", range(400, 450))),
        "--no-wait",
    )  # fmt: skip
    assert queued["job_id"] > job and queued["state"] in ("Pending", "Importing", "Completed")
    jobs = cli_json(server, "import-jobs", "imported")
    assert [j["job_id"] for j in jobs] == [job, queued["job_id"]]


def test_import_failures_are_one_line(server: StandaloneProcess, tmp_path: Path) -> None:
    with Client(server.uri) as client:
        client.create_collection("strict", DIM)
    bad = write_parquet(tmp_path / "narrow.parquet", range(10), dim=4)
    result = run_elanus("import", "strict", str(bad), "--uri", server.uri)
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: [SCHEMA_MISMATCH] import job ")
    assert "narrow.parquet" in lines[0] and "dim" in lines[0]
    listed = cli(server, "import-jobs", "strict")
    assert "Failed" in listed and "narrow.parquet" in listed
    missing = run_elanus("import-state", "987654321", "--uri", server.uri)
    assert missing.returncode == 1, (missing.stdout, missing.stderr)
    assert missing.stderr.startswith("error: [IMPORT_JOB_NOT_FOUND] import job 987654321 ")

    missing = run_elanus("import", "strict", str(tmp_path / "absent.parquet"), "--uri", server.uri)
    assert missing.returncode == 2 and "no such file" in missing.stderr
    with Client(server.uri) as client:
        assert len(client.list_import_jobs("strict")) == 1


def test_import_on_an_s3_storage_uploads_into_the_bucket(
    standalone_factory: Callable[..., StandaloneProcess], moto_server: MotoServer, tmp_path: Path
) -> None:
    """``elanus import`` against a server whose storage is S3: the files (a Parquet file
    and a numpy set) are uploaded into ``<storage>/import/uploads`` in the bucket and
    imported from there; the uploads are gone when the job ends."""
    s3 = moto_server.settings(moto_server.new_bucket())
    env = {f"ELANUS_{k.upper()}": str(v) for k, v in s3.items()}
    server = standalone_factory(env=env).start().wait_ready(60)
    with Client(server.uri) as client:
        client.create_collection("on_s3", DIM)
    parquet = write_parquet(tmp_path / "a.parquet", range(300))
    npy = tmp_path / "set"
    npy.mkdir()
    np.save(npy / "id.npy", np.arange(300, 400, dtype=np.int64))
    np.save(npy / "vector.npy", np.ones((100, DIM), dtype=np.float32))
    done = cli_json(
        server, "import", "on_s3", str(parquet), str(npy / "id.npy"), str(npy / "vector.npy"),
        "--upload",
    )  # fmt: skip
    assert done["state"] == "Completed" and done["rows"] == 400
    (job,) = cli_json(server, "import-jobs", "on_s3")
    area = f"{s3['storage']}/import/uploads/"
    assert job["files"] and all(f.startswith(area) for f in job["files"]), job["files"]
    settings = Settings(data_dir=str(tmp_path / "probe"), **s3)
    objstore.configure(settings)
    wait_for(lambda: objstore.list_dir(area.rstrip("/")) == [], 10, "the uploads to be removed")
    assert not (server.data_dir / "import" / "uploads").exists()
