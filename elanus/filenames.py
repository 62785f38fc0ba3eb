"""Import files by name: the format of a path, and the import units of a ``files`` list.

Names only, never the disk (so the proxy's request check and ``elanus/ops`` may use it):
the reading is ``elanus.filereaders``'s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elanus.errors import invalid

PARQUET = "parquet"
JSONL = "jsonl"
CSV = "csv"
NUMPY = "numpy"
ARROW = "arrow"
ROW_FORMATS = (PARQUET, JSONL, CSV)
FORMATS = (*ROW_FORMATS, NUMPY, ARROW)
_SUFFIXES = {".parquet": PARQUET, ".pq": PARQUET, ".jsonl": JSONL, ".ndjson": JSONL, ".csv": CSV}
COMPRESSED = (".gz", ".bz2", ".zst", ".lz4")
"""Suffixes pyarrow's CSV and JSON readers decompress on the fly (not Parquet: it
compresses inside)."""
NUMPY_SUFFIX = ".npy"


def file_format(path: str | Path) -> str:
    """The row-based format of ``path`` from its extension; INVALID_ARGUMENT otherwise."""
    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSED:
        suffixes = suffixes[:-1]
        if suffixes and _SUFFIXES.get(suffixes[-1]) == PARQUET:
            suffixes = []  # a compressed Parquet file is not something pyarrow reads
    fmt = _SUFFIXES.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise invalid(f"{path}: unknown file type; expected .parquet, .jsonl/.ndjson or .csv")
    return fmt


def is_numpy(path: str | Path) -> bool:
    return Path(path).suffix.lower() == NUMPY_SUFFIX


def group_files(entries: list[Any]) -> list[dict[str, Any]]:
    """Import units from a ``files`` list, as Milvus's bulk insert takes it: each entry is a
    path (one row-based file) or a list of paths (one row-based file, or the ``.npy`` files
    of one column-based set). Bare ``.npy`` paths at the top level form one set together.
    Returns ``[{"format": ..., "paths": [...]}]``; checks names only, never the disk."""
    units: list[dict[str, Any]] = []
    loose_numpy: list[str] = []
    for entry in entries:
        paths = entry if isinstance(entry, list) else [entry]
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise invalid("import: each entry of 'files' is a path or a non-empty list of paths")
        numpy = [p for p in paths if is_numpy(p)]
        if not isinstance(entry, list) and numpy:
            loose_numpy.append(entry)
            continue
        if numpy:
            if len(numpy) != len(paths):
                raise invalid(f"import: a set of .npy files cannot also hold other files: {paths}")
            units.append({"format": NUMPY, "paths": _numpy_set(paths)})
            continue
        if len(paths) != 1:
            raise invalid(
                f"import: a list entry holds one row-based file or a set of .npy files, got {paths}"
            )
        units.append({"format": file_format(paths[0]), "paths": list(paths)})
    if loose_numpy:
        units.append({"format": NUMPY, "paths": _numpy_set(loose_numpy)})
    return units


def _numpy_set(paths: list[str]) -> list[str]:
    fields = [numpy_field_name(p) for p in paths]
    repeated = sorted({f for f in fields if fields.count(f) > 1})
    if repeated:
        raise invalid(f"import: more than one .npy file for field {repeated[0]!r}")
    return list(paths)


def numpy_field_name(path: str | Path) -> str:
    """``/data/vector.npy`` holds field ``vector`` (``$meta.npy``: the dynamic field)."""
    return Path(path).name[: -len(NUMPY_SUFFIX)]
