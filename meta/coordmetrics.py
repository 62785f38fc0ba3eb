"""The coord's gauges (``channels/metrics.py``): segments and their rows by state, each
load's progress, index tasks by state. Read from the coord's in-memory tables at scrape
time, on the scrape's thread: plain reads of dicts taken as lists, no catalog query."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from elanus.channels import metrics
from elanus.states import IndexTaskState, SegmentState

if TYPE_CHECKING:
    from elanus.meta.coord import Coordinator


class CoordMetrics:
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord

    def metric_samples(self) -> list[metrics.Sample]:
        segments = list(self.coord.data.segments.values())
        count: Counter[str] = Counter({str(state): 0 for state in SegmentState})
        rows: Counter[str] = Counter({str(state): 0 for state in SegmentState})
        for seg in segments:
            count[seg.state] += 1
            rows[seg.state] += seg.num_rows
        tasks: Counter[str] = Counter({str(state): 0 for state in IndexTaskState})
        for task in list(self.coord.index.tasks.values()):
            if not task.mark_deleted:
                tasks[task.state] += 1
        query = self.coord.query
        return [
            *((metrics.SEGMENTS, (state,), float(n)) for state, n in count.items()),
            *((metrics.SEGMENT_ROWS, (state,), float(n)) for state, n in rows.items()),
            *((metrics.INDEX_TASKS, (state,), float(n)) for state, n in tasks.items()),
            *(
                (metrics.LOAD_PROGRESS, (str(cid),), float(query.progress(cid)[0]))
                for cid in list(query.loaded)
            ),
        ]
