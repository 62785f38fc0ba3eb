"""Authentication and Milvus-style RBAC on a real stack with ``auth_enabled``.

The authorisation matrix: for every privilege, one call it allows, made by a user without
it (refused with PERMISSION_DENIED, nothing changed) and then by a user holding only it
(accepted), through the SDK and through a bare Flight client that speaks the wire protocol
of docs/protocol.md.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from conftest import Stack, bare_collection, own_stack

import elanus
from elanus.client.client import Client
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.backupfiles import list_backups
from elanus.privileges import PRIVILEGES, PUBLIC_GRANTS, ObjectType

ROOT_PASSWORD = "root-secret-1"
BACKUPS = tempfile.mkdtemp(prefix="elanus-auth-backups-")
"""Where the Backup case's backups go (an absolute path outside the stack, as required)."""
atexit.register(shutil.rmtree, BACKUPS, True)
TOKEN_TTL_S = 6.0
SHORT_TTL_S = 3.0
"""The token TTL of a second proxy on the stack, for the expiry test (every test's tokens
come from the first)."""
DIM = 4
INVALID = ErrorCode.INVALID_ARGUMENT


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("auth")
    with own_stack(
        tmp, "auth", auth_enabled=True, root_password=ROOT_PASSWORD, token_ttl_s=TOKEN_TTL_S
    ) as stack:
        root = Client(stack.uri, token=f"root:{ROOT_PASSWORD}")
        root.create_collection("c", dimension=DIM)
        root.insert("c", [{"id": i, "vector": [0.1 * i, 0.2, 0.3, 0.4]} for i in range(10)])
        root.load_collection("c")
        root.create_user("nobody", "nobody-pw")
        yield stack
        root.close()


def root_of(stack: Stack) -> Client:
    return Client(stack.uri, token=f"root:{ROOT_PASSWORD}")


def count(client: Client, collection: str = "c") -> int:
    rows = client.query(collection, "", output_fields=["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"])


# -- the matrix ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    privilege: str
    action: str
    body: Callable[[str], dict[str, Any]]
    """The DoAction body, given the transport's suffix (objects are per transport)."""
    sdk: Callable[[Client, str], Any]
    setup: Callable[[Client, str], Any] = lambda root, t: None
    unchanged: Callable[[Client, str], Any] | None = None
    """Read by root before and after the refused call: must be equal."""


def _row(i: int) -> dict[str, Any]:
    return {"id": i, "vector": [0.5, 0.5, 0.5, 0.5]}


def _create(name: str) -> Callable[[Client, str], Any]:
    return lambda root, t: bare_collection(root, f"{name}_{t}", DIM)


def _loaded(name: str) -> Callable[[Client, str], Any]:
    def setup(root: Client, t: str) -> None:
        root.create_collection(f"{name}_{t}", dimension=DIM)
        root.load_collection(f"{name}_{t}")

    return setup


def _has(name: str) -> Callable[[Client, str], Any]:
    return lambda root, t: root.has_collection(f"{name}_{t}")


def _groups(root: Client, t: str) -> Any:
    return root.list_privilege_groups()


