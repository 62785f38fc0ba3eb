"""Raw columns kept on disk, mapped: what ``mmap.enabled`` on a field (or its collection)
does to a sealed segment's columns that no index holds (an index that holds its field's
vectors maps them itself, ``elanus.index.engine.load_index``).

The columns, as read from the segment's Lance files, are written once to an Arrow IPC
file in the node's mmap directory, as one record batch (a table of one chunk a column,
which ``MemSegment`` keeps as is, zero-copy), mapped back, and the file unlinked at once:
the mapping keeps its blocks until the segment is released, then the disk space comes
back, with no cache to clean up after a crash. Lance's own files cannot be mapped as
Arrow (they are encoded), hence the copy; a load still reads each column into memory
once, briefly, one segment at a time per loading thread. The primary key stays in
memory (every read looks it up).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa


def map_columns(table: pa.Table, fields: list[str], directory: Path) -> tuple[pa.Table, list[str]]:
    """``table`` with its columns ``fields`` (those it has) memory-mapped from a copy in
    ``directory``; and the names of the columns mapped."""
    names = [f for f in fields if f in table.column_names]
    if not names or table.num_rows == 0:
        return table, []
    part = table.select(names).combine_chunks()
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=directory, prefix="columns-", suffix=".arrow") as tmp:
        with pa.OSFile(tmp.name, "wb") as sink, pa.ipc.new_file(sink, part.schema) as writer:
            writer.write_table(part, max_chunksize=part.num_rows)
        mapped = pa.ipc.open_file(pa.memory_map(tmp.name)).read_all()
    for name in names:
        at = table.column_names.index(name)
        table = table.set_column(at, table.schema.field(name), mapped.column(name))
    return table, names
