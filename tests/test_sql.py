"""SQL over collections through Flight SQL (docs/sql.md), with real clients on one standalone
server: ADBC's Flight SQL driver (its DB-API and ``pandas.read_sql``), the SDK's
``client.sql`` and ``elanus sql``. A statement counts, groups, joins and vector-searches at one
timestamp and gets the rows ``query`` and ``search`` return at that timestamp; writes are
refused; the limits hold; docs/sql.md's examples run as written."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as flight_sql
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import StandaloneProcess, cli_env, raises_code, run_elanus

from elanus.client.client import Client
from elanus.errors import ElanusError, ErrorCode
from elanus.flight.sql.readahead import readahead

pytestmark = pytest.mark.filterwarnings("ignore:Cannot disable autocommit")  # ADBC: no transactions
DOC = Path(__file__).resolve().parent.parent / "docs" / "sql.md"
DIM = 8
N = 600
INVALID = ErrorCode.INVALID_ARGUMENT
LIMITS = {
    "ELANUS_SQL_TIMEOUT_S": "8",
    "ELANUS_SQL_MEMORY_LIMIT_MB": "64",
    "ELANUS_SQL_MAX_RESULT_MB": "2",
    "ELANUS_SQL_MAX_STATEMENTS": "1",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """A standalone with small SQL limits, holding ``shelf`` (two shards, two partitions,
    sealed and growing rows, deletes, a JSON field, dynamic fields) and ``writers``."""
    sp = StandaloneProcess(
        tmp_path_factory.mktemp("sql") / "data",
        "--milvus-port",
        "0",
        env={**LIMITS, "ELANUS_SEGMENT_MAX_ROWS": "200"},
    )
    try:
        sp.start().wait_ready()
        with Client(sp.uri) as c:
            _fill(c)
        yield sp
    finally:
        sp.stop()


def _fill(c: Client) -> None:
    c.create_collection(
        "writers",
        schema={
            "fields": [
                {"name": "author_id", "type": "Int64", "is_primary": True},
                {"name": "name", "type": "VarChar", "max_length": 32},
                {"name": "vector", "type": "FloatVector", "dim": 2},
            ]
        },
        consistency_level="Strong",
    )
    c.create_collection(
        "shelf",
        schema={
            "fields": [
                {"name": "id", "type": "Int64", "is_primary": True},
                {"name": "title", "type": "VarChar", "max_length": 32},
                {"name": "year", "type": "Int64"},
                {"name": "author_id", "type": "Int64"},
                {"name": "info", "type": "JSON"},
                {"name": "vector", "type": "FloatVector", "dim": DIM},
            ],
            "enable_dynamic_field": True,
        },
        num_shards=2,
        consistency_level="Strong",
    )
    c.create_partition("shelf", "old")
    for name in ("writers", "shelf"):
        c.create_index(name, field_name="vector", metric_type="L2")
        c.load_collection(name)
    c.insert("writers", [{"author_id": i, "name": f"w{i}", "vector": [0.0, 0.0]} for i in range(7)])
    c.insert("shelf", _rows(0, 300), partition_name="old")
    c.flush("shelf")  # sealed segments, then growing ones
    c.insert("shelf", _rows(300, N - 300))
    c.delete("shelf", filter="id % 17 == 3")


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(start)
    return [
        {
            "id": i,
            "title": f"t{i}",
            "year": 1990 + i % 30,
            "author_id": i % 7,
            "info": {"pages": 100 + i},
            "vector": rng.random(DIM).tolist(),
            "color": ["red", "blue"][i % 2],
        }
        for i in range(start, start + n)
    ]


@pytest.fixture(scope="module")
def client(served: StandaloneProcess) -> Iterator[Client]:
    with Client(served.uri) as c:
        yield c


@pytest.fixture(scope="module")
def conn(served: StandaloneProcess) -> Iterator[Any]:
    with flight_sql.connect(served.uri) as connection:
        yield connection


def fetch(conn: Any, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return [tuple(r) for r in cur.fetchall()]


def strong_ts(client: Client) -> int:
    """A timestamp every write so far is at or below (a Strong query's)."""
    body = {"collection": "shelf", "output_fields": ["count(*)"], "consistency_level": "Strong"}
    return int(client._action("query", body)["ts"])


# -- the bar: the same rows as query and search at the same timestamp ------------------
def test_counts_groups_and_joins_equal_query_at_one_timestamp(conn: Any, client: Client) -> None:
    ts = strong_ts(client)
    client.insert("shelf", _rows(5000, 20))  # after ts: no statement at ts sees them
    client.delete("shelf", [1, 2, 301])
    at = f"AT (VERSION => {ts})"
    rows = client.query(
        "shelf",
        "",
        output_fields=["id", "year", "author_id", "info", "color"],
        as_of=ts,
        limit=10_000,
    )
    assert len(rows) == N - len([i for i in range(N) if i % 17 == 3])
    assert fetch(conn, f"SELECT count(*) FROM shelf {at}") == [(len(rows),)]
    by_year = Counter(r["year"] for r in rows)
    assert fetch(conn, f"SELECT year, count(*) FROM shelf {at} GROUP BY year ORDER BY year") == (
        sorted(by_year.items())
    )
    names = {r["author_id"]: f"w{r['author_id']}" for r in rows}
    per_name = Counter(names[r["author_id"]] for r in rows if r["year"] >= 2010)
    joined = fetch(
        conn,
        f"SELECT w.name, count(*) FROM shelf s {at} JOIN writers w {at} USING (author_id) "
        "WHERE s.year >= ? GROUP BY w.name ORDER BY w.name",
        (2010,),
    )
    assert joined == sorted(per_name.items())
    # JSON fields and dynamic fields, as JSON; rows in key order, the deletes applied
    got = fetch(
        conn,
        f"""SELECT id, (info->>'pages')::INT, "$meta"->>'color' FROM shelf {at} ORDER BY id""",
    )
    assert got == [
        (r["id"], r["info"]["pages"], r["color"]) for r in sorted(rows, key=lambda r: r["id"])
    ]
    # now (Strong by the collection's level): the later writes are in
    assert fetch(conn, "SELECT count(*) FROM shelf") == [(len(rows) + 20 - 3,)]


def test_partitions_are_a_column(conn: Any, client: Client) -> None:
    ts = strong_ts(client)
    got = fetch(
        conn,
        f'SELECT "$partition", count(*) FROM shelf AT (VERSION => {ts}) GROUP BY 1 ORDER BY 1',
    )
    expected = [
        (
            p,
            len(
                client.query(
                    "shelf", "", output_fields=["id"], partition_names=[p], as_of=ts, limit=10_000
                )
            ),
        )
        for p in ("_default", "old")
    ]
    assert got == expected


def test_vector_search_in_sql_equals_search(conn: Any, client: Client) -> None:
    ts = strong_ts(client)
    q = np.random.default_rng(99).random(DIM).tolist()
    hits = client.search(
        "shelf",
        [q],
        limit=5,
        filter="year > 2005",
        output_fields=["author_id"],
        as_of=ts,
    )[0]
    vec = "[" + ", ".join(repr(x) for x in q) + "]"
    got = fetch(
        conn,
        f"SELECT v.id, v.distance, v.author_id, w.name FROM vector_search('shelf', {vec}, 5, "
        "filter => 'year > 2005', output_fields => ['author_id']) AS v "
        f"JOIN writers w AT (VERSION => {ts}) USING (author_id) "
        f"JOIN shelf s AT (VERSION => {ts}) USING (id) ORDER BY v.distance",
    )
    assert [(g[0], g[2], g[3]) for g in got] == [
        (h["id"], h["entity"]["author_id"], f"w{h['entity']['author_id']}") for h in hits
    ]
    assert [g[1] for g in got] == pytest.approx([h["distance"] for h in hits], rel=1e-5)
    # parameters reach vector_search's arguments too
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM vector_search('shelf', ?, ?, filter => 'year > 2005')", (q, 3))
        assert [r[0] for r in cur.fetchall()] == [h["id"] for h in hits[:3]]


def test_every_field_type_reads_as_query_returns_it(conn: Any, client: Client) -> None:
    """Half-float vectors widen to float lists, sparse vectors are maps, arrays lists."""
    client.create_collection(
        "mixed",
        schema={
            "fields": [
                {"name": "pk", "type": "VarChar", "is_primary": True, "max_length": 8},
                {"name": "flag", "type": "Bool", "nullable": True},
                {"name": "tags", "type": "Array", "element_type": "Int32", "max_capacity": 4},
                {"name": "half", "type": "Float16Vector", "dim": 2},
                {"name": "brain", "type": "BFloat16Vector", "dim": 2},
                {"name": "sparse", "type": "SparseFloatVector"},
            ]
        },
        consistency_level="Strong",
    )
    for field, metric in (("half", "L2"), ("brain", "L2"), ("sparse", "IP")):
        client.create_index("mixed", field_name=field, metric_type=metric)
    client.load_collection("mixed")
    client.insert(
        "mixed",
        [
            {"pk": "a", "flag": True, "tags": [1, 2], "half": [0.5, 1.5], "brain": [2.0, -1.0],
             "sparse": {3: 0.25, 7: 1.0}},
            {"pk": "b", "flag": None, "tags": [], "half": [0.0, 1.0], "brain": [0.5, 0.5],
             "sparse": {1: 2.0}},
        ],
    )  # fmt: skip
    got = client.sql("SELECT * FROM mixed ORDER BY pk").to_pylist()
    want = client.query("mixed", "", output_fields=["*"], limit=10, consistency_level="Strong")
    for row in [*got, *want]:  # a map in SQL, [index, value] pairs from query
        row["sparse"] = {int(k): v for k, v in row["sparse"]}
    assert got == sorted(want, key=lambda r: r["pk"])
    assert fetch(conn, "SELECT pk, half[2], brain[1], sparse[7] FROM mixed ORDER BY pk") == [
        ("a", 1.5, 2.0, 1.0),
        ("b", 1.0, 0.5, None),
    ]


def test_a_large_result_streams_in_batches(conn: Any, client: Client) -> None:
    """A result of many batches (here 24,000 rows) comes as a stream, every row once."""
    ts = strong_ts(client)
    ids = [r["id"] for r in client.query("shelf", "", output_fields=["id"], as_of=ts, limit=10_000)]
    with conn.cursor() as cur:
        cur.execute(f"SELECT s.id, t.range FROM shelf s AT (VERSION => {ts}), range(40) t")
        batches = list(cur.fetch_record_batch())
    assert len(batches) > 1
    got = pa.Table.from_batches(batches)
    assert Counter(got.column("id").to_pylist()) == {i: 40 for i in ids}
    assert got.num_rows == 40 * len(ids)


def test_readahead_keeps_order_raises_in_place_and_stops_when_abandoned() -> None:
    """The pages of a scan come in order, an error where it happened, and a scan DuckDB
    leaves early (``LIMIT``) leaves no reader behind."""

    def failing() -> Iterator[int]:
        yield from range(5)
        raise ValueError("page 5")

    got: list[int] = []
    with pytest.raises(ValueError, match="page 5"):
        for item in readahead(failing(), depth=2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]

    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            yield from itertools.count()
        finally:
            closed.set()

    items = readahead(endless(), depth=1, name="readahead-under-test")
    assert [next(items), next(items)] == [0, 1]
    items.close()
    assert closed.wait(10), "the source was never closed"
    for thread in threading.enumerate():
        if thread.name == "readahead-under-test":
            thread.join(10)
            assert not thread.is_alive()


# -- clients --------------------------------------------------------------------------------
def test_pandas_read_sql_and_the_sdk(conn: Any, client: Client) -> None:
    frame = pd.read_sql("SELECT id, title FROM shelf WHERE id < 5 ORDER BY id", conn)
    assert frame["title"].tolist() == ["t0", "t4"]  # 1, 2 and 3 were deleted
    table = client.sql("SELECT id, year FROM shelf WHERE id BETWEEN $1 AND $2 ORDER BY id", [4, 6])
    assert isinstance(table, pa.Table)
    assert table.to_pylist() == [
        {"id": 4, "year": 1994},
        {"id": 5, "year": 1995},
        {"id": 6, "year": 1996},
    ]
    named = client.sql("SELECT count(*) AS n FROM shelf WHERE year = $y", {"y": 1999})
    counted = client.query(
        "shelf", "year == 1999", output_fields=["count(*)"], consistency_level="Strong"
    )
    assert named.column("n").to_pylist() == [counted[0]["count(*)"]]


def test_catalog_commands(conn: Any) -> None:
    objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
    assert [o["catalog_name"] for o in objects] == ["elanus"]
    schemas = objects[0]["catalog_db_schemas"]
    default = next(s for s in schemas if s["db_schema_name"] == "default")
    tables = {t["table_name"] for t in default["db_schema_tables"]}
    assert {"shelf", "writers"} <= tables
    schema = conn.adbc_get_table_schema("shelf", db_schema_filter="default")
    assert schema.names == [
        "id",
        "title",
        "year",
        "author_id",
        "info",
        "vector",
        "$meta",
        "$partition",
    ]
    assert schema.field("vector").type == pa.list_(pa.float32(), DIM)
    info = conn.adbc_get_info()
    assert info["vendor_name"] == "Elanus"


@pytest.mark.slow
def test_cli_prints_a_table_json_and_csv(served: StandaloneProcess) -> None:
    def run(*args: str) -> str:
        result = run_elanus("sql", "--uri", served.uri, *args)
        assert result.returncode == 0, result.stderr
        return str(result.stdout)

    assert "t4" in run("SELECT id, title FROM shelf WHERE id = 4")
    assert run("--json", "SELECT id, title FROM shelf WHERE id IN (4, 5) ORDER BY id").split() == [
        "[",
        "{",
        '"id":',
        "4,",
        '"title":',
        '"t4"',
        "},",
        "{",
        '"id":',
        "5,",
        '"title":',
        '"t5"',
        "}",
        "]",
    ]
    assert run("--csv", "SELECT id, title FROM shelf WHERE id < ? ORDER BY id", "--param", "5") == (
        "id,title\n0,t0\n4,t4\n"
    )
    bad = run_elanus("sql", "--uri", served.uri, "DROP TABLE shelf")
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: [INVALID_ARGUMENT] SQL through Elanus is read-only")


# -- refusals and limits ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("DELETE FROM shelf WHERE id = 4", "read-only: DELETE is refused"),
        ("INSERT INTO shelf SELECT * FROM shelf", "read-only: INSERT is refused"),
        ("CREATE TABLE x AS SELECT 1", "read-only: CREATE is refused"),
        ("COPY shelf TO 'out.csv'", "read-only: COPY is refused"),
        ("ATTACH 'x.db'", "read-only: ATTACH is refused"),
        ("SELECT 1; SELECT 2", "one SQL statement at a time"),
        ("SELEC 1", "syntax error"),
        ("SELECT * FROM read_text('/etc/hostname')", "file system operations are disabled"),
        ("SELECT nothing FROM shelf", "nothing"),
        (
            "SELECT count(*) FROM shelf AT (VERSION => 1) JOIN writers AT (VERSION => 2) ON true",
            "one timestamp",
        ),
        (
            "SELECT * FROM vector_search('shelf', [1, 2], 3, nonsense => 1)",
            "unknown argument 'nonsense'",
        ),
    ],
)
def test_statements_that_are_refused(client: Client, sql: str, words: str) -> None:
    raises_code(INVALID, lambda: client.sql(sql), words)


