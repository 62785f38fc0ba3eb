"""bench/quick.py's recorded block in bench/README.md: parsed, compared (a ratio that fell by
more than 15 % is flagged) and rewritten, on synthetic README texts (no servers)."""

from __future__ import annotations

import pytest
from bench_modules import load_bench_module

record = load_bench_module("_record.py", "bench_record")

README = """# Benchmarks

Some text.

## Quick benchmark

What the rows are.

```quick-bench
# commit abc1234, 2025-06-01 (bench/quick.py --record)
ingest_ack      0.500  insert to last ack / raw JetStream (300,000 / 600,000 rows/s)
cross_process   0.400  query node in its own process / in-process (SDK)
```

## Transport

More text.
"""


def test_parse_reads_ratios_commit_and_date() -> None:
    rec = record.parse_block(README)
    assert rec is not None
    assert rec.ratios == {"ingest_ack": 0.5, "cross_process": 0.4}
    assert (rec.commit, rec.date) == ("abc1234", "2025-06-01")


def test_parse_without_a_block_is_none() -> None:
    assert record.parse_block("# Benchmarks\n\n## Quick benchmark\n\nNothing yet.\n") is None
    assert record.parse_block("") is None


def test_parse_skips_lines_that_are_not_ratios() -> None:
    text = "```quick-bench\n# no commit here\nfoo bar baz\nok 1.25 fine\n\n```\n"
    rec = record.parse_block(text)
    assert rec is not None and rec.ratios == {"ok": 1.25}
    assert (rec.commit, rec.date) == ("?", "?")


@pytest.mark.parametrize(
    ("now", "fell"),
    [(0.5, False), (0.43, False), (0.425, False), (0.42, True), (0.1, True), (0.9, False)],
)
def test_a_fall_of_more_than_15_percent_is_flagged(now: float, fell: bool) -> None:
    (row,) = record.compare({"ingest_ack": now}, record.parse_block(README))
    assert row.recorded == 0.5
    assert row.fell is fell
    assert row.change == pytest.approx(now / 0.5 - 1)


def test_compare_without_a_record_flags_nothing() -> None:
    rows = record.compare({"ingest_ack": 0.1, "new_ratio": 2.0}, None)
    assert [(r.key, r.recorded, r.change, r.fell) for r in rows] == [
        ("ingest_ack", None, None, False),
        ("new_ratio", None, None, False),
    ]
    # a ratio the record does not have yet is not flagged either
    (_, new) = record.compare({"ingest_ack": 0.5, "new_ratio": 2.0}, record.parse_block(README))
    assert (new.recorded, new.fell) == (None, False)


def test_record_round_trips_and_replaces_the_block_in_place() -> None:
    block = record.render_block(
        {"ingest_ack": 0.61234, "search_vs_empty": 0.7},
        {"ingest_ack": "insert to last ack / raw JetStream"},
        "def5678",
        "2025-07-02",
    )
    text = record.replace_block(README, block)
    rec = record.parse_block(text)
    assert rec is not None
    assert rec.ratios == {"ingest_ack": 0.612, "search_vs_empty": 0.7}
    assert (rec.commit, rec.date) == ("def5678", "2025-07-02")
    assert text.count("```quick-bench") == 1
    # everything around the block is kept
    before, after = README.split("```quick-bench")[0], README.split("```\n", 1)[1]
    assert text.startswith(before) and text.endswith(after)


def test_record_without_a_block_ends_the_quick_section() -> None:
    readme = "# B\n\n## Quick benchmark\n\nWhat the rows are.\n\n## Transport\n\nText.\n"
    block = record.render_block({"x": 1.0}, {}, "c", "2025-01-01")
    text = record.replace_block(readme, block)
    assert text == (
        f"# B\n\n## Quick benchmark\n\nWhat the rows are.\n\n{block}\n## Transport\n\nText.\n"
    )
    assert record.parse_block(text).ratios == {"x": 1.0}  # type: ignore[union-attr]
    # recording again replaces it
    again = record.replace_block(text, record.render_block({"x": 2.0}, {}, "d", "2025-01-02"))
    assert again.count("```quick-bench") == 1
    assert record.parse_block(again).ratios == {"x": 2.0}  # type: ignore[union-attr]


def test_record_without_the_section_appends_one() -> None:
    block = record.render_block({"x": 1.0}, {}, "c", "2025-01-01")
    assert record.replace_block("# B\n\nText.\n", block) == (
        f"# B\n\nText.\n\n## Quick benchmark\n\n{block}"
    )
    assert record.replace_block("", block) == f"## Quick benchmark\n\n{block}"
    # the section may be the README's last
    text = record.replace_block("# B\n\n## Quick benchmark\n\nRows.\n", block)
    assert text == f"# B\n\n## Quick benchmark\n\nRows.\n\n{block}"
