"""Each test file's time in the last measured ``make test`` (``file_seconds.json``), for the
order in which pytest-xdist hands files to its workers: longest first, so no worker starts a
long file while the other runs out of work (xdist's own order, most tests first, left the
one-test files that start whole clusters to the end).

Refresh after a suite run whose log has every duration::

    make test PYTEST_ARGS=--durations=0 > /tmp/suite.log 2>&1
    .venv/bin/python tests/file_seconds.py /tmp/suite.log
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

TABLE = Path(__file__).with_name("file_seconds.json")
UNKNOWN_S = 5.0
"""A file not in the table yet (new) counts as this many seconds."""


def load() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(TABLE.read_text()).items()}
    except (OSError, ValueError):
        return {}


def from_log(text: str) -> dict[str, float]:
    """Seconds per test file, summed over the setup, call and teardown lines of
    ``--durations=0`` reports in a pytest log."""
    seconds: Counter[str] = Counter()
    for m in re.finditer(r"^([\d.]+)s (?:setup|call|teardown)\s+(\S+?\.py)::", text, re.M):
        seconds[m.group(2)] += float(m.group(1))
    return {f: round(s, 1) for f, s in sorted(seconds.items())}


if __name__ == "__main__":
    table = from_log(Path(sys.argv[1]).read_text())
    TABLE.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"{len(table)} files, {sum(table.values()):.0f} s in all -> {TABLE}")
