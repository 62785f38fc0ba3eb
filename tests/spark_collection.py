"""The collection the Spark read and write suites share in shape: 128-d vectors, a short
tag, an int and a nullable double, two shards, loaded."""

from __future__ import annotations

from elanus import DataType, Schema
from elanus.client.client import Client

DIM = 128


def make_collection(client: Client, name: str) -> None:
    """Create and load ``name`` with the shared schema."""
    schema = (
        Schema()
        .add_field("id", DataType.INT64, is_primary=True)
        .add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
        .add_field("tag", DataType.VARCHAR, max_length=16)
        .add_field("n", DataType.INT32)
        .add_field("score", DataType.DOUBLE, nullable=True)
    )
    client.create_collection(name, schema=schema, num_shards=2)
    client.load_collection(name)