CASES = [
    # Global
    Case("CreateCollection", "create_collection",
         lambda t: {"name": f"new_{t}", "dimension": DIM},
         lambda c, t: bare_collection(c, f"new_{t}", DIM),  # quick setup also indexes
         unchanged=_has("new")),
    Case("DropCollection", "drop_collection", lambda t: {"name": f"drop_{t}"},
         lambda c, t: c.drop_collection(f"drop_{t}"), _create("drop"), _has("drop")),
    Case("DescribeCollection", "describe_collection", lambda t: {"name": "c"},
         lambda c, t: c.describe_collection("c")),
    Case("ShowCollections", "list_collections", lambda t: {},
         lambda c, t: c.list_collections()),
    Case("RenameCollection", "rename_collection",
         lambda t: {"name": f"ren_{t}", "new_name": f"renamed_{t}"},
         lambda c, t: c.rename_collection(f"ren_{t}", f"renamed_{t}"), _create("ren"),
         _has("ren")),
    Case("CreateDatabase", "create_database", lambda t: {"name": f"db_{t}"},
         lambda c, t: c.create_database(f"db_{t}"),
         unchanged=lambda root, t: sorted(root.list_databases())),
    Case("DropDatabase", "drop_database", lambda t: {"name": f"olddb_{t}"},
         lambda c, t: c.drop_database(f"olddb_{t}"),
         lambda root, t: root.create_database(f"olddb_{t}"),
         lambda root, t: sorted(root.list_databases())),
    Case("ListDatabases", "list_databases", lambda t: {}, lambda c, t: c.list_databases()),
    Case("DescribeDatabase", "describe_database", lambda t: {"name": "default"},
         lambda c, t: c.describe_database("default")),
    Case("AlterDatabase", "alter_database_properties",
         lambda t: {"name": f"altdb_{t}", "properties": {"k": "v"}},
         lambda c, t: c.alter_database_properties(f"altdb_{t}", {"k": "v"}),
         lambda root, t: root.create_database(f"altdb_{t}"),
         lambda root, t: root.describe_database(f"altdb_{t}")),
    Case("CreateOwnership", "create_user",
         lambda t: {"user_name": f"made_{t}", "password": "password1"},
         lambda c, t: c.create_user(f"made_{t}", "password1"),
         unchanged=lambda root, t: root.list_users()),
    Case("DropOwnership", "drop_user", lambda t: {"user_name": f"gone_{t}"},
         lambda c, t: c.drop_user(f"gone_{t}"),
         lambda root, t: root.create_user(f"gone_{t}", "password1"),
         lambda root, t: root.list_users()),
    Case("SelectOwnership", "list_roles", lambda t: {}, lambda c, t: c.list_roles()),
    Case("ManageOwnership", "grant_privilege",
         lambda t: {"role_name": f"mr_{t}", "object_type": "Collection",
                    "privilege": "Search", "object_name": "c"},
         lambda c, t: c.grant_privilege(f"mr_{t}", "Collection", "Search", "c"),
         lambda root, t: root.create_role(f"mr_{t}"),
         lambda root, t: root.describe_role(f"mr_{t}")),
    Case("CreateAlias", "create_alias", lambda t: {"collection": "c", "alias": f"al_{t}"},
         lambda c, t: c.create_alias("c", f"al_{t}"),
         unchanged=lambda root, t: root.list_aliases("c")),
    Case("DropAlias", "drop_alias", lambda t: {"alias": f"da_{t}"},
         lambda c, t: c.drop_alias(f"da_{t}"), lambda root, t: root.create_alias("c", f"da_{t}"),
         lambda root, t: root.list_aliases("c")),
    Case("DescribeAlias", "describe_alias", lambda t: {"alias": "c_alias"},
         lambda c, t: c.describe_alias("c_alias"),
         lambda root, t: root.create_alias("c", "c_alias")),
    Case("ListAliases", "list_aliases", lambda t: {"collection": "c"},
         lambda c, t: c.list_aliases("c")),
    Case("DescribeCluster", "list_sessions", lambda t: {}, lambda c, t: c.list_sessions()),
    Case("IndexBuilder", "index_heartbeat", lambda t: {"node_id": f"builder_{t}"},
         lambda c, t: c.index_heartbeat(f"builder_{t}")),
    Case("Backup", "backup_create", lambda t: {"target": BACKUPS, "name": f"b_{t}"},
         lambda c, t: c.create_backup(BACKUPS, name=f"b_{t}"),
         unchanged=lambda root, t: list_backups(BACKUPS)),
    Case("CreatePrivilegeGroup", "create_privilege_group", lambda t: {"group_name": f"pg_{t}"},
         lambda c, t: c.create_privilege_group(f"pg_{t}"), unchanged=_groups),
    Case("DropPrivilegeGroup", "drop_privilege_group", lambda t: {"group_name": f"dg_{t}"},
         lambda c, t: c.drop_privilege_group(f"dg_{t}"),
         lambda root, t: root.create_privilege_group(f"dg_{t}"), _groups),
    Case("ListPrivilegeGroups", "list_privilege_groups", lambda t: {},
         lambda c, t: c.list_privilege_groups()),
    Case("OperatePrivilegeGroup", "add_privileges_to_group",
         lambda t: {"group_name": f"og_{t}", "privileges": ["Search"]},
         lambda c, t: c.add_privileges_to_group(f"og_{t}", ["Search"]),
         lambda root, t: root.create_privilege_group(f"og_{t}"), _groups),
    # Collection
    Case("CreateIndex", "create_index",
         lambda t: {"collection": f"ci_{t}", "field_name": "vector", "index_type": "FLAT",
                    "metric_type": "COSINE"},
         lambda c, t: c.create_index(f"ci_{t}", field_name="vector", index_type="FLAT",
                                     metric_type="COSINE"),
         _create("ci"), lambda root, t: root.list_indexes(f"ci_{t}")),
    Case("DropIndex", "drop_index", lambda t: {"collection": f"di_{t}", "field_name": "vector"},
         lambda c, t: c.drop_index(f"di_{t}", field_name="vector"),
         lambda root, t: (
             bare_collection(root, f"di_{t}", DIM),
             root.create_index(f"di_{t}", field_name="vector", index_type="FLAT",
                               metric_type="COSINE"),
         ),
         lambda root, t: root.list_indexes(f"di_{t}")),
    Case("IndexDetail", "list_indexes", lambda t: {"collection": "c"},
         lambda c, t: c.list_indexes("c")),
    Case("Load", "load_collection", lambda t: {"collection": f"ld_{t}"},
         lambda c, t: c.load_collection(f"ld_{t}"), _create("ld"),
         lambda root, t: root.get_load_state(f"ld_{t}")["state"]),
    Case("GetLoadState", "get_load_state", lambda t: {"collection": "c"},
         lambda c, t: c.get_load_state("c")),
    Case("Release", "release_collection", lambda t: {"collection": f"rel_{t}"},
         lambda c, t: c.release_collection(f"rel_{t}"), _loaded("rel"),
         lambda root, t: root.get_load_state(f"rel_{t}")["state"]),
    Case("Insert", "insert", lambda t: {"op": "insert"},
         lambda c, t: c.insert("c", [_row(100 + len(t))]), unchanged=lambda r, t: count(r)),
    Case("Upsert", "upsert", lambda t: {"op": "upsert"},
         lambda c, t: c.upsert("c", [_row(1)]), unchanged=lambda r, t: count(r)),
    Case("Delete", "delete", lambda t: {"collection": "c", "ids": [2 if t == "sdk" else 3]},
         lambda c, t: c.delete("c", ids=[2]), unchanged=lambda r, t: count(r)),
    Case("Search", "search",
         lambda t: {"collection": "c", "data": [[0.1, 0.2, 0.3, 0.4]], "limit": 3},
         lambda c, t: c.search("c", [[0.1, 0.2, 0.3, 0.4]], limit=3)),
    Case("Query", "query", lambda t: {"collection": "c", "filter": "id >= 0", "limit": 2},
         lambda c, t: c.query("c", "id >= 0", limit=2)),
    Case("Query", "watch_collection", lambda t: {"collection": "c"},
         lambda c, t: c.watch_coordinates("c")),  # the change stream's log coordinates
    Case("Flush", "flush", lambda t: {"collection": "c"}, lambda c, t: c.flush("c")),
    Case("Compaction", "compact", lambda t: {"collection": "c"}, lambda c, t: c.compact("c")),
    Case("Import", "list_import_jobs", lambda t: {"collection": "c"},
         lambda c, t: c.list_import_jobs("c")),
    Case("GetStatistics", "get_collection_stats", lambda t: {"collection": "c"},
         lambda c, t: c.get_collection_stats("c")),
    Case("CreatePartition", "create_partition",
         lambda t: {"collection": "c", "partition": f"p_{t}"},
         lambda c, t: c.create_partition("c", f"p_{t}"),
         unchanged=lambda root, t: root.list_partitions("c")),
    Case("DropPartition", "drop_partition",
         lambda t: {"collection": f"dp_{t}", "partition": "p"},
         lambda c, t: c.drop_partition(f"dp_{t}", "p"),
         lambda root, t: (
             bare_collection(root, f"dp_{t}", DIM),
             root.create_partition(f"dp_{t}", "p"),
         ),
         lambda root, t: root.list_partitions(f"dp_{t}")),
    Case("ShowPartitions", "list_partitions", lambda t: {"collection": "c"},
         lambda c, t: c.list_partitions("c")),
    Case("HasPartition", "has_partition", lambda t: {"collection": "c", "partition": "_default"},
         lambda c, t: c.has_partition("c", "_default")),
    Case("AddCollectionField", "add_collection_field",
         lambda t: {"collection": f"af_{t}",
                    "field": {"name": "extra", "type": "Int64", "nullable": True}},
         lambda c, t: c.add_collection_field(f"af_{t}", "extra", "Int64", nullable=True),
         _create("af"),
         lambda root, t: root.describe_collection(f"af_{t}")["schema"]),
    # User
    Case("UpdateUser", "update_password",
         lambda t: {"user_name": f"pw_{t}", "new_password": "changed-pw"},
         lambda c, t: c.update_password(f"pw_{t}", None, "changed-pw"),
         lambda root, t: root.create_user(f"pw_{t}", "password1")),
    Case("SelectUser", "describe_user", lambda t: {"user_name": "root"},
         lambda c, t: c.describe_user("root")),
]  # fmt: skip


