"""The coord's gauges (``channels/runtime/metrics.py``): segments and their rows by state, each
load's progress, index tasks by state. Read from the coord's in-memory tables at scrape
time, on the scrape's thread: plain reads of dicts taken as lists, no catalog query."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from elanus.channels.runtime import metrics
from elanus.states import IndexTaskState, SegmentState

if TYPE_CHECKING:
    from elanus.meta.interfaces import IndexTasks, LoadedCollections, SegmentTable


class CoordMetrics:
    def __init__(self, data: SegmentTable, index: IndexTasks, query: LoadedCollections) -> None:
        self.data, self.index, self.query = data, index, query

    def metric_samples(self) -> list[metrics.Sample]:
        segments = list(self.data.segments.values())
        count: Counter[str] = Counter({str(state): 0 for state in SegmentState})
        rows: Counter[str] = Counter({str(state): 0 for state in SegmentState})
        for seg in segments:
            count[seg.state] += 1
            rows[seg.state] += seg.num_rows
        tasks: Counter[str] = Counter({str(state): 0 for state in IndexTaskState})
        for task in list(self.index.tasks.values()):
            if not task.mark_deleted:
                tasks[task.state] += 1
        query = self.query
        return [
            *((metrics.SEGMENTS, (state,), float(n)) for state, n in count.items()),
            *((metrics.SEGMENT_ROWS, (state,), float(n)) for state, n in rows.items()),
            *((metrics.INDEX_TASKS, (state,), float(n)) for state, n in tasks.items()),
            *(
                (metrics.LOAD_PROGRESS, (str(cid),), float(query.progress(cid)[0]))
                for cid in list(query.loaded)
            ),
        ]
