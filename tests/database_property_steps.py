"""The database-property requests ``test_database_properties`` sends both to Milvus Lite
(in a child Python, which imports this module alone) and to the Milvus port: one list of
calls, so the two answers compared come from the very same requests."""

from __future__ import annotations

from typing import Any

from pymilvus import MilvusClient


def described_steps(c: MilvusClient) -> list[dict[str, Any]]:
    """Properties set at creation, altered, dropped; ``describe_database`` after each."""
    out: list[dict[str, Any]] = []
    c.create_database("d1", properties={"database.max.collections": "5", "foo": "bar"})
    out.append(c.describe_database("d1"))
    c.alter_database_properties("d1", {"database.force.deny.writing": "false", "x.y": "1"})
    out.append(c.describe_database("d1"))
    c.alter_database_properties("d1", {"foo": "baz"})
    out.append(c.describe_database("d1"))
    c.drop_database_properties("d1", ["foo", "never.set"])  # an unset key: no change
    out.append(c.describe_database("d1"))
    c.create_database("d2")
    out.append(c.describe_database("d2"))
    return out