def test_every_privilege_has_a_case() -> None:
    assert {c.privilege for c in CASES} == set(PRIVILEGES)  # Query guards several actions


def _grant_for(privilege: str) -> tuple[str, str, str]:
    kind = PRIVILEGES[privilege]
    if kind == ObjectType.GLOBAL:
        return "Global", "*", "default"
    if kind == ObjectType.USER:
        return "User", "*", "*"
    return "Collection", "*", "default"


def _holder(root: Client, privilege: str) -> str:
    """A user whose one role grants only ``privilege`` (made once per module)."""
    user = f"u_{privilege.lower()}"
    if user not in root.list_users():
        root.create_role(f"r_{privilege.lower()}")
        object_type, name, db = _grant_for(privilege)
        root.grant_privilege(f"r_{privilege.lower()}", object_type, privilege, name, db)
        root.create_user(user, "holder-pw")
        root.grant_role(user, f"r_{privilege.lower()}")
    return user


class BareFlight:
    """The wire protocol by hand: basic-auth handshake, then the bearer on every call."""

    def __init__(self, uri: str, user: str, password: str) -> None:
        self.conn = flight.FlightClient(uri)
        self.header = self.conn.authenticate_basic_token(user, password)

    def options(self) -> flight.FlightCallOptions:
        return flight.FlightCallOptions(headers=[self.header], timeout=30)

    def action(self, name: str, body: dict[str, Any]) -> Any:
        raw = list(
            self.conn.do_action(flight.Action(name, json.dumps(body).encode()), self.options())
        )
        return json.loads(raw[0].body.to_pybytes()) if raw else None

    def put(self, op: str, rows: list[dict[str, Any]]) -> None:
        table = pa.Table.from_pylist(
            rows, pa.schema([("id", pa.int64()), ("vector", pa.list_(pa.float32(), DIM))])
        )
        command = json.dumps({"op": op, "collection": "c", "atomic": True}).encode()
        writer, reader = self.conn.do_put(
            flight.FlightDescriptor.for_command(command), table.schema, self.options()
        )
        writer.write_table(table)
        writer.done_writing()
        reader.read()
        writer.close()

    def call(self, case: Case, t: str) -> Any:
        if case.action in ("insert", "upsert"):
            return self.put(case.action, [_row(200 if case.action == "insert" else 1)])
        return self.action(case.action, case.body(t))

    def close(self) -> None:
        self.conn.close()


