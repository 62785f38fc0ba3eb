"""One index build task, as both builders run it: an index node (in a thread) and a Spark
executor (``elanus index build``). Reads the segment's column from Lance, builds the
FAISS index (or a scalar index, ``elanus.index.scalar``), writes its files under the task's
``out_dir`` and says how it went — failures become a report with a reason, never an
exception, so the coord's state machine decides."""

from __future__ import annotations

import time
from typing import Any

from elanus import freemem, layout, objstore
from elanus.index.build import build_segment_index
from elanus.index.scalar import build_scalar_index, write_scalar_index
from elanus.indexparams import IndexSpec
from elanus.scalarindex import ScalarSpec, is_scalar_spec


def run_build_task(
    build_id: int,
    version: int,
    field: str,
    spec: dict[str, Any],
    data_path: str,
    out_dir: str,
    delay_s: float = 0.0,
) -> dict[str, Any]:
    """Build one task's index (a ``BuildIndex``'s fields, or a claimed task's); the
    report for ``index.report`` (without ``node_id``)."""
    started = time.perf_counter()
    report: dict[str, Any] = {"build_id": build_id, "version": version}
    try:
        if delay_s:
            time.sleep(delay_s)
        keys = _build(field, spec, data_path, out_dir)
        report.update(ok=True, files=[layout.join(out_dir, k) for k in keys])
    except Exception as exc:  # noqa: BLE001 - every failure is reported with its reason
        report.update(ok=False, fail_reason=f"{type(exc).__name__}: {exc}")
    freemem.release()  # the column and the index, freed: a builder stays small between tasks
    report["seconds"] = round(time.perf_counter() - started, 3)
    return report


def _build(field: str, spec: dict[str, Any], data_path: str, out_dir: str) -> list[str]:
    """Build and write the index; its file keys (what it built is freed on return)."""
    with objstore.local_target(out_dir) as local:  # S3: built locally, then uploaded
        if is_scalar_spec(spec):
            scalar = ScalarSpec.from_dict(spec)
            values = build_scalar_index(data_path, field, scalar)
            return write_scalar_index(values, scalar, local)
        index = build_segment_index(data_path, field, IndexSpec.from_dict(spec))
        return index.write(local)
