"""The quick benchmark's recorded figures: the fenced ``quick-bench`` block of
``bench/README.md`` (read, compared with, rewritten). Pure text functions, no I/O, so a
test can check them on a synthetic README.

The block, under the "Quick benchmark" heading::

    ```quick-bench
    # commit 1a2b3c4, 2025-06-01 (bench/quick.py --record)
    ingest_ack      0.512  insert to last ack / raw JetStream (312,000 / 610,000 rows/s)
    ```

One ratio a line: its key, its value, then free text (what it is, the figures behind it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TAG = "quick-bench"
HEADING = "## Quick benchmark"
FALL = 0.15
"""A ratio that fell by more than this share of its recorded value is flagged."""

_FENCE = re.compile(rf"^```{re.escape(TAG)}[ \t]*\n(.*?)^```[ \t]*$\n?", re.M | re.S)


@dataclass
class Recorded:
    ratios: dict[str, float]
    commit: str = "?"
    date: str = "?"


@dataclass
class Row:
    key: str
    now: float
    recorded: float | None

    @property
    def change(self) -> float | None:
        """now / recorded - 1 (None when nothing was recorded)."""
        if self.recorded is None or self.recorded <= 0:
            return None
        return self.now / self.recorded - 1

    @property
    def fell(self) -> bool:
        """Below the recorded value by more than ``FALL`` of it."""
        if self.recorded is None or self.recorded <= 0:
            return False
        return self.now < self.recorded * (1 - FALL)


def parse_block(readme: str) -> Recorded | None:
    """The recorded ratios, or None when the README has no block (the first run)."""
    found = _FENCE.search(readme)
    if found is None:
        return None
    out = Recorded({})
    for line in found.group(1).splitlines():
        line = line.strip()
        if line.startswith("#"):
            meta = re.search(r"commit\s+([^\s,]+),?\s+(\d{4}-\d{2}-\d{2})", line)
            if meta:
                out.commit, out.date = meta.group(1), meta.group(2)
            continue
        parts = line.split(maxsplit=2)
        if len(parts) < 2:
            continue
        try:
            out.ratios[parts[0]] = float(parts[1])
        except ValueError:
            continue  # not a ratio line
    return out


def render_block(ratios: dict[str, float], notes: dict[str, str], commit: str, date: str) -> str:
    """The fenced block for ``ratios`` (``notes``: the text after each value)."""
    width = max((len(k) for k in ratios), default=0)
    lines = [f"```{TAG}", f"# commit {commit}, {date} (bench/quick.py --record)"]
    lines += [f"{k.ljust(width)}  {v:.3f}  {notes.get(k, '')}".rstrip() for k, v in ratios.items()]
    return "\n".join([*lines, "```"]) + "\n"


def replace_block(readme: str, block: str) -> str:
    """``readme`` with its block replaced by ``block``; without one, ``block`` ends the
    "Quick benchmark" section (a new section at the end if there is none)."""
    if _FENCE.search(readme):
        return _FENCE.sub(lambda _m: block, readme, count=1)
    lines = readme.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.startswith(HEADING)), None)
    if start is None:
        text = readme.rstrip("\n")
        return f"{text}\n\n{HEADING}\n\n{block}" if text else f"{HEADING}\n\n{block}"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    section = "".join(lines[start:end]).rstrip("\n")
    rest = "".join(lines[end:])
    return "".join(lines[:start]) + f"{section}\n\n{block}" + (f"\n{rest}" if rest else "")


def compare(now: dict[str, float], recorded: Recorded | None) -> list[Row]:
    """One row per ratio measured now, beside its recorded value (if any)."""
    old = recorded.ratios if recorded is not None else {}
    return [Row(key, value, old.get(key)) for key, value in now.items()]