def test_missing_collections_and_old_timestamps(client: Client) -> None:
    raises_code(ErrorCode.COLLECTION_NOT_FOUND, lambda: client.sql("SELECT * FROM nowhere"))
    raises_code(ErrorCode.DATABASE_NOT_FOUND, lambda: client.sql("SELECT * FROM other.cat.shelf"))
    raises_code(INVALID, lambda: client.sql("SELECT count(*) FROM shelf", as_of=1), "retention")


def test_memory_and_result_limits(client: Client) -> None:
    raises_code(
        ErrorCode.LIMIT_EXCEEDED,
        lambda: client.sql(
            "SELECT max(len(l)) FROM (SELECT list(range) AS l FROM range(30000000))"
        ),
        "sql_memory_limit_mb",
    )
    raises_code(
        ErrorCode.LIMIT_EXCEEDED,
        lambda: client.sql("SELECT range, repeat('x', 100) FROM range(100000)"),
        "sql_max_result_mb",
    )


def test_a_long_statement_times_out_and_blocks_no_write_or_search(client: Client) -> None:
    """While a statement computes (until its 8 s timeout), an insert and a Strong search
    go through, and a second statement is refused: one may run at a time here."""
    slow = "SELECT count(*) FROM range(1000000000000) t(i) WHERE hash(i) % 7 = 0"
    outcome: list[ElanusError] = []

    def run() -> None:
        for _ in range(100):  # until it has the slot, which a probe below may hold a moment
            try:
                client.sql(slow)
            except ElanusError as exc:
                if exc.code != ErrorCode.RATE_LIMITED:
                    outcome.append(exc)
                    return
            threading.Event().wait(0.02)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        with Client(client.uri) as other:
            raises_code(ErrorCode.RATE_LIMITED, lambda: _when_running(other), "sql_max_statements")
            other.insert("shelf", _rows(7000, 1))
            hit = other.search(
                "shelf", [[0.5] * DIM], limit=1, filter="id == 7000", consistency_level="Strong"
            )
            assert [h["id"] for h in hit[0]] == [7000]
        assert worker.is_alive(), "the statement ended before the write and the search"
    finally:
        worker.join(30)
    assert len(outcome) == 1 and "sql_timeout_s" in str(outcome[0])
    assert getattr(outcome[0], "code", None) == ErrorCode.TIMEOUT


