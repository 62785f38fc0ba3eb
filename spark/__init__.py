"""Elanus on Apache Spark: the ``elanus`` DataFrame data source and a session helper.

Importing this package does not import pyspark; ``elanus.spark.session`` and
``elanus.spark.ElanusDataSource`` load it on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ElanusDataSource", "read_partitions", "session", "shutdown"]


def __getattr__(name: str) -> Any:
    if name in ("session", "shutdown"):
        from elanus.spark import sessions

        return getattr(sessions, name)
    if name in ("ElanusDataSource", "read_partitions"):
        from elanus.spark import source

        return getattr(source, name)
    raise AttributeError(f"module 'elanus.spark' has no attribute {name!r}")
