"""Checks a builder's report before the coord marks an index task Finished.

A report is only a claim: any builder (or a client holding the builder privilege) can send
one. The coord runs :func:`verify_report` in a thread before it believes it (see
docs/design-notes.md, "Index reports are verified by the coord"): every reported file lies
in the task's output directory (normalised, no symbolic link anywhere below the storage
root), is a regular non-empty file, and the index loads with the query node's own loader
(:func:`elanus.index.engine.load_index`) and matches the task: dimension, metric, index
type and parameters, and the segment's row count. A sparse index names its postings file
instead of the FAISS file.

Reasons name what failed, never what a file holds: the files may be anything, and the
reason is shown to clients (``describe_index``, ``index.tasks``).
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from elanus import freemem, objstore
from elanus.index import scalar
from elanus.index.engine import INDEX_FILE, SegmentIndex, load_index
from elanus.index.files import FORMAT_VERSION, META_FILE
from elanus.index.sparse import POSTINGS_FILE, SparseIndex
from elanus.indexparams import IndexSpec
from elanus.scalarindex import is_scalar_spec

MAX_META_BYTES = 1 << 20
"""``meta.json`` is a few hundred bytes; a larger one is refused before parsing."""
MAX_FILES = 64
"""A build writes two files; a report naming more is not one of ours."""
SHOWN_CHARS = 120
"""How much of a reported (client-supplied) path a reason quotes."""

_STRUCTURE: dict[str, type[faiss.Index] | type[faiss.IndexBinary]] = {
    "FLAT": faiss.IndexFlat,
    "HNSW": faiss.IndexHNSW,
    "IVF_FLAT": faiss.IndexIVFFlat,
    "IVF_SQ8": faiss.IndexIVFScalarQuantizer,
    "IVF_PQ": faiss.IndexIVFPQ,
    "BIN_FLAT": faiss.IndexBinaryFlat,
    "BIN_IVF_FLAT": faiss.IndexBinaryIVF,
}
"""The FAISS class each ``built_as`` must deserialise to (the search code relies on it)."""


class Rejected(Exception):
    """A report that does not hold; the message is the reason (no file content)."""


def _show(path: object) -> str:
    text = str(path)
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


def verify_report(
    storage: Path | str,
    out_dir: Path | str,
    files: list[Any],
    task_spec: dict[str, Any],
    num_rows: int,
) -> str | None:
    """``None`` when the report of a build into ``out_dir`` holds, else why not.

    ``task_spec`` is the index's spec (``IndexSpec.to_dict``), ``num_rows`` the segment's
    rows. Runs file I/O and a FAISS load: call it off the event loop. What the load
    took goes back to the system before it returns (``elanus.freemem``)."""
    try:
        if is_scalar_spec(task_spec):
            required: tuple[str, ...] = (scalar.META_FILE, scalar.DATA_FILE)
        else:
            kind = IndexSpec.from_dict(task_spec).field_kind
            required = (META_FILE, POSTINGS_FILE if kind == "sparse" else INDEX_FILE)
        if objstore.is_remote(str(out_dir)):  # no links on an object store: names and sizes
            _check_remote_files(str(storage), str(out_dir), files, required)
            with objstore.local_copy(out_dir) as local:
                _check_loads(local, task_spec, num_rows)
        else:
            real_out = _check_out_dir(Path(storage), Path(out_dir))
            _check_files(Path(out_dir), real_out, files, required)
            _check_loads(Path(out_dir), task_spec, num_rows)
    except Rejected as exc:
        return str(exc)
    finally:
        freemem.release()  # the index it loaded: a coord must not keep a build's size
    return None


def _check_loads(out_dir: Path, task_spec: dict[str, Any], num_rows: int) -> None:
    if is_scalar_spec(task_spec):
        _check_scalar(out_dir, task_spec, num_rows)
    else:
        _check_index(out_dir, IndexSpec.from_dict(task_spec), num_rows)


def _check_remote_files(
    storage: str, out_dir: str, files: list[Any], required: tuple[str, ...]
) -> None:
    """Every reported file is an object right below ``out_dir`` (under the storage root),
    not empty; together they hold ``required``."""
    out = out_dir.rstrip("/")
    if not out.startswith(storage.rstrip("/") + "/"):
        raise Rejected("the task's output directory is not under the storage")
    if not files:
        raise Rejected("the report names no files")
    if len(files) > MAX_FILES:
        raise Rejected(f"the report names {len(files)} files (at most {MAX_FILES})")
    present = objstore.list_tree(out)
    names: set[str] = set()
    for f in files:
        if not isinstance(f, str) or not f or "\x00" in f:
            raise Rejected(f"reported file {_show(f)} is not a path")
        name = f[len(out) + 1 :] if f.startswith(out + "/") else f
        if "://" in name or name.startswith("/") or posixpath.normpath(name) != name:
            raise Rejected(f"reported file {_show(f)} is outside the task's output directory")
        if name not in present:
            raise Rejected(f"reported file {_show(f)} does not exist")
        if present[name] == 0:
            raise Rejected(f"reported file {_show(f)} is empty")
        names.add(name)
    for needed in required:
        if needed not in names:
            raise Rejected(f"the report lacks {needed}, which query nodes load")


def _check_out_dir(storage: Path, out_dir: Path) -> Path:
    """The output directory, resolved; it must be where the task said, with no symbolic
    link between the storage root and it (a link could point anywhere)."""
    try:
        relative = out_dir.relative_to(storage)
    except ValueError:
        raise Rejected("the task's output directory is not under the storage") from None
    real = Path(os.path.realpath(out_dir))
    if real != Path(os.path.realpath(storage)) / relative:
        raise Rejected("the output directory leads outside the storage (a symbolic link)")
    return real


def _check_files(
    out_dir: Path, real_out: Path, files: list[Any], required: tuple[str, ...]
) -> None:
    if not files:
        raise Rejected("the report names no files")
    if len(files) > MAX_FILES:
        raise Rejected(f"the report names {len(files)} files (at most {MAX_FILES})")
    names: set[str] = set()
    for f in files:
        if not isinstance(f, str) or not f or "\x00" in f:
            raise Rejected(f"reported file {_show(f)} is not a path")
        path = Path(os.path.normpath(out_dir / f))  # an absolute ``f`` replaces out_dir
        if path == out_dir or not path.is_relative_to(out_dir):
            raise Rejected(f"reported file {_show(f)} is outside the task's output directory")
        real_parent = Path(os.path.realpath(path.parent))
        if not real_parent.is_relative_to(real_out):
            raise Rejected(f"reported file {_show(f)} leads outside the output directory")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise Rejected(f"reported file {_show(f)} does not exist") from None
        except OSError:
            raise Rejected(f"reported file {_show(f)} cannot be read") from None
        if stat.S_ISLNK(st.st_mode):
            raise Rejected(f"reported file {_show(f)} is a symbolic link")
        if not stat.S_ISREG(st.st_mode):
            raise Rejected(f"reported file {_show(f)} is not a regular file")
        if st.st_size == 0:
            raise Rejected(f"reported file {_show(f)} is empty")
        names.add(str(path.relative_to(out_dir)))
    for needed in required:
        if needed not in names:
            raise Rejected(f"the report lacks {needed}, which query nodes load")


def _check_index(out_dir: Path, want: IndexSpec, num_rows: int) -> None:
    """The index must load as a query node loads it and be the index the task asked for."""
    meta_path = out_dir / META_FILE
    if meta_path.stat().st_size > MAX_META_BYTES:
        raise Rejected(f"{META_FILE} is too large to be index metadata")
    try:
        meta = json.loads(meta_path.read_bytes())
        spec = IndexSpec.from_dict(meta["spec"])
        meta_rows = int(meta["num_rows"])
    except Exception:  # noqa: BLE001 - any malformation; its details would quote the file
        raise Rejected(f"{META_FILE} is not index metadata") from None
    if meta.get("format") != FORMAT_VERSION:
        raise Rejected(f"{META_FILE} is not of index format {FORMAT_VERSION}")
    # Compared before FAISS reads anything: a wrong index is refused without loading it.
    if spec.dim != want.dim:
        raise Rejected(f"the index is for dimension {spec.dim}, the field has {want.dim}")
    if spec.metric != want.metric:
        raise Rejected(f"the index uses metric {spec.metric}, the task asks for {want.metric}")
    if spec.index_type != want.index_type or spec.to_dict() != want.to_dict():
        raise Rejected("the index was built with other parameters than the task's")
    if meta_rows != num_rows:
        raise Rejected(f"the index covers {meta_rows} rows, the segment has {num_rows}")
    if want.field_kind == "sparse":
        _check_sparse(out_dir, num_rows)
        return
    try:
        index = load_index(out_dir)
    except Exception:  # noqa: BLE001 - FAISS and the loader fail in many ways
        raise Rejected(f"{INDEX_FILE} does not load as an index") from None
    assert isinstance(index, SegmentIndex)
    inner = index.faiss_structure
    expected = _STRUCTURE.get(index.built_as)
    flat = "BIN_FLAT" if want.field_kind == "binary" else "FLAT"
    if expected is None or index.built_as not in (want.index_type, flat):
        raise Rejected(f"the index claims a {index.built_as!r} structure for a {want.index_type}")
    if not isinstance(inner, expected):
        raise Rejected(f"{INDEX_FILE} does not hold the {index.built_as} structure it claims")
    if int(inner.d) != want.dim:
        raise Rejected(
            f"{INDEX_FILE} holds {inner.d}-dimensional vectors, the field has {want.dim}"
        )
    if isinstance(inner, faiss.Index):  # not a binary index: those have no metric (Hamming)
        metric = faiss.METRIC_L2 if want.metric == "L2" else faiss.METRIC_INNER_PRODUCT
        if inner.metric_type != metric:
            raise Rejected(f"{INDEX_FILE} does not use the {want.metric} metric")
    if index.num_vectors > num_rows:
        raise Rejected(f"the index holds {index.num_vectors} vectors for {num_rows} rows")
    try:  # a search through the same code path the query node uses
        width = want.dim // 8 if want.field_kind == "binary" else want.dim
        dtype = np.uint8 if want.field_kind == "binary" else np.float32
        index.search(np.zeros((1, width), dtype), 1)
    except Exception:  # noqa: BLE001
        raise Rejected("the index loads but cannot be searched") from None


def _check_sparse(out_dir: Path, num_rows: int) -> None:
    """A sparse index must load (its loader checks the postings' invariants), cover the
    segment's rows and answer a search."""
    try:
        index = load_index(out_dir)
    except Exception:  # noqa: BLE001
        raise Rejected(f"{POSTINGS_FILE} does not load as a sparse index") from None
    if not isinstance(index, SparseIndex) or index.num_rows != num_rows:
        raise Rejected(f"{POSTINGS_FILE} does not hold a sparse index of {num_rows} rows")
    try:
        index.search([{0: 1.0}], 1)
    except Exception:  # noqa: BLE001
        raise Rejected("the index loads but cannot be searched") from None


def _check_scalar(out_dir: Path, want: dict[str, Any], num_rows: int) -> None:
    """A scalar index must load as a worker loads it, with the task's spec and rows."""
    if (out_dir / scalar.META_FILE).stat().st_size > MAX_META_BYTES:
        raise Rejected(f"{scalar.META_FILE} is too large to be index metadata")
    try:
        index, spec = scalar.load_scalar_index(out_dir)
    except Exception:  # noqa: BLE001 - any malformation; its details would quote the file
        raise Rejected("the files do not load as a scalar index") from None
    if spec.to_dict() != want:
        raise Rejected("the index was built with other parameters than the task's")
    if index.num_rows != num_rows:
        raise Rejected(f"the index covers {index.num_rows} rows, the segment has {num_rows}")
