"""A backup's files: the catalog as it stood at the backup's timestamp, the segment and
index files it references, the manifest; and the offline side (``list_backups``,
``restore``). The coord's ``meta/backup.py`` takes the backup; nothing here needs a server.

A backup is a directory (a prefix on S3)::

    <target>/<name>/manifest.json        written last: a backup without one is incomplete
    <target>/<name>/catalog.duckdb       the coord's catalog at the backup's timestamp
    <target>/<name>/storage/collections/...   the segments it references (elanus/layout.py)
    <target>/<name>/storage/indexes/...       their finished index files

The catalog keeps paths relative to the storage root (``layout.relative``), so the copy
is served from wherever it is restored.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import posixpath
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import lance
import pyarrow as pa
import pyarrow.compute as pc

import elanus
from elanus import layout, objstore
from elanus.channels.dml import pchannel_name
from elanus.errors import ElanusError, invalid
from elanus.meta.db import migrate
from elanus.schema import TIMESTAMP_FIELD
from elanus.settings import Settings
from elanus.states import ImportJobState, IndexTaskState, SegmentState

FORMAT = 1
MANIFEST = "manifest.json"
CATALOG = "catalog.duckdb"
STORAGE = "storage"
COPY_THREADS = 4
CHUNK = 8 << 20

# Tables that describe the source cluster's processes and streams, not its data: a
# restored copy starts with fresh streams and nodes. ``query_loads`` stays (which
# collections were loaded, not where): a restored server loads them again.
NODE_TABLES = (
    "channel_checkpoints", "channel_watch", "query_replicas", "query_distribution",
    "query_channels",
)  # fmt: skip


@dataclass
class Contents:
    """What a catalog at ``ts`` references: segment and index directories (relative to the
    storage root) and a summary per collection."""

    ts: int
    segments: list[str] = field(default_factory=list)
    indexes: dict[int, str] = field(default_factory=dict)
    """build id -> the directory of its finished build."""
    partial: dict[str, int] = field(default_factory=dict)
    """Segment directory -> id, of segments whose rows after ``ts`` are left out."""
    collections: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Copied:
    files: int = 0
    bytes: int = 0
    missing_indexes: list[int] = field(default_factory=list)
    trimmed: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Partial segment -> (rows kept, their largest timestamp)."""


# -- the catalog at the backup's timestamp -------------------------------------------------


