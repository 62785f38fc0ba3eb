"""The Python SDK: a pymilvus-MilvusClient-shaped client over Arrow Flight.

Imports only pyarrow and Elanus's pure shared modules (never nats or duckdb), so
``import elanus`` stays light. Every server error surfaces as ``ElanusError`` with the
server's stable code; an unreachable proxy is ``UNAVAILABLE``.

``Client``'s public API is one mixin per concern; ``Client`` adds nothing of its own.
``print(Client.__doc__)`` (or ``help``) lists every public method by concern, made from
the mixins themselves, so a new method is listed where it is written:

- collections, partitions, databases: ``client_ddl`` (``CollectionAPI``,
  ``PartitionAPI``, ``DatabaseAPI``)
- write: ``client_write.WriteAPI``; bulk import and staged writes:
  ``client_import.ImportAPI``
- read: ``client_read.ReadAPI``; hybrid search: ``client_hybrid.HybridAPI``; paging
  iterators: ``client_iterators.IteratorAPI``; many single queries over one stream:
  ``client.stream.StreamAPI``
- indexes and index builders: ``client_index`` (``IndexAPI``, ``BuilderAPI``)
- users and roles: ``client_auth.AuthAPI``
- segments and partition statistics: ``client_segments.SegmentAPI``
- SQL over collections (Flight SQL): ``client.sql.SqlAPI``
- the change stream (reads the log, not the proxy): ``client.changes.WatchAPI``
- collection snapshots: ``client.snapshots.SnapshotAPI``
- cluster: ``client_admin.AdminAPI``; connection: ``client_base.ClientBase``
"""

from __future__ import annotations

from elanus.client.admin import AdminAPI
from elanus.client.auth import AuthAPI
from elanus.client.base import ClientBase
from elanus.client.changes import WatchAPI
from elanus.client.ddl import CollectionAPI, DatabaseAPI, PartitionAPI
from elanus.client.hybrid import HybridAPI
from elanus.client.imports import ImportAPI
from elanus.client.index import BuilderAPI
from elanus.client.iterators import IteratorAPI
from elanus.client.segments import SegmentAPI
from elanus.client.snapshots import SnapshotAPI
from elanus.client.sql import SqlAPI
from elanus.client.stream import StreamAPI
from elanus.client.write import ATOMIC_LIMIT_BYTES, DEFAULT_BATCH_BYTES

__all__ = ["ATOMIC_LIMIT_BYTES", "DEFAULT_BATCH_BYTES", "Client", "ClientBase"]


class Client(
    CollectionAPI,
    HybridAPI,
    PartitionAPI,
    DatabaseAPI,
    ImportAPI,
    BuilderAPI,
    AuthAPI,
    AdminAPI,
    IteratorAPI,
    StreamAPI,
    SegmentAPI,
    SqlAPI,
    WatchAPI,
    SnapshotAPI,
):
    """``Client("grpc://host:8815")``; methods mirror pymilvus's ``MilvusClient``."""


def api_listing(cls: type) -> str:
    """Every public method of ``cls``, under the mixin (concern) that defines it."""
    lines = []
    for base in cls.__mro__[1:]:
        if base is object:
            continue
        names = [n for n in vars(base) if not n.startswith("_")]
        if names:
            lines.append(f"- {base.__name__}: {', '.join(names)}")
    return "\n".join(lines)


Client.__doc__ = f"{Client.__doc__}\n\n{api_listing(Client)}"
