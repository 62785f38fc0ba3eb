"""Vector fields a sealed segment serves from their index rather than from a column.

An index that keeps every vector uncompressed (``SegmentIndex.holds_vectors``: FLAT,
BIN_FLAT, HNSW's flat storage, IVF_FLAT's lists) makes the segment's own column a second
copy: a loaded 1 M x 128-d IVF_FLAT segment held 512 MB of column beside 520 MB of index.
So a sealed segment drops the column once such an index is attached (a worker does not
even read it from the files when the index loads first) and answers from here:

- exact searches (a filter leaving few rows, range searches, FLAT) scan the index's
  vectors (``SegmentIndex.exact_search``), with the same results as the column's kernel;
- output fields take the vectors back from the index where it holds them as given, else
  (COSINE's unit vectors, float16 or bfloat16 columns, null rows) read those rows from
  the segment's Lance files;
- a search the index's vectors cannot answer (another metric, once the index is dropped
  and any metric is allowed) reads the whole column back from the files, once.

A dropped index stays its field's holder (it no longer serves ANN searches, but it still
holds the vectors) until another index that holds them replaces it or the column is read
back. Growing segments have no files yet: they keep their columns.
"""

from __future__ import annotations

from typing import Any

import lance
import numpy as np
import pyarrow as pa

from elanus.segments import storage


class HeldVectors:
    """Field ``field`` of the segment whose Lance dataset is at ``path``, held by
    ``index`` (a ``SegmentIndex`` whose ``holds_vectors`` is true)."""

    def __init__(self, index: Any, path: str, field: pa.Field) -> None:
        self.index = index
        self.path = path
        self.field = field
        self._dataset: lance.LanceDataset | None = None

    def _files(self) -> lance.LanceDataset:
        if self._dataset is None:  # racing threads open equal datasets; either one is kept
            self._dataset = storage.dataset(self.path)
        return self._dataset

    @property
    def from_index(self) -> bool:
        """Whether the index gives the column's values back exactly (float32 or binary
        vectors, held as given)."""
        t = self.field.type
        same_type = pa.types.is_fixed_size_binary(t) or (
            pa.types.is_fixed_size_list(t) and pa.types.is_float32(t.value_type)
        )
        return same_type and bool(self.index.gives_back_vectors)

    def take(self, rows: np.ndarray) -> pa.Array:
        """The field's values at row positions ``rows``, in that order."""
        if not self.from_index:
            return storage.read_rows(self._files(), self.field, rows)
        x = self.index.vectors(rows)
        t = self.field.type
        if pa.types.is_fixed_size_binary(t):
            data = pa.py_buffer(np.ascontiguousarray(x).tobytes())
            return pa.Array.from_buffers(t, len(x), [None, data])
        return pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), type=t)

    def column(self) -> pa.Array:
        """The whole column, read from the segment's files."""
        return storage.read_rows(self._files(), self.field, None)
