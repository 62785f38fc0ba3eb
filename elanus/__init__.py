"""Elanus: a distributed vector database on Arrow Flight, NATS JetStream, Lance and DuckDB.

import elanus
client = elanus.connect("grpc://localhost:8815")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from elanus.consistency import ConsistencyLevel
from elanus.errors import ElanusError, ErrorCode
from elanus.functions import Function, FunctionType
from elanus.rankers import AnnSearchRequest, RRFRanker, WeightedRanker
from elanus.schema import DataType, Field, Schema

if TYPE_CHECKING:
    from elanus.client import Client
    from elanus.client.results import LoadState

__all__ = [
    "AnnSearchRequest",
    "Client",
    "ConsistencyLevel",
    "DataType",
    "ElanusError",
    "ErrorCode",
    "Field",
    "Function",
    "FunctionType",
    "LoadState",
    "RRFRanker",
    "Schema",
    "WeightedRanker",
    "connect",
]
__version__ = "0.1.0"


def connect(uri: str = "grpc://localhost:8815", **kwargs: Any) -> Client:
    """Open a client on an Elanus proxy (any Arrow Flight endpoint of one)."""
    from elanus.client import Client

    return Client(uri, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "Client":
        from elanus.client import Client

        return Client
    if name == "LoadState":  # pymilvus's enum, as ``get_load_state`` returns it
        from elanus.client.results import LoadState

        return LoadState
    raise AttributeError(name)
