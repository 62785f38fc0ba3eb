"""How ``make test``'s xdist workers share the suite (issue 34: under 15 minutes on 2 cores).

``--dist loadfile`` runs a test file whole in one worker, so its module-scoped servers
start once. ``LongestFirst`` keeps that and changes two things:

- **The files that use the session's Spark run in one worker, one after another**: each
  worker that meets one starts its own JVM, and a JVM's start and first jobs cost ~20 s of
  CPU (measured: one session and two small jobs, 23 s). A file uses Spark when one of its
  functions (a test or a fixture) takes the ``spark`` fixture (``uses_spark``). xdist's own
  ``--dist loadgroup`` would say it with a mark, but it cannot rename node ids under
  pytest 9, so the grouping is done here, where the work is handed out.
- **The longest work first** (longest-processing-time order), the Spark unit among them:
  ``file_seconds.json`` holds each file's seconds in the parallel phase of a whole run
  (``make test`` writes them to ``build/file-seconds.json``; copy that file here to
  refresh it); a file it does not know counts as a median one. The order matters little
  today: replayed on the files' seconds of a clean-clone run, xdist's own order (most
  tests first) and this one both end within a second of the even split (754 s), the
  Spark unit first and the rest by name 10 s later.
"""

from __future__ import annotations

import json
import re
import statistics
from functools import cache
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

TESTS = Path(__file__).resolve().parent
SECONDS_FILE = TESTS / "file_seconds.json"
RECORD_TO = TESTS.parent / "build" / "file-seconds.json"
SPARK_UNIT = "spark"
_PARAMETERS = re.compile(r"\bdef \w+\(([^)]*)\)", re.DOTALL)
_SPARK_PARAMETER = re.compile(r"(?:^|,)\s*spark\s*(?:[:,=]|$)")


@cache
def uses_spark(test_file: str) -> bool:
    try:
        text = (TESTS.parent / test_file).read_text()
    except OSError:
        return False
    return any(_SPARK_PARAMETER.search(p) for p in _PARAMETERS.findall(text))


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class LongestFirst(LoadScopeScheduling):
    """Work units are test files, or all the files that use Spark as one; they are handed
    out longest first."""

    def _split_scope(self, nodeid: str) -> str:
        path = file_of(nodeid)
        return SPARK_UNIT if uses_spark(path) else path

    def schedule(self) -> None:
        if self.collection is None and self.collection_is_completed:
            self.config.option.loadscopereorder = False  # keep the order given below
            weights = self._weights(next(iter(self.registered_collections.values())))
            for nodes in self.registered_collections.values():  # the same list in each
                nodes[:] = sorted(nodes, key=lambda n: -weights[self._split_scope(n)])
        super().schedule()

    def _weights(self, nodeids: list[str]) -> dict[str, float]:
        seconds = known_seconds()
        median = statistics.median(seconds.values()) if seconds else 1.0
        weights: dict[str, float] = {}
        for path in dict.fromkeys(file_of(n) for n in nodeids):
            scope = self._split_scope(path)
            weights[scope] = weights.get(scope, 0.0) + seconds.get(path, median)
        return weights


def known_seconds() -> dict[str, float]:
    try:
        table = json.loads(SECONDS_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in table.items()}


def record_seconds(by_file: dict[str, float]) -> None:
    """Each file's seconds of this run, beside what an earlier run (the other phase) wrote."""
    try:
        table = json.loads(RECORD_TO.read_text())
    except (OSError, ValueError):
        table = {}
    table.update({path: round(s, 1) for path, s in by_file.items()})
    RECORD_TO.parent.mkdir(exist_ok=True)
    RECORD_TO.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")
