"""A sealed segment whose index holds its vectors drops the column (segments/querynode/heldvectors)
and still answers every read as a segment holding the column does: output vectors (from
the index, or from the files for COSINE's unit vectors and float16), exact, filtered and
range searches, deletes, and searches in another metric once the index is dropped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from elanus import layout
from elanus.api.querynode import SegmentSpec, ServedIndex
from elanus.expr import parse
from elanus.index.build import build_index
from elanus.index.engine import load_index
from elanus.indexparams import make_index_spec
from elanus.schema import DataType, Field, Schema
from elanus.segments import storage
from elanus.segments.querynode.memseg import MemSegment
from elanus.segments.querynode.worker import attach_index, load_segment

N, DIM = 5000, 16
SCHEMA = Schema(
    [
        Field("id", DataType.INT64, is_primary=True),
        Field("v", DataType.FLOAT_VECTOR, dim=DIM),
        Field("h", DataType.FLOAT16_VECTOR, dim=DIM),
        Field("n", DataType.INT32),
    ]
)


def _rows() -> pa.Table:
    rng = np.random.default_rng(3)
    v = rng.standard_normal((N, DIM), dtype=np.float32)
    ids = np.arange(N) * 3 + 1  # keys are not row positions
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), DIM),
            "h": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel().astype(np.float16)), DIM),
            "n": pa.array(np.arange(N) % 50, pa.int32()),
            "_ts": pa.array(np.full(N, 100, np.uint64)),
        }
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    root = tmp_path_factory.mktemp("held")
    table = _rows()
    storage.write_segment(str(root / "seg"), table, SCHEMA)
    return root, storage.read_segment(str(root / "seg"), SCHEMA)


def _index(root: Path, table: pa.Table, field: str, itype: str, metric: str) -> ServedIndex:
    dtype = "FloatVector" if field == "v" else "Float16Vector"
    params = {"nlist": 16} if itype == "IVF_FLAT" else {"M": 8, "efConstruction": 40}
    spec = make_index_spec(dtype, DIM, itype, metric, params if itype != "FLAT" else {})
    col = table.column(field).combine_chunks()
    x = col.values.to_numpy(zero_copy_only=False).astype(np.float32).reshape(N, DIM)
    out = root / f"{field}-{itype}-{metric}"
    build_index(spec, x).write(out)
    return ServedIndex(field=field, dir=str(out), spec=spec.to_dict(), index_id=hash(out) % 10**6)


def _load(root: Path, indexes: list[ServedIndex]) -> MemSegment:
    path = layout.data_path(str(root / "seg"))
    spec = SegmentSpec(segment_id=7, partition_id=1, path=path, vchannel="v0", indexes=indexes)
    return load_segment(spec, SCHEMA)


CASES = [("IVF_FLAT", "L2"), ("HNSW", "COSINE"), ("FLAT", "IP"), ("IVF_FLAT", "COSINE")]


@pytest.mark.parametrize(("itype", "metric"), CASES)
def test_a_held_field_answers_as_its_column(
    written: tuple[Path, pa.Table], itype: str, metric: str
) -> None:
    root, table = written
    full = MemSegment(7, 1, SCHEMA, table)  # the column, searched exactly
    entry = _index(root, table, "v", itype, metric)
    seg = _load(root, [entry])
    assert "v" not in seg.table.column_names and "h" in seg.table.column_names
    both = MemSegment(7, 1, SCHEMA, table)  # no files to read it back from: keeps the column
    both.attach_index("v", load_index(entry.dir))
    assert seg.memory_bytes() <= both.memory_bytes() - N * DIM * 4

    rows = np.array([4, 0, N - 1, 4, 1234])
    assert seg.take(rows, ["id", "v", "n"]).equals(full.take(rows, ["id", "v", "n"]))
    assert seg.query(100, parse("n == 7", SCHEMA), ["v", "id"]).equals(
        full.query(100, parse("n == 7", SCHEMA), ["v", "id"])
    )
    q = np.random.default_rng(9).standard_normal((3, DIM), dtype=np.float32)
    rare = parse("n == 3", SCHEMA)  # 2 % of the rows: the exact path
    seg.delete(pa.array([3 * 53 + 1]), 150)  # row 53 (n == 3) dies at 150
    full.delete(pa.array([3 * 53 + 1]), 150)
    for kwargs in [
        {"expr": rare},
        {"expr": rare, "radius": 50.0 if metric == "L2" else -0.2},
        {"radius": 20.0 if metric == "L2" else 0.3},
    ]:
        got = seg.search("v", q, 10, metric, 200, **kwargs)
        want = full.search("v", q, 10, metric, 200, **kwargs)
        assert got.pks.tolist() == want.pks.tolist()
        np.testing.assert_allclose(got.distances, want.distances, rtol=1e-4, atol=1e-4)
        assert 3 * 53 + 1 not in got.pks


def test_float16_outputs_come_from_the_files(written: tuple[Path, pa.Table]) -> None:
    root, table = written
    seg = _load(root, [_index(root, table, "h", "HNSW", "L2")])
    assert "h" not in seg.table.column_names and "v" in seg.table.column_names
    rows = np.array([10, 3, 10])
    assert seg.take(rows, ["h"]).equals(table.select(["h"]).take(pa.array(rows)))


def test_a_dropped_index_still_answers_other_metrics(written: tuple[Path, pa.Table]) -> None:
    root, table = written
    full = MemSegment(7, 1, SCHEMA, table)
    entry = _index(root, table, "v", "HNSW", "COSINE")
    seg = _load(root, [entry])
    assert entry.index_id is not None
    seg.detach_index(entry.index_id)  # dropped: any metric may be asked for now
    q = np.random.default_rng(2).standard_normal((2, DIM), dtype=np.float32)
    got = seg.search("v", q, 5, "COSINE", 200)  # the unit vectors still answer this one
    assert "v" not in seg.table.column_names
    assert got.pks.tolist() == full.search("v", q, 5, "COSINE", 200).pks.tolist()
    got = seg.search("v", q, 5, "L2", 200)  # they cannot answer L2: the column comes back
    assert got.pks.tolist() == full.search("v", q, 5, "L2", 200).pks.tolist()
    assert seg.table.column_names == full.table.column_names
    assert attach_index(seg, _index(root, table, "v", "IVF_FLAT", "L2"))  # held again
    assert "v" not in seg.table.column_names
    assert seg.take(np.array([1]), ["v"]).equals(full.take(np.array([1]), ["v"]))