def _code(exc: BaseException) -> str:
    if isinstance(exc, ElanusError):
        return str(exc.code)
    text = str(exc)
    return text[text.find("[") + 1 : text.find("]")] if "[" in text else text


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["sdk", "flight"])
@pytest.mark.parametrize("case", CASES, ids=[c.privilege for c in CASES])
def test_privilege_allows_its_call_and_nothing_else_does(
    secured: Stack, case: Case, transport: str
) -> None:
    root = root_of(secured)
    holder = _holder(root, case.privilege)
    case.setup(root, transport)
    public = [g for g in PUBLIC_GRANTS if g[3] == case.privilege]
    for g in public:  # everyone holds it through public: take it away for the refusal
        root.revoke_privilege("public", g[0], g[3], g[1], g[2])

    def run_as(user: str, password: str) -> Any:
        if transport == "sdk":
            with Client(secured.uri, user=user, password=password) as client:
                return case.sdk(client, transport)
        bare = BareFlight(secured.uri, user, password)
        try:
            return bare.call(case, transport)
        finally:
            bare.close()

    try:
        before = case.unchanged(root, transport) if case.unchanged else None
        with pytest.raises((ElanusError, flight.FlightError)) as refused:
            run_as("nobody", "nobody-pw")
        assert _code(refused.value) == "PERMISSION_DENIED", refused.value
        assert case.privilege in str(refused.value)
        if transport == "flight":
            assert isinstance(refused.value, flight.FlightUnauthorizedError)
        if case.unchanged:
            assert case.unchanged(root, transport) == before
    finally:
        for g in public:
            root.grant_privilege("public", g[0], g[3], g[1], g[2])
    run_as(holder, "holder-pw")  # raises if refused
    root.close()


