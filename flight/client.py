"""The Python SDK: a pymilvus-MilvusClient-shaped client over Arrow Flight.

Imports only pyarrow and Elanus's pure shared modules (never nats or duckdb), so
``import elanus`` stays light. Every server error surfaces as ``ElanusError`` with the
server's stable code; an unreachable proxy is ``UNAVAILABLE``.

``Client``'s public API, by concern (one mixin each; tests/test_sdk_listing.py keeps this
list whole):

- collections (``client_ddl.CollectionAPI``): create_schema, create_collection,
  drop_collection, has_collection, describe_collection, list_collections, rename_collection
- partitions (``client_ddl.PartitionAPI``): create_partition, drop_partition,
  has_partition, list_partitions
- databases (``client_ddl.DatabaseAPI``): create_database, drop_database, list_databases,
  using_database, use_database
- write (``client_write.WriteAPI``): insert, upsert, delete, flush, get_flush_state,
  get_segment_info, compact, get_compaction_state
- import (``client_import.ImportAPI``): bulk_import, upload_file, get_import_state,
  wait_import, list_import_jobs, stage_insert, commit_write, abort_write
- read (``client_read.ReadAPI``): load_collection, load_partitions, release_collection,
  get_load_state, search, query, get, query_iterator, get_collection_stats, read_plan,
  read_schema, read_endpoint
- index (``client_index.IndexAPI``): prepare_index_params, create_index, drop_index,
  describe_index, index_infos, list_indexes, wait_for_index
- index builders (``client_index.BuilderAPI``): claim_index_tasks, index_heartbeat,
  report_index_task
- users and roles (``client_auth.AuthAPI``): whoami, create_user, drop_user,
  update_password, list_users, describe_user, create_role, drop_role, grant_role,
  revoke_role, list_roles, describe_role, grant_privilege, revoke_privilege,
  grant_privilege_v2, revoke_privilege_v2
- cluster (``client_admin.AdminAPI``): list_sessions, health, get_timestamp, list_actions
- connection (``client_base.ClientBase``): uri, timeout, db, close (and ``with Client(...)``)
"""

from __future__ import annotations

from elanus.flight.client_admin import AdminAPI
from elanus.flight.client_auth import AuthAPI
from elanus.flight.client_base import ClientBase
from elanus.flight.client_ddl import CollectionAPI, DatabaseAPI, PartitionAPI
from elanus.flight.client_import import ImportAPI
from elanus.flight.client_index import BuilderAPI
from elanus.flight.client_write import ATOMIC_LIMIT_BYTES, DEFAULT_BATCH_BYTES

__all__ = ["ATOMIC_LIMIT_BYTES", "DEFAULT_BATCH_BYTES", "Client", "ClientBase"]


class Client(CollectionAPI, PartitionAPI, DatabaseAPI, ImportAPI, BuilderAPI, AuthAPI, AdminAPI):
    """``Client("grpc://host:8815")``; methods mirror pymilvus's ``MilvusClient``."""
