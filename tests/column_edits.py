"""Bad inputs made from good ones: a table of known-good columns with some replaced or
removed, so a test names only the column it breaks."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa


def edited_table(columns: Mapping[str, object], changes: Mapping[str, object]) -> pa.Table:
    """``columns`` as a table, each change replacing a column (an array) or removing it
    (None); removing a column that is not there is a KeyError, a mistake in the test."""
    cols = dict(columns)
    for name, value in changes.items():
        if value is None:
            cols.pop(name)
        else:
            cols[name] = value
    return pa.table(cols)