# -- scopes, roles, built-ins ---------------------------------------------------------------
def test_a_collection_grant_covers_that_collection_only(secured: Stack) -> None:
    root = root_of(secured)
    root.create_collection("other", dimension=DIM)
    root.load_collection("other")
    root.create_role("c_searcher")
    root.grant_privilege_v2("c_searcher", "Query", "c")
    root.create_user("carol", "carol-pw")
    root.grant_role("carol", "c_searcher")
    carol = Client(secured.uri, token="carol:carol-pw")
    assert carol.query("c", "id < 3", consistency_level="Strong")
    with pytest.raises(ElanusError) as denied:
        carol.query("other", "id < 3")
    assert denied.value.code == ErrorCode.PERMISSION_DENIED
    assert "'other'" in denied.value.message
    # a Database grant covers every collection of that database
    root.grant_privilege("c_searcher", "Database", "Query", "default")
    carol.query("other", "id < 3")
    # a privilege group
    root.grant_privilege("c_searcher", "Collection", "CollectionReadWrite", "other")
    carol.insert("other", [_row(7)])
    # revoking takes effect at once (the coord tells every proxy)
    root.revoke_privilege("c_searcher", "Collection", "CollectionReadWrite", "other")
    with pytest.raises(ElanusError) as again:
        carol.insert("other", [_row(8)])
    assert again.value.code == ErrorCode.PERMISSION_DENIED
    root.revoke_role("carol", "c_searcher")
    with pytest.raises(ElanusError):
        carol.query("c", "id < 3")
    assert root.describe_user("carol") == {"user_name": "carol", "roles": []}
    carol.close()
    root.close()