def snapshot(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Copy the whole catalog into a new DuckDB file (on the database thread: one
    consistent state, between two catalog changes)."""
    db = con.execute("SELECT current_database()").fetchone()
    quoted = path.replace("'", "''")
    con.execute(f"ATTACH '{quoted}' AS elanus_backup")
    try:
        con.execute(f'COPY FROM DATABASE "{db[0] if db else "main"}" TO elanus_backup')
    finally:
        con.execute("DETACH elanus_backup")


def as_of(path: str, ts: int, upper: int | None = None) -> Contents:
    """Turn a catalog snapshot into the catalog as it stood at ``ts``: objects created later
    go, objects dropped later come back, and only segments live at ``ts`` with rows at or
    before it stay (compaction sources swapped out later included, targets made later left
    out). A segment sealed after ``ts`` (at most at ``upper``) holding rows of ``ts`` and
    earlier (a write stamped before the seal, placed after it) stays *partial*: its copy
    keeps only those rows. Stream positions and node assignments are cleared."""
    upper = ts if upper is None else upper
    con = duckdb.connect(path)
    try:
        con.execute("BEGIN TRANSACTION")
        for table in ("databases", "collections", "partitions"):
            con.execute(f"DELETE FROM {table} WHERE created_ts > ?", [ts])
            con.execute(f"UPDATE {table} SET dropped_ts = NULL WHERE dropped_ts > ?", [ts])
        orphan = "collection_id NOT IN (SELECT collection_id FROM collections)"
        for table in ("aliases", "indexes"):
            con.execute(f"DELETE FROM {table} WHERE created_ts > ? OR {orphan}", [ts])
        for table in ("vchannels", "partitions"):
            con.execute(f"DELETE FROM {table} WHERE {orphan}")
        flushed, dropped = SegmentState.FLUSHED.value, SegmentState.DROPPED.value
        con.execute(
            "DELETE FROM segments WHERE NOT coalesce("
            "path IS NOT NULL AND seal_ts IS NOT NULL AND state IN (?, ?) "
            "AND (seal_ts <= ? OR (seal_ts <= ? AND coalesce(min_ts, seal_ts) <= ?)) "
            "AND (dropped_ts IS NULL OR dropped_ts > ?) "
            "AND (coalesce(compacted_from, '[]') = '[]' OR created_ts <= ?) "
            "AND partition_id IN (SELECT partition_id FROM partitions), false)",
            [flushed, dropped, ts, upper, ts, ts, ts],
        )
        con.execute(
            "UPDATE segments SET state = ?, dropped_ts = NULL, start_seq = NULL, "
            "checkpoint_seq = NULL, checkpoint_ts = NULL",
            [flushed],
        )
        for table in NODE_TABLES:
            con.execute(f"DELETE FROM {table}")
        _loads_as_of(con)
        _index_tasks_as_of(con)
        _import_jobs_as_of(con, ts)
        con.execute("COMMIT")
        return _contents(con, ts)
    finally:
        con.close()


def _loads_as_of(con: duckdb.DuckDBPyConnection) -> None:
    """The loads of collections (and partitions) that exist at the backup's timestamp."""
    live = {int(p) for (p,) in con.execute("SELECT partition_id FROM partitions").fetchall()}
    loads = con.execute("SELECT collection_id, partitions FROM query_loads").fetchall()
    for cid, parts in loads:
        wanted = json.loads(parts) if parts else []  # none named: the whole collection
        kept = [p for p in wanted if p in live]
        if kept == wanted:
            continue
        if kept:
            con.execute(
                "UPDATE query_loads SET partitions = ? WHERE collection_id = ?",
                [json.dumps(kept), cid],
            )
        else:
            con.execute("DELETE FROM query_loads WHERE collection_id = ?", [cid])
    con.execute(
        "DELETE FROM query_loads WHERE collection_id NOT IN "
        "(SELECT collection_id FROM collections WHERE dropped_ts IS NULL)"
    )


def _index_tasks_as_of(con: duckdb.DuckDBPyConnection) -> None:
    """Tasks of the segments and indexes kept; unfinished ones are built again."""
    con.execute(
        "DELETE FROM index_tasks WHERE segment_id NOT IN (SELECT segment_id FROM segments) "
        "OR index_id NOT IN (SELECT index_id FROM indexes WHERE NOT deleted)"
    )
    con.execute("UPDATE index_tasks SET mark_deleted = false")
    reset_index_tasks(con, state_not=IndexTaskState.FINISHED.value)


def rebase_index_paths(con: duckdb.DuckDBPyConnection, change: Callable[[str], str]) -> None:
    """Index tasks keep locations (the segment's data, the files built): ``change`` moves
    them, below the backup's storage (relative) and then below the restored root."""
    rows = con.execute("SELECT build_id, data_path, file_paths FROM index_tasks").fetchall()
    moved = [
        [change(d), json.dumps([change(f) for f in json.loads(fs or "[]")]), b] for b, d, fs in rows
    ]
    if moved:
        con.executemany(
            "UPDATE index_tasks SET data_path = ?, file_paths = ? WHERE build_id = ?", moved
        )


def below(root: str) -> Callable[[str], str]:
    """A location under ``root`` as a path relative to it (others kept as they are)."""
    prefix = root.rstrip("/") + "/"
    return lambda loc: loc[len(prefix) :] if loc.startswith(prefix) else loc


def reset_index_tasks(
    con: duckdb.DuckDBPyConnection,
    *,
    state_not: str | None = None,
    builds: list[int] | None = None,
    segments: list[int] | None = None,
) -> None:
    """Tasks to build again under a new version: those not in ``state_not`` (unfinished),
    the ``builds`` whose files are gone, those of ``segments`` whose rows were trimmed."""
    params: list[Any]
    if state_not is not None:
        where, params = "state <> ?", [state_not]
    elif builds:
        where, params = "list_contains(?, build_id)", [builds]
    elif segments:
        where, params = "list_contains(?, segment_id)", [segments]
    else:
        return
    con.execute(
        "UPDATE index_tasks SET state = ?, node_id = NULL, version = version + 1, "
        f"file_paths = '[]', fail_reason = NULL, recycled = false WHERE {where}",
        [IndexTaskState.UNISSUED.value, *params],
    )


def record_trimmed(con: duckdb.DuckDBPyConnection, trimmed: dict[int, tuple[int, int]]) -> int:
    """Partial segments as copied: their rows and largest timestamp, their indexes to build
    again; those left with no row go. Returns how many went."""
    empty = [sid for sid, (rows, _) in trimmed.items() if rows == 0]
    kept = [[rows, max_ts, sid] for sid, (rows, max_ts) in trimmed.items() if rows]
    if kept:
        con.executemany("UPDATE segments SET num_rows = ?, max_ts = ? WHERE segment_id = ?", kept)
        reset_index_tasks(con, segments=[k[2] for k in kept])
    if empty:
        con.execute("DELETE FROM segments WHERE list_contains(?, segment_id)", [empty])
        con.execute("DELETE FROM index_tasks WHERE list_contains(?, segment_id)", [empty])
    return len(empty)


def _import_jobs_as_of(con: duckdb.DuckDBPyConnection, ts: int) -> None:
    con.execute("DELETE FROM import_jobs WHERE created_ts > ?", [ts])
    final = [ImportJobState.COMPLETED.value, ImportJobState.FAILED.value]
    reason = "the job was still running when the backup was taken"
    con.execute(
        "UPDATE import_jobs SET state = ?, reason = ? WHERE state NOT IN (?, ?)",
        [ImportJobState.FAILED.value, reason, *final],
    )


def _contents(con: duckdb.DuckDBPyConnection, ts: int) -> Contents:
    out = Contents(ts)
    segs = con.execute(
        "SELECT path, segment_id, seal_ts, coalesce(max_ts, seal_ts) FROM segments "
        "ORDER BY segment_id"
    )
    for path, sid, seal_ts, max_ts in segs.fetchall():
        rel = layout.parent(layout.relative(path) or "")
        out.segments.append(rel)
        if seal_ts > ts and max_ts > ts:
            out.partial[rel] = int(sid)
    tasks = con.execute(
        "SELECT build_id, version, partition_id, segment_id FROM index_tasks WHERE state = ?",
        [IndexTaskState.FINISHED.value],
    ).fetchall()
    partial = set(out.partial.values())  # built over rows the copy does not keep
    out.indexes = {
        int(b): layout.index_dir("", b, v, p, s).lstrip("/")
        for b, v, p, s in tasks
        if s not in partial
    }
    out.collections = summary(con)
    return out


def summary(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Each live collection of a catalog: database, name, id, segments, rows, and whether
    it was loaded (a restore loads it again)."""
    rows = con.execute(
        "SELECT d.name, c.name, c.collection_id, count(s.segment_id), "
        "coalesce(sum(s.num_rows), 0), "
        "c.collection_id IN (SELECT collection_id FROM query_loads) "
        "FROM collections c JOIN databases d USING (db_id) "
        "LEFT JOIN segments s USING (collection_id) WHERE c.dropped_ts IS NULL "
        "GROUP BY ALL ORDER BY c.collection_id"
    ).fetchall()
    return [
        {
            "db": d,
            "name": n,
            "collection_id": int(c),
            "segments": int(k),
            "rows": int(r),
            "loaded": bool(loaded),
        }
        for d, n, c, k, r, loaded in rows
    ]


# -- copying files ---------------------------------------------------------------------------


def copy_file(src: str, dst: str) -> int:
    """One file from a location to another (local or S3 either side), streamed."""
    s, d = objstore.storage_of(src), objstore.storage_of(dst)
    if not d.remote:
        Path(dst).parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with (
        objstore.storage_errors(src, "read"),
        s.fs.open_input_file(s.fs_path(src)) as f,  # one ranged GET per read, not 256 KiB
        objstore.storage_errors(dst, "write"),
        d.fs.open_output_stream(d.fs_path(dst)) as out,
    ):
        while chunk := f.read(CHUNK):
            out.write(chunk)
            n += len(chunk)
    return n


def _copy_delta(src: str, dst: str, ts: int) -> int:
    """A delta log with only the deletes at or before ``ts`` (none left: not written)."""
    table = objstore.read_ipc(src)
    kept = table.filter(pc.less_equal(table.column("ts"), pa.scalar(ts, pa.uint64())))
    if kept.num_rows == table.num_rows:
        return copy_file(src, dst)
    if kept.num_rows:
        objstore.write_ipc(dst, kept)
    return 0


def _trim_rows(src_dir: str, dst_dir: str, ts: int) -> tuple[int, int, int]:
    """A partial segment's rows at or before ``ts`` written as its copy's dataset: their
    number, their largest timestamp, an estimate of their bytes (none left: nothing)."""
    src, dst = layout.data_path(src_dir), layout.data_path(dst_dir)
    with objstore.storage_errors(src, "read"):
        table = lance.dataset(src, storage_options=objstore.lance_options(src)).to_table()
    stamps = table.column(TIMESTAMP_FIELD)
    table = table.filter(pc.less_equal(stamps, pa.scalar(ts, stamps.type)))
    if not table.num_rows:
        return 0, 0, 0
    objstore.make_dirs(dst_dir)
    with objstore.storage_errors(dst, "write"):
        lance.write_dataset(table, dst, storage_options=objstore.lance_options(dst))
    return table.num_rows, int(pc.max(table.column(TIMESTAMP_FIELD)).as_py()), table.nbytes


def copy_contents(contents: Contents, root: str, dest: str) -> Copied:
    """Every file of ``contents`` from the storage ``root`` to ``dest`` (the backup's
    ``storage/``), several at once; delta logs keep only deletes up to the timestamp, a
    partial segment's dataset only its rows up to it (``Copied.trimmed``). An index whose
    files went meanwhile (its build was recycled) is left out and noted: the restored copy
    builds it again."""
    jobs: list[tuple[str, str, int]] = []  # (path below the root, kind, segment or build id)
    for rel in contents.segments:
        partial = contents.partial.get(rel)
        for name in objstore.list_tree(layout.join(root, rel)):
            if partial is None or not name.startswith("data.lance/"):
                jobs.append((layout.join(rel, name), "file", 0))
        if partial is not None:
            jobs.append((rel, "trim", partial))
    copied = Copied()
    for build_id, rel in contents.indexes.items():
        names = objstore.list_tree(layout.join(root, rel))
        if not names:
            copied.missing_indexes.append(build_id)
        jobs += [(layout.join(rel, n), "index", build_id) for n in names]

    def one(job: tuple[str, str, int]) -> int | None:
        rel, kind, ref = job
        src, dst = layout.join(root, rel), layout.join(dest, rel)
        if kind == "trim":
            rows, max_ts, size = _trim_rows(src, dst, contents.ts)
            copied.trimmed[ref] = (rows, max_ts)
            return size
        if kind == "index":
            try:
                return copy_file(src, dst)
            except ElanusError:
                return None
        delta = rel.rpartition("/")[0].endswith("/delta") and rel.endswith(".arrow")
        return _copy_delta(src, dst, contents.ts) if delta else copy_file(src, dst)

    with concurrent.futures.ThreadPoolExecutor(COPY_THREADS, "elanus-backup") as pool:
        for job, size in zip(jobs, pool.map(one, jobs), strict=True):
            if size is None:
                copied.missing_indexes.append(job[2])
                continue
            copied.files += 1
            copied.bytes += size
    for build_id in sorted(set(copied.missing_indexes)):
        objstore.remove_tree(layout.join(dest, contents.indexes[build_id]))
    copied.missing_indexes = sorted(set(copied.missing_indexes))
    for rel, sid in contents.partial.items():
        if copied.trimmed.get(sid, (0, 0))[0] == 0:  # nothing of it precedes ts
            objstore.remove_tree(layout.join(dest, rel))
    return copied


def copy_tree(src: str, dst: str) -> Copied:
    """Every file under ``src`` to the same place under ``dst`` (a restore's storage)."""
    names = list(objstore.list_tree(src))
    copied = Copied()
    with concurrent.futures.ThreadPoolExecutor(COPY_THREADS, "elanus-restore") as pool:
        sizes = pool.map(lambda n: copy_file(layout.join(src, n), layout.join(dst, n)), names)
        for size in sizes:
            copied.files += 1
            copied.bytes += size
    return copied


def write(catalog: str, ts: int, upper: int, name: str, root: str, location: str) -> dict[str, Any]:
    """A backup at ``location`` from a catalog snapshot and the storage ``root``: the
    catalog at ``ts`` (``as_of``, partial segments sealed up to ``upper``), the files it
    references, the manifest last. Returns the manifest."""
    contents = as_of(catalog, ts, upper)
    copied = copy_contents(contents, root, layout.join(location, STORAGE))
    con = duckdb.connect(catalog)
    try:
        gone = record_trimmed(con, copied.trimmed)
        rebase_index_paths(con, below(root))
        reset_index_tasks(con, builds=copied.missing_indexes)
        contents.collections = summary(con)
    finally:
        con.close()
    copy_file(catalog, layout.join(location, CATALOG))
    doc = manifest(name, contents, copied, root)
    doc["segments"] -= gone
    objstore.write_bytes(layout.join(location, MANIFEST), json.dumps(doc, indent=1).encode())
    return doc


# -- manifests -------------------------------------------------------------------------------


def manifest(name: str, contents: Contents, copied: Copied, source: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": name,
        "ts": contents.ts,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "elanus_version": elanus.__version__,
        "source_storage": source,
        "collections": contents.collections,
        "segments": len(contents.segments),
        "rows": sum(c["rows"] for c in contents.collections),
        "files": copied.files,
        "bytes": copied.bytes,
    }


def read_manifest(location: str) -> dict[str, Any] | None:
    path = layout.join(location, MANIFEST)
    if not objstore.exists(path):
        return None
    doc = json.loads(objstore.read_bytes(path))
    return doc if isinstance(doc, dict) else None


def list_backups(target: str) -> list[dict[str, Any]]:
    """Each backup under ``target``, oldest first; a directory without a manifest is shown
    as ``incomplete`` (a backup that failed or is still being written)."""
    found = []
    for name in objstore.list_dir(target):
        loc = layout.join(target, name)
        if not objstore.is_dir(loc):
            continue
        doc = read_manifest(loc)
        if doc is None:
            found.append({"name": name, "location": loc, "complete": False})
        else:
            found.append({**doc, "location": loc, "complete": True})
    return sorted(found, key=lambda d: (d.get("ts") or 0, d["name"]))


# -- restore ---------------------------------------------------------------------------------


def restore(source: str, settings: Settings, load: bool = True) -> dict[str, Any]:
    """Bring the backup at ``source`` up in ``settings``'s data dir and storage root, both
    empty: the storage files copied, the catalog installed (its index paths under the new
    root), so that a standalone or coord started on them serves the backup, loading the
    collections that were loaded at the backup (none with ``load`` off)."""
    started = time.monotonic()
    objstore.configure(settings)
    if objstore.is_remote(source):
        objstore.configure(settings.replace(storage=source))
    doc = read_manifest(source)
    if doc is None:
        raise invalid(f"{source} holds no complete backup (no {MANIFEST})")
    if int(doc.get("format", 0)) > FORMAT:
        raise invalid(f"{source} was written by a newer Elanus ({doc.get('elanus_version')})")
    data_dir, storage = settings.data_path, settings.storage_uri
    if data_dir.exists() and any(data_dir.iterdir()):
        raise invalid(f"restore needs an empty data dir; {data_dir} is not empty")
    if objstore.list_dir(storage):
        raise invalid(f"restore needs an empty storage root; {storage} is not empty")
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        copied = copy_tree(layout.join(source, STORAGE), storage)
        _install_catalog(layout.join(source, CATALOG), settings, load)
    except BaseException:
        objstore.remove_tree(storage)  # it was empty: leave it so, for another try
        raise
    return {
        "name": doc["name"],
        "ts": doc["ts"],
        "data_dir": str(data_dir),
        "storage": storage,
        "collections": [
            {**c, "loaded": bool(load and c.get("loaded"))} for c in doc.get("collections", [])
        ],
        "files": copied.files,
        "bytes": copied.bytes,
        "rows": doc.get("rows", 0),
        "seconds": round(time.monotonic() - started, 3),
    }


def _install_catalog(source: str, settings: Settings, load: bool) -> None:
    """The backup's catalog, brought up to this version, its index paths under the new
    storage root (and its loads forgotten unless ``load``), moved into place last (a
    half-copied catalog is never left there)."""
    storage = settings.storage_uri
    with tempfile.TemporaryDirectory(dir=settings.data_path, prefix=".restore-") as tmp:
        local = os.path.join(tmp, CATALOG)
        copy_file(source, local)
        con = duckdb.connect(local)
        try:
            migrate(con)  # a backup of an older version is brought up to date
            _check_pchannels(con, settings.num_pchannels)
            rebase_index_paths(con, lambda p: layout.absolute(storage, p) or p)
            if not load:
                con.execute("DELETE FROM query_loads")
        finally:
            con.close()
        shutil.move(local, settings.catalog_path)


def _check_pchannels(con: duckdb.DuckDBPyConnection, num_pchannels: int) -> None:
    """The collections' vchannels live on the original's pchannels: the restored server
    must have as many streams."""
    have = {pchannel_name(i) for i in range(num_pchannels)}
    used = {r[0] for r in con.execute("SELECT DISTINCT pchannel FROM vchannels").fetchall()}
    if not used <= have:
        ids = (p.rpartition("_")[2] for p in used)
        need = max((int(i) + 1 for i in ids if i.isdigit()), default=num_pchannels + 1)
        raise invalid(
            f"the backup's collections use {need} pchannels; restore with num_pchannels = "
            f"{need} or more (this server's settings have {num_pchannels})"
        )


def check_target(target: str, settings: Settings) -> str:
    """A backup target as a location: ``s3://bucket/prefix`` or an absolute local path,
    outside the storage root and the data dir (nothing there may be mistaken for data)."""
    target = target.strip()
    if objstore.is_remote(target):
        loc = target.rstrip("/")
        if len(loc) <= len(objstore.S3):
            raise invalid("backup target: an object store is written s3://bucket[/prefix]")
    elif not posixpath.isabs(target):
        raise invalid(
            f"backup target {target!r} must be an absolute path (on the coord's machine) "
            "or s3://bucket/prefix"
        )
    else:
        loc = os.path.normpath(target)
    for inside in (settings.storage_uri, str(settings.data_path)):
        if loc == inside or loc.startswith(inside.rstrip("/") + "/"):
            raise invalid(f"backup target {target!r} is inside {inside}; choose another place")
    return loc