def _when_running(client: Client) -> None:
    """A second statement, sent until the first one holds the proxy's one slot."""
    for _ in range(200):
        client.sql("SELECT 1")
        threading.Event().wait(0.05)


# -- docs/sql.md --------------------------------------------------------------------------------
def test_the_docs_examples_run_as_written(served: StandaloneProcess) -> None:
    """Every python and bash block of docs/sql.md, in order, on a database of its own."""
    text = DOC.read_text()
    blocks = re.findall(r"^```(python|bash)\n(.*?)^```", text, re.M | re.S)
    assert [kind for kind, _ in blocks].count("bash") == 1
    with Client(served.uri) as admin:
        admin.create_database("docs")
    namespace: dict[str, Any] = {}
    bin_dir = str(Path(sys.executable).parent)
    env = cli_env(ELANUS_URI=served.uri, PATH=f"{bin_dir}:{os.environ.get('PATH', '')}")
    for kind, code in blocks:
        code = code.replace("grpc://localhost:8815", served.uri)
        if kind == "python":
            code = code.replace(
                f'Client("{served.uri}")', f'Client("{served.uri}", db="docs")'
            ).replace(
                f'connect("{served.uri}")',
                f'connect("{served.uri}", db_kwargs={{"adbc.flight.sql.rpc.call_header.'
                'elanus-database": "docs"})',
            )
            exec(compile(code, str(DOC), "exec"), namespace)
        else:
            for line in code.strip().splitlines():
                line = line.replace("elanus sql ", "elanus sql --db docs ", 1)
                done = subprocess.run(
                    ["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120
                )
                assert done.returncode == 0, (line, done.stderr)
                assert done.stdout.strip(), line
    assert namespace["n_books"] == 990
    assert namespace["per_author"][0] == ("Borges", 47, 2000)
    assert namespace["by_shelf"]["n"].sum() == 990
    assert namespace["then"] == [("later",)] and namespace["now"] == 0
    near = namespace["near"]
    assert near.num_rows == 5 and near.column_names == ["id", "distance", "title", "name"]
    assert namespace["recent"].num_rows == 5
    assert os.environ.get("ELANUS_URI") != served.uri  # the env of the bash lines only