@pytest.mark.filterwarnings("ignore:Cannot disable autocommit")  # ADBC: no transactions
def test_sql_takes_the_privileges_of_query_and_search(secured: Stack) -> None:
    """Flight SQL (docs/sql.md) on the secured port: ADBC's driver logs in with the basic
    handshake; a statement needs Query on what it reads, Search on what it vector-searches."""
    import adbc_driver_flightsql.dbapi as flight_sql

    root = root_of(secured)
    root.create_role("sql_reader")
    root.grant_privilege_v2("sql_reader", "Query", "c")
    root.create_user("sqlu", "sqlu-pw")
    root.grant_role("sqlu", "sql_reader")
    logins = {
        "username": "sqlu",
        "password": "sqlu-pw",
        "adbc.flight.sql.rpc.call_header.elanus-consistency-level": "Strong",
    }
    search = "SELECT id FROM vector_search('c', [0.1, 0.2, 0.3, 0.4], 2)"
    with flight_sql.connect(secured.uri, db_kwargs=logins) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM c")
        assert cur.fetchone()[0] == count(root)
        with pytest.raises(Exception, match=r"PERMISSION_DENIED.*Search"):
            cur.execute(search)
    root.grant_privilege_v2("sql_reader", "Search", "c")
    sqlu = Client(secured.uri, token="sqlu:sqlu-pw")
    assert sqlu.sql(search, consistency_level="Strong").num_rows == 2
    root.revoke_privilege_v2("sql_reader", "Query", "c")
    with pytest.raises(ElanusError) as denied:
        sqlu.sql("SELECT count(*) FROM c")
    assert denied.value.code == ErrorCode.PERMISSION_DENIED
    with pytest.raises(Exception, match="UNAUTHENTICATED"):
        flight_sql.connect(secured.uri).cursor().execute("SELECT 1")
    sqlu.close()
    root.close()


def test_admin_role_and_builtins(secured: Stack) -> None:
    root = root_of(secured)
    assert {"admin", "public"} <= set(root.list_roles())
    assert root.whoami() == {"user": "root", "roles": ["admin"], "superuser": True}
    root.create_user("dana", "dana-pw-1")
    root.grant_role("dana", "admin")
    dana = Client(secured.uri, user="dana", password="dana-pw-1")
    dana.create_collection("by_dana", dimension=DIM)
    dana.drop_collection("by_dana")
    for call, code in [
        (lambda: root.drop_user("root"), ErrorCode.INVALID_ARGUMENT),
        (lambda: root.drop_role("admin"), ErrorCode.INVALID_ARGUMENT),
        (lambda: root.drop_role("public"), ErrorCode.INVALID_ARGUMENT),
        (lambda: root.create_user("dana", "whatever1"), ErrorCode.USER_ALREADY_EXISTS),
        (lambda: root.create_user("bad name", "whatever1"), ErrorCode.INVALID_ARGUMENT),
        (lambda: root.create_user("shorty", "abc"), ErrorCode.INVALID_ARGUMENT),
        (lambda: root.grant_role("dana", "no_such_role"), ErrorCode.ROLE_NOT_FOUND),
        (lambda: root.describe_role("no_such_role"), ErrorCode.ROLE_NOT_FOUND),
        (lambda: root.grant_privilege("admin", "Global", "All", "*"), ErrorCode.INVALID_ARGUMENT),
        (lambda: root.grant_privilege("public", "Galaxy", "Search", "*"), INVALID),
        (lambda: root.grant_privilege("public", "Collection", "Fly", "c"), INVALID),
        (lambda: root.grant_privilege("public", "Collection", "CreateCollection", "c"),
         ErrorCode.INVALID_ARGUMENT),
    ]:  # fmt: skip
        with pytest.raises(ElanusError) as refused:
            call()
        assert refused.value.code == code, refused.value
    # a role still bound needs force_drop
    root.create_role("temp")
    root.grant_role("dana", "temp")
    with pytest.raises(ElanusError):
        root.drop_role("temp")
    root.drop_role("temp", force_drop=True)
    assert "temp" not in root.list_roles()
    root.drop_user("dana")
    with pytest.raises(ElanusError) as gone:
        dana.list_collections()
    assert gone.value.code == ErrorCode.UNAUTHENTICATED
    dana.close()
    root.close()


def test_users_describe_themselves_and_change_their_own_password(secured: Stack) -> None:
    root = root_of(secured)
    root.create_user("erin", "erin-pw-1")
    erin = Client(secured.uri, user="erin", password="erin-pw-1")
    assert erin.describe_user("erin") == {"user_name": "erin", "roles": []}
    assert erin.whoami()["superuser"] is False
    with pytest.raises(ElanusError) as wrong:
        erin.update_password("erin", "not-my-password", "erin-pw-2")
    assert wrong.value.code == ErrorCode.UNAUTHENTICATED
    with pytest.raises(ElanusError) as other:
        erin.update_password("root", None, "hijacked-1")
    assert other.value.code == ErrorCode.PERMISSION_DENIED
    erin.update_password("erin", "erin-pw-1", "erin-pw-2", reset_connection=True)
    assert erin.whoami()["user"] == "erin"  # logged in again with the new password
    with pytest.raises(ElanusError) as old:
        Client(secured.uri, user="erin", password="erin-pw-1")
    assert old.value.code == ErrorCode.UNAUTHENTICATED
    erin.close()
    root.close()


