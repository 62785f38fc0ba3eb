"""Import file confinement (issue 13 item 1) on a real stack: the server reads import files
only inside its import roots (``..``, absolute paths elsewhere, symlinks out, devices,
fifos and directories are refused before any job exists, and again when the data node
opens the file); no error or job state ever quotes a file's bytes; local files outside the
roots are uploaded over Flight and imported, through the SDK and through ``elanus import``."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest
from conftest import Stack, StandaloneProcess, cli_json, run_elanus, wait_for
from s3 import MotoServer
from stack_factory import shared_client_fixture, shared_stack  # noqa: F401  (client fixture)

import elanus.importroots as importroots
from elanus import objstore
from elanus.client.client import Client
from elanus.client.upload import import_with_uploads, is_loopback
from elanus.errors import ElanusError
from elanus.importroots import confine, import_roots, open_confined, safe_upload_name
from elanus.meta.importfiles import collect_garbage
from elanus.schema import DataType, Schema
from elanus.settings import Settings

pytestmark = pytest.mark.timeout(120)

DIM = 4
MARKER = "SECRET-MARKER-7f3a"
PUT_LIMIT = 200_000
CSV_OK = "id,title,vector\n" + "".join(f'{i},t{i},"[{i},0,0,1]"\n' for i in range(20))


shared = shared_stack("confine", max_put_bytes=PUT_LIMIT)


@pytest.fixture(scope="module")
def root(shared: Stack) -> Path:
    """The first import root (``<data_dir>/import``), made by the proxy at start."""
    first = import_roots(shared.settings)[0]
    assert first == Path(os.path.realpath(shared.settings.data_path / "import"))
    assert first.is_dir() and Path(importroots.upload_area(shared.settings)).is_dir()
    return first


def schema(dynamic: bool = False, varchar_pk: bool = False) -> Schema:
    s = Schema(enable_dynamic_field=dynamic)
    if varchar_pk:
        s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    else:
        s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("title", DataType.VARCHAR, max_length=16)
    return s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)


def create(client: Client, name: str, **kw: Any) -> str:
    if not client.has_collection(name):
        client.create_collection(name, schema=schema(**kw), properties={"metric_type": "L2"})
        client.load_collection(name)
    return name


def count(client: Client, name: str) -> int:
    (row,) = client.query(name, "", ["count(*)"], consistency_level="Strong")
    return int(row["count(*)"])


def outside_secret(tmp_path: Path) -> Path:
    """A file outside every root whose content must never come back."""
    secret = tmp_path / "secret.csv"
    secret.write_text(f"{MARKER},{MARKER}\n{MARKER},1\n")
    return secret


def everything_said(client: Client, job_id: int | None = None) -> str:
    said = json.dumps(client.list_import_jobs())
    if job_id is not None:
        said += json.dumps(client.get_import_state(job_id))
    return said


# -- the path check itself --------------------------------------------------------------------
def test_confine_resolves_and_refuses(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    inside = root / "sub" / "ok.csv"
    inside.write_text(CSV_OK)
    secret = outside_secret(tmp_path)
    (root / "out.csv").symlink_to(secret)
    (root / "in.csv").symlink_to(inside)
    (root / "zero.csv").symlink_to("/dev/zero")
    (root / "dir.csv").mkdir()
    os.mkfifo(root / "pipe.csv")
    roots = [Path(os.path.realpath(root))]
    real = roots[0] / "sub" / "ok.csv"

    assert confine(str(inside), roots) == real
    assert confine("sub/ok.csv", roots) == real  # relative: under the first root
    assert confine(str(root / "sub" / ".." / "sub" / "ok.csv"), roots) == real
    assert confine(str(root / "in.csv"), roots) == real  # symlink inside -> inside
    refusals = {
        str(root / ".." / "secret.csv"): "is outside the import roots",
        "../secret.csv": "is outside the import roots",
        "/tmp/../etc/passwd.csv": "is outside the import roots",
        str(secret): "is outside the import roots",
        str(root / "out.csv"): "is outside the import roots",
        str(root / "zero.csv"): "is outside the import roots",
        "/dev/zero": "is outside the import roots",
        str(root / "dir.csv"): "is a directory",
        str(root / "pipe.csv"): "is a fifo",
        str(root / "absent.csv"): "does not exist under the import roots",
        "": "is not a usable file path",
    }
    for requested, why in refusals.items():
        with pytest.raises(ElanusError) as err:
            confine(requested, roots)
        assert err.value.code == "PATH_NOT_ALLOWED"
        assert err.value.message.startswith(f"path {requested!r} {why}")
    # a device inside a root is refused for what it is, not read
    with pytest.raises(ElanusError, match="is a device"):
        confine("/dev/zero", [Path("/dev")])


def test_open_refuses_a_file_swapped_after_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open does not follow a symlink put in place after the check, nor a directory
    swapped for a symlink out of the roots (the opened descriptor's path is checked)."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    target = root / "sub" / "f.csv"
    target.write_text(CSV_OK)
    roots = [Path(os.path.realpath(root))]
    with open_confined(target, roots) as handle:
        assert handle.read() == CSV_OK.encode()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.csv").write_text(MARKER)
    real_confine = importroots.confine

    def swap_file(requested: str, r: list[Path]) -> Path:
        checked = real_confine(requested, r)
        target.unlink()
        target.symlink_to(elsewhere / "f.csv")
        return checked

    monkeypatch.setattr(importroots, "confine", swap_file)
    with pytest.raises(ElanusError, match="changed while it was checked") as err:
        open_confined(target, roots)
    assert err.value.code == "PATH_NOT_ALLOWED"

    target.unlink()
    target.write_text(CSV_OK)

    def swap_dir(requested: str, r: list[Path]) -> Path:
        checked = real_confine(requested, r)
        (root / "sub").rename(root / "old")
        (root / "sub").symlink_to(elsewhere)
        return checked

    monkeypatch.setattr(importroots, "confine", swap_dir)
    with pytest.raises(ElanusError, match="is outside the import roots"):
        open_confined(target, roots)


def test_upload_names_are_sanitised() -> None:
    assert safe_upload_name("../../etc/passwd.csv") == "passwd.csv"
    assert safe_upload_name("..\\..\\x y;rm.parquet") == "x_y_rm.parquet"
    assert safe_upload_name(".hidden.jsonl") == "hidden.jsonl"
    long = safe_upload_name("a" * 500 + ".csv")
    assert len(long) == importroots.MAX_NAME_CHARS and long.endswith(".csv")
    for bad in ("..", "/", "...", ""):
        with pytest.raises(ElanusError):
            safe_upload_name(bad)


def test_configured_roots_and_the_upload_area(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path / "d"), import_roots=f" {tmp_path}/a , {tmp_path}/b")
    roots = import_roots(settings)
    real = Path(os.path.realpath(tmp_path))
    area = Path(os.path.realpath(settings.storage_path / "import" / "uploads"))
    assert roots == [real / "a", real / "b", area]  # uploads stay importable
    assert import_roots(Settings(data_dir=str(tmp_path / "d"))) == [
        Path(os.path.realpath(tmp_path / "d" / "import")),
        Path(os.path.realpath(tmp_path / "d" / "storage" / "import")),
    ]


def test_object_store_locations_are_confined_as_text(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    """With S3 storage, ``<storage>/import`` is a root (the upload area lies in it): a
    location there is an object to open; anything else, a prefix, a missing object, or a
    location with empty, ``.`` or ``..`` parts is refused."""
    settings = Settings(
        data_dir=str(tmp_path / "d"), **moto_server.settings(moto_server.new_bucket())
    )
    objstore.configure(settings)
    storage = settings.storage_uri
    roots = import_roots(settings)
    assert roots == [Path(os.path.realpath(tmp_path / "d" / "import")), storage + "/import"]
    inside = importroots.upload_area(settings) + "/u1/ok.csv"
    objstore.write_bytes(inside, CSV_OK.encode())
    objstore.write_bytes(storage + "/other/secret.csv", MARKER.encode())
    assert confine(inside, roots) == inside
    with open_confined(inside, roots) as handle:
        assert handle.read() == CSV_OK.encode()
    refusals = {
        storage + "/other/secret.csv": "is outside the import roots",
        storage + "/importx/a.csv": "is outside the import roots",
        "s3://another-bucket/elanus/import/a.csv": "is outside the import roots",
        storage + "/import/../other/secret.csv": "is not a usable file path",
        storage + "/import/uploads//u1/ok.csv": "is not a usable file path",
        storage + "/import/uploads/u1": "is a directory",
        storage + "/import/uploads/u1/absent.csv": "does not exist under the import roots",
    }
    for requested, why in refusals.items():
        with pytest.raises(ElanusError) as err:
            open_confined(requested, roots)
        assert err.value.code == "PATH_NOT_ALLOWED"
        assert err.value.message.startswith(f"path {requested!r} {why}")
        assert MARKER not in err.value.message


# -- refused at request time: no job, nothing read --------------------------------------------
def test_paths_outside_the_roots_are_refused_before_any_job(
    shared: Stack, client: Client, root: Path, tmp_path: Path
) -> None:
    name = create(client, "refused")
    secret = outside_secret(tmp_path)
    (root / "link-out.csv").unlink(missing_ok=True)
    (root / "link-out.csv").symlink_to(secret)
    (root / "zero-link.csv").unlink(missing_ok=True)
    (root / "zero-link.csv").symlink_to("/dev/zero")
    (root / "a-dir.csv").mkdir(exist_ok=True)
    fifo = root / "a-fifo.csv"
    if not fifo.exists():
        os.mkfifo(fifo)
    before = len(client.list_import_jobs())
    cases = {
        str(root / ".." / ".." / secret.relative_to(secret.anchor)): "outside",
        str(root / ".." / "catalog.duckdb.csv"): "outside",
        "/tmp/../etc/passwd.csv": "outside",
        "link-out.csv": "outside",
        str(root / "zero-link.csv"): "outside",
        "/dev/zero": "unknown file type",  # refused by name before any path check
        "a-dir.csv": "is a directory",
        "a-fifo.csv": "is a fifo",
    }
    for requested, words in cases.items():
        started = time.monotonic()
        with pytest.raises(ElanusError, match=words) as err:
            client.bulk_import(name, [requested], upload=False)
        assert time.monotonic() - started < 10  # a fifo or a device is never waited on
        assert MARKER not in str(err.value)
    assert len(client.list_import_jobs()) == before
    assert MARKER not in everything_said(client)


def test_a_symlink_inside_the_roots_and_a_relative_path_import(client: Client, root: Path) -> None:
    name = create(client, "inside")
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "rows.csv").write_text(CSV_OK)
    (root / "alias.csv").unlink(missing_ok=True)
    (root / "alias.csv").symlink_to(root / "data" / "rows.csv")
    client.wait_import(client.bulk_import(name, ["alias.csv"], upload=False), timeout=60)
    assert count(client, name) == 20
    more = "".join(f'{i},t{i},"[{i},0,0,1]"\n' for i in range(100, 110))
    (root / "data" / "more.csv").write_text("id,title,vector\n" + more)
    job = client.wait_import(client.bulk_import(name, ["data/more.csv"]), timeout=60)
    assert job["files"] == [str(root / "data" / "more.csv")]  # read in place, not uploaded
    assert count(client, name) == 30


def test_a_file_swapped_for_a_symlink_before_the_data_node_opens_it_is_refused(
    stack: Stack, tmp_path: Path
) -> None:
    client = stack.client()
    create(client, "swapped")
    root = import_roots(stack.settings)[0]
    target = root / "later.csv"
    target.write_text(CSV_OK)
    node = stack.datanodes.pop()
    stack.call(node.stop())  # the job waits (Pending) with its path checked
    job = client.bulk_import("swapped", [str(target)], upload=False)
    assert client.get_import_state(job)["state"] == "Pending"
    target.unlink()
    target.symlink_to(outside_secret(tmp_path))
    stack.add_datanode()
    wait_for(lambda: client.get_import_state(job)["state"] == "Failed", 30, "the job to fail")
    state = client.get_import_state(job)
    assert state["reason_code"] == "PATH_NOT_ALLOWED", state
    assert state["reason"].endswith(f"path {str(target)!r} is outside the import roots")
    assert MARKER not in everything_said(client, job)
    assert count(client, "swapped") == 0


# -- no file content in any error ---------------------------------------------------------
def _bad_files(d: Path) -> dict[str, tuple[str, str]]:
    """name -> (collection kind, file) with MARKER somewhere the readers would quote it."""
    d.mkdir(exist_ok=True)
    m = MARKER

    def write(name: str, text: str) -> str:
        (d / name).write_text(text)
        return str(d / name)

    extra = pa.table({"id": [1], "title": ["t"], "vector": [[0.0] * DIM], m: [1]})
    pq.write_table(extra, d / "extra.parquet")
    nested = pa.table({"id": [1], "title": [{m: 1}], "vector": [[0.0] * DIM]})
    pq.write_table(nested, d / "nested.parquet")
    (d / "npy").mkdir(exist_ok=True)
    (d / "npy" / "vector.npy").write_bytes(b"\x93NUMPY\x01\x00\x20\x00{'descr': '" + m.encode())
    (d / "rec").mkdir(exist_ok=True)
    np.save(d / "rec" / "id.npy", np.zeros(2, dtype=[(m, "i4")]))  # field names in the header
    return {
        "csv header": ("int", write("header.csv", f'{m},title,vector\n1,t,"[0,0,0,0]"\n')),
        "csv int value": ("int", write("int.csv", f'id,title,vector\n{m},t,"[0,0,0,0]"\n')),
        "csv columns": ("int", write("cols.csv", f'id,title,vector\n1,t,"[0,0,0,0]",{m}\n')),
        "csv vector": ("int", write("vec.csv", f'id,title,vector\n1,t,"[0,{m},0,0]"\n')),
        "csv long varchar": ("int", write("long.csv", f'id,title,vector\n1,{m * 3},"[0,0,0,0]"\n')),
        "jsonl line": ("int", write("bad.jsonl", f'{{"id": 1}}\n{m}\n')),
        "jsonl types": (
            "int",
            write("types.jsonl", f'{{"id": 1, "{m}": 1}}\n{{"id": 2, "{m}": "x"}}\n'),
        ),
        "jsonl meta key": (
            "dynamic",
            write(
                "meta.jsonl", f'{{"id": 1, "title": "t", "vector": [0,0,0,0], "$meta": "{m}"}}\n'
            ),
        ),
        "parquet garbage": ("int", write("garbage.parquet", m * 10)),
        "parquet column": ("int", str(d / "extra.parquet")),
        "parquet struct": ("int", str(d / "nested.parquet")),
        "npy header": ("int", str(d / "npy" / "vector.npy")),
        "npy record dtype": ("int", str(d / "rec" / "id.npy")),
        "duplicate varchar keys": (
            "varchar",
            write("dup.csv", f'id,title,vector\n{m},t,"[0,0,0,0]"\n{m},t,"[0,0,0,0]"\n'),
        ),
    }


def test_no_error_or_job_state_quotes_a_file(client: Client, root: Path) -> None:
    collections = {
        "int": create(client, "plain"),
        "dynamic": create(client, "dyn", dynamic=True),
        "varchar": create(client, "vkeys", varchar_pk=True),
    }
    files = _bad_files(root / "bad")
    reasons = {}
    for case, (kind, path) in files.items():
        try:
            job = client.bulk_import(collections[kind], [path], upload=False)
        except ElanusError as exc:  # refused up front (a .npy alone is a set of one field)
            reasons[case] = str(exc)
            continue
        with pytest.raises(ElanusError) as err:
            client.wait_import(job, timeout=60)
        reasons[case] = str(err.value) + everything_said(client, job)
        assert Path(path).name in str(err.value), (case, str(err.value))
    for case, said in reasons.items():
        assert MARKER not in said, (case, said)
        assert MARKER[:10] not in said, (case, said)
    assert "column(s) #3" in reasons["parquet column"]
    assert "a row has 4 columns where the header has 3" in reasons["csv columns"]
    assert "cannot be read as int64" in reasons["csv int value"]
    assert "duplicate primary key" in reasons["duplicate varchar keys"]
    for name in set(collections.values()):
        assert count(client, name) == 0


# -- uploads ------------------------------------------------------------------------------
def write_rows(path: Path, ids: range) -> Path:
    vec = np.random.default_rng(1).random((len(ids), DIM), dtype=np.float32)
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "title": [f"u{i}" for i in ids],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), DIM),
        }
    )
    pq.write_table(table, path)
    return path


def test_a_local_file_outside_the_roots_is_uploaded_and_imported(
    shared: Stack, client: Client, tmp_path: Path
) -> None:
    name = create(client, "uploaded")
    area = Path(importroots.upload_area(shared.settings))
    local = write_rows(tmp_path / "local rows.parquet", range(300))
    job = client.wait_import(client.bulk_import(name, [local]), timeout=60)
    assert job["rows"] == 300 and count(client, name) == 300
    (path,) = job["files"]
    assert Path(path).parent.parent == Path(os.path.realpath(area))
    assert Path(path).name == "local_rows.parquet"
    # the upload goes when its job ends
    wait_for(lambda: not Path(path).parent.exists(), 10, "the upload to be removed")
    # explicit upload, and a numpy set (names kept: they name the fields)
    npy = tmp_path / "set"
    npy.mkdir()
    np.save(npy / "id.npy", np.arange(1000, 1040, dtype=np.int64))
    np.save(npy / "title.npy", np.array([f"n{i}" for i in range(40)]))
    np.save(npy / "vector.npy", np.ones((40, DIM), dtype=np.float32))
    files = [[str(npy / f) for f in ("id.npy", "title.npy", "vector.npy")]]
    client.wait_import(client.bulk_import(name, files, upload=True), timeout=60)
    assert count(client, name) == 340
    wait_for(lambda: not any(area.iterdir()), 10, "the uploads to be removed")


def test_a_failed_job_removes_its_upload_and_a_big_upload_is_refused(
    shared: Stack, client: Client, tmp_path: Path
) -> None:
    name = create(client, "upload_limits")
    area = Path(importroots.upload_area(shared.settings))
    bad = tmp_path / "bad.csv"
    bad.write_text(f'id,title,vector\n{MARKER},t,"[0,0,0,0]"\n')
    job = client.bulk_import(name, [bad])
    with pytest.raises(ElanusError) as err:
        client.wait_import(job, timeout=60)
    assert MARKER not in str(err.value) + everything_said(client, job)
    wait_for(lambda: not any(area.iterdir()), 10, "the failed job's upload to be removed")

    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * (PUT_LIMIT + 1))
    with pytest.raises(ElanusError, match="max_put_bytes") as err:
        client.upload_file(name, big)
    assert err.value.code == "REQUEST_TOO_LARGE"
    assert not any(area.iterdir())  # nothing half-written is left behind
    with pytest.raises(ElanusError, match="unknown file type"):
        client.upload_file(name, outside_secret(tmp_path).rename(tmp_path / "s.txt"))
    with pytest.raises(ElanusError) as err:
        client.upload_file("no_such_collection", write_rows(tmp_path / "x.parquet", range(3)))
    assert err.value.code == "COLLECTION_NOT_FOUND"


def test_a_bare_flight_upload(shared: Stack, client: Client, tmp_path: Path) -> None:
    """What any Flight client does: DoPut op 'upload', binary batches, JSON answer."""
    name = create(client, "bare_upload")
    data = CSV_OK.encode()
    conn = flight.FlightClient(shared.uri)
    command = {"op": "upload", "collection": name, "name": "../../../evil name.csv"}
    descriptor = flight.FlightDescriptor.for_command(json.dumps(command).encode())
    schema = pa.schema([("chunk", pa.binary())])
    writer, reader = conn.do_put(descriptor, schema)
    for start in range(0, len(data), 100):
        writer.write_batch(pa.record_batch([pa.array([data[start : start + 100]])], schema=schema))
    writer.done_writing()
    answer = json.loads(reader.read().to_pybytes())
    writer.close()
    area = Path(os.path.realpath(importroots.upload_area(shared.settings)))
    assert Path(answer["path"]) == area / answer["upload_id"] / "evil_name.csv"
    assert answer["bytes"] == len(data) and Path(answer["path"]).read_bytes() == data
    client.wait_import(client.bulk_import(name, [answer["path"]], upload=False), timeout=60)
    assert count(client, name) == 20

    wrong = pa.schema([("chunk", pa.string())])
    writer, reader = conn.do_put(descriptor, wrong)
    with pytest.raises(flight.FlightError, match=r"\[INVALID_ARGUMENT\].*one binary column"):
        try:
            writer.write_batch(pa.record_batch([pa.array(["text"])], schema=wrong))
            writer.done_writing()
            reader.read()
        finally:
            writer.close()
    conn.close()
    assert not any(area.iterdir())  # the refused stream left nothing


def test_an_upload_two_jobs_read_stays_until_both_end(stack: Stack, tmp_path: Path) -> None:
    client = stack.client()
    create(client, "twice")
    node = stack.datanodes.pop()
    stack.call(node.stop())  # both jobs wait, then run on one node
    path = client.upload_file("twice", write_rows(tmp_path / "t.parquet", range(30)))
    jobs = [client.bulk_import("twice", [path], upload=False) for _ in range(2)]
    stack.add_datanode()
    for job in jobs:
        client.wait_import(job, timeout=60)
    assert count(client, "twice") == 60  # imports do not deduplicate across jobs
    wait_for(lambda: not Path(path).parent.exists(), 10, "the upload to be removed")


def test_uploads_no_job_took_expire(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path / "d"))
    area = Path(importroots.upload_area(settings))
    old, fresh, busy = (area / n for n in ("old", "fresh", "busy"))
    for d in (old, fresh, busy):
        d.mkdir(parents=True)
        (d / "f.csv").write_text("x")
    hour_ago = time.time() - 3600
    for d in (old, busy):
        os.utime(d / "f.csv", (hour_ago, hour_ago))
        os.utime(d, (hour_ago, hour_ago))
    removed = collect_garbage(settings, 1.0, set(), lambda _: True, {str(busy)})
    assert removed == [str(old)] and fresh.exists() and busy.exists()


def test_upload_is_chosen_when_the_server_cannot_read_the_file(tmp_path: Path) -> None:
    assert is_loopback("grpc://127.0.0.1:1") and is_loopback("grpc://localhost:1")
    assert is_loopback("grpc://[::1]:1") and is_loopback("grpc+unix:///tmp/s")
    assert not is_loopback("grpc://10.1.2.3:1") and not is_loopback("grpc+tls://db.example:1")
    local = tmp_path / "a.csv"
    local.write_text("x")
    calls: list[Any] = []

    def start(entries: list[Any]) -> int:
        calls.append(("start", entries))
        if entries == [str(local)]:
            raise ElanusError("PATH_NOT_ALLOWED", "outside")
        return 7

    def send(path: str) -> str:
        calls.append(("send", path))
        return "/srv/uploads/1/a.csv"

    assert import_with_uploads([str(local)], start, send, upload_mode=None, loopback=True) == 7
    assert [c[0] for c in calls] == ["start", "send", "start"]
    calls.clear()
    import_with_uploads([str(local)], start, send, upload_mode=None, loopback=False)
    assert calls == [("send", str(local)), ("start", ["/srv/uploads/1/a.csv"])]
    calls.clear()
    import_with_uploads(["server/side.csv"], start, send, upload_mode=None, loopback=False)
    assert calls == [("start", ["server/side.csv"])]  # not a local file: the server's path


# -- the CLI -------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_import_uploads_and_never_echoes_content(
    server: StandaloneProcess, tmp_path: Path
) -> None:
    with Client(server.uri) as c:
        c.create_collection("cli_up", schema=schema(), properties={"metric_type": "L2"})
    good = write_rows(tmp_path / "good.parquet", range(50))
    done = cli_json(server, "import", "cli_up", str(good), "--upload")
    assert done["state"] == "Completed" and done["rows"] == 50
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{MARKER},b\n1,2\n")
    result = run_elanus("import", "cli_up", str(bad), "--uri", server.uri)
    assert result.returncode == 1 and "bad.csv" in result.stderr, result.stderr
    assert MARKER not in result.stdout + result.stderr
    listed = run_elanus("import-jobs", "cli_up", "--json", "--uri", server.uri)
    assert MARKER not in listed.stdout and "bad.csv" in listed.stdout
    refused = run_elanus("import", "cli_up", "/etc/hostname.csv", "--uri", server.uri)
    assert refused.returncode == 2  # not a local file: a usage error, nothing sent


def test_concurrent_uploads_do_not_mix(shared: Stack, client: Client, tmp_path: Path) -> None:
    name = create(client, "parallel")
    (tmp_path / "other").mkdir()
    files = [  # the same base name: each upload has its own directory
        write_rows(tmp_path / "same.parquet", range(0, 100)),
        write_rows(tmp_path / "other" / "same.parquet", range(100, 200)),
    ]
    errors: list[BaseException] = []

    def run(path: Path) -> None:
        try:
            client.wait_import(client.bulk_import(name, [path]), timeout=60)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,)) for p in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and count(client, name) == 200