# -- authentication -------------------------------------------------------------------------
def test_anonymous_and_wrong_credentials_are_refused(secured: Stack) -> None:
    before = count(root_of(secured))
    conn = flight.FlightClient(secured.uri)
    calls: list[Callable[[], Any]] = [
        lambda: list(conn.do_action(flight.Action("health", b"{}"))),
        lambda: list(conn.list_actions()),
        lambda: conn.get_flight_info(
            flight.FlightDescriptor.for_command(json.dumps({"collection": "c"}).encode())
        ),
        lambda: conn.do_get(flight.Ticket(json.dumps({"collection": "c"}).encode())).read_all(),
    ]
    for call in calls:
        with pytest.raises(flight.FlightUnauthenticatedError) as refused:
            call()
        assert "[UNAUTHENTICATED]" in str(refused.value)
    with pytest.raises(flight.FlightUnauthenticatedError):
        conn.authenticate_basic_token("root", "wrong-password")
    with pytest.raises(flight.FlightUnauthenticatedError):
        conn.authenticate_basic_token("no_such_user", "whatever")
    forged = [(b"authorization", b"Bearer eyJ1Ijoicm9vdCJ9.bm90LWEtbWFj")]
    with pytest.raises(flight.FlightUnauthenticatedError):
        list(
            conn.do_action(flight.Action("health", b"{}"), flight.FlightCallOptions(headers=forged))
        )
    table = pa.table({"id": pa.array([500], pa.int64()),
                      "vector": pa.array([[0.1] * DIM], pa.list_(pa.float32(), DIM))})  # fmt: skip
    with pytest.raises(flight.FlightUnauthenticatedError):
        writer, _ = conn.do_put(
            flight.FlightDescriptor.for_command(b'{"collection":"c","op":"insert"}'), table.schema
        )
        writer.write_table(table)
        writer.close()
    with pytest.raises(ElanusError) as sdk:
        elanus.connect(secured.uri).list_collections()
    assert sdk.value.code == ErrorCode.UNAUTHENTICATED
    with pytest.raises(ElanusError) as bad:
        elanus.connect(secured.uri, token="root:nope")
    assert bad.value.code == ErrorCode.UNAUTHENTICATED
    conn.close()
    assert count(root_of(secured)) == before


@pytest.mark.slow
def test_tokens_expire_and_a_password_change_revokes_them(secured: Stack) -> None:
    root = root_of(secured)
    root.create_user("frank", "frank-pw-1")
    bare = BareFlight(secured.uri, "frank", "frank-pw-1")
    assert bare.action("whoami", {})["user"] == "frank"
    root.update_password("frank", None, "frank-pw-2")  # root resets it
    with pytest.raises(flight.FlightUnauthenticatedError) as revoked:
        bare.action("whoami", {})
    assert "revoked" in str(revoked.value)
    bare.close()
    short = secured.add_proxy(token_ttl_s=SHORT_TTL_S)
    try:
        bare = BareFlight(short.uri, "frank", "frank-pw-2")
        sdk = Client(short.uri, user="frank", password="frank-pw-2")
        issued = time.time()  # both tokens expire SHORT_TTL_S after their handshake at most
        assert bare.action("whoami", {})["user"] == "frank"
        assert sdk.whoami()["user"] == "frank"
        time.sleep(SHORT_TTL_S / 2)
        assert sdk.whoami()["user"] == "frank"  # the same token, half way through its life
        time.sleep(max(0.0, issued + SHORT_TTL_S + 0.1 - time.time()))
        with pytest.raises(flight.FlightUnauthenticatedError) as expired:
            bare.action("whoami", {})
        assert "expired" in str(expired.value)
        bare.close()
        # the SDK renews its token by itself before it expires
        assert sdk.whoami()["user"] == "frank"
        sdk.close()
    finally:
        secured.stop_proxy(short)
    root.close()


def test_basic_credentials_work_on_any_call(secured: Stack) -> None:
    """A client that cannot hold a token may send basic credentials on each call."""
    import base64

    conn = flight.FlightClient(secured.uri)
    basic = base64.b64encode(f"root:{ROOT_PASSWORD}".encode())
    options = flight.FlightCallOptions(headers=[(b"authorization", b"Basic " + basic)])
    out = list(conn.do_action(flight.Action("whoami", b"{}"), options))
    assert json.loads(out[0].body.to_pybytes())["user"] == "root"
    conn.close()


def test_root_password_is_generated_owner_only(tmp_path: Path) -> None:
    with own_stack(tmp_path, "gen", auth_enabled=True) as stack:
        path = Path(stack.settings.data_dir) / "root_password"
        assert path.stat().st_mode & 0o777 == 0o600
        password = path.read_text().strip()
        assert len(password) >= 16
        assert Client(stack.uri, token=f"root:{password}").whoami()["user"] == "root"
        with pytest.raises(ElanusError):
            Client(stack.uri, token="root:Milvus")


def test_bulk_import_needs_the_import_privilege(secured: Stack, tmp_path: Path) -> None:
    """The upload stream and the import job both need Import on the collection; a user
    with only Insert may not make the server read files."""
    root = root_of(secured)
    data = tmp_path / "rows.jsonl"
    rows = [{"id": 9000 + i, "vector": [0.3] * DIM} for i in range(5)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    root.create_role("inserter")
    root.grant_privilege("inserter", "Collection", "Insert", "c")
    root.create_user("ivan", "ivan-pw-1")
    root.grant_role("ivan", "inserter")
    ivan = Client(secured.uri, token="ivan:ivan-pw-1")
    with pytest.raises(ElanusError) as denied:
        ivan.upload_file("c", data)
    assert denied.value.code == ErrorCode.PERMISSION_DENIED and "Import" in denied.value.message
    with pytest.raises(ElanusError) as job:
        ivan.bulk_import("c", ["rows.jsonl"], upload=False)
    assert job.value.code == ErrorCode.PERMISSION_DENIED
    root.grant_privilege("inserter", "Collection", "Import", "c")
    before = count(root)
    job_id = ivan.bulk_import("c", [str(data)], upload=True)
    assert ivan.wait_import(job_id, timeout=60)["state"] == "Completed"
    assert count(root) == before + 5
    ivan.close()
    root.close()


def test_rate_limits_are_per_user(tmp_path: Path) -> None:
    """One user over the DML rate is refused (RATE_LIMITED, nothing written); another
    user's bucket is untouched."""
    with own_stack(
        tmp_path, "rates", auth_enabled=True, root_password=ROOT_PASSWORD, dml_rate_per_user=3
    ) as stack:
        root = root_of(stack)
        root.create_collection("r", dimension=DIM)
        root.load_collection("r")
        root.create_role("w")
        root.grant_privilege("w", "Collection", "Insert", "r")
        for user in ("hank", "iris"):
            root.create_user(user, f"{user}-pw-1")
            root.grant_role(user, "w")
        hank = Client(stack.uri, token="hank:hank-pw-1", retry_deadline_s=0)  # no retries
        iris = Client(stack.uri, token="iris:iris-pw-1")
        accepted, refused = 0, 0
        for i in range(12):
            try:
                hank.insert("r", [_row(i)])
                accepted += 1
            except ElanusError as exc:
                assert exc.code == "RATE_LIMITED" and "'hank'" in exc.message
                refused += 1
        assert refused > 0 and accepted >= 3
        iris.insert("r", [_row(100)])  # her own bucket is full
        assert count(root, "r") == accepted + 1
        for c in (hank, iris, root):
            c.close()
