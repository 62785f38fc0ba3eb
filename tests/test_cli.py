"""The ``elanus`` CLI run as a user runs it (subprocesses) against a real standalone server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import StandaloneProcess, cli_env, run_elanus

from elanus.channels.nats_server import free_port

# Every test runs the elanus command as its own process.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def cli(server: StandaloneProcess, *args: str) -> str:
    """Run a client command against ``server``; it must succeed. Returns stdout."""
    result = run_elanus(*args, "--uri", server.uri)
    assert result.returncode == 0, f"elanus {' '.join(args)} failed:\n{result.stderr}"
    return result.stdout


def cli_json(server: StandaloneProcess, *args: str) -> Any:
    return json.loads(cli(server, *args, "--json"))


def assert_one_line_error(result: Any, code: str, exit_code: int = 1) -> str:
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: [{code}] "), lines[0]
    assert "Traceback" not in result.stderr
    return str(lines[0])


# -- settings -----------------------------------------------------------------------------------
def test_config_show_layers(tmp_path: Path) -> None:
    (tmp_path / "elanus.toml").write_text('flight_port = 9101\nlog_level = "INFO"\n')

    def shown(*args: str, **env: str) -> dict[str, Any]:
        result = run_elanus("config", "show", "--json", *args, cwd=tmp_path, env=cli_env(**env))
        assert result.returncode == 0, result.stderr
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    from_file = shown()
    assert from_file["flight_port"] == 9101
    assert from_file["log_level"] == "INFO"
    assert from_file["flight_uri"] == "grpc://127.0.0.1:9101"
    assert from_file["data_dir"] == str(tmp_path / "elanus-data")
    assert shown(ELANUS_FLIGHT_PORT="9102")["flight_port"] == 9102
    from_flag = shown("--port", "9103", "--data-dir", "d", ELANUS_FLIGHT_PORT="9102")
    assert from_flag["flight_port"] == 9103
    assert from_flag["log_level"] == "INFO"
    assert from_flag["data_dir"] == str(tmp_path / "d")

    human = run_elanus("config", "show", cwd=tmp_path, env=cli_env())
    assert human.returncode == 0
    assert "flight_port" in human.stdout and "9101" in human.stdout


def test_bad_config_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "elanus.toml").write_text("no_such_setting = 1\n")
    result = run_elanus("config", "show", cwd=tmp_path)
    assert result.returncode == 2
    assert "no_such_setting" in result.stderr
    assert "Traceback" not in result.stderr


# -- status -------------------------------------------------------------------------------------
def test_status(server: StandaloneProcess) -> None:
    sessions = cli_json(server, "status")
    assert sorted(s["role"] for s in sessions) == [
        "coord",
        "datanode",
        "indexnode",
        "proxy",
        "querynode",
    ]
    assert all(s["pid"] == server.proc.pid for s in sessions)  # type: ignore[union-attr]
    table = cli(server, "status")
    assert all(r in table for r in ("coord", "datanode", "indexnode", "proxy", "querynode"))
    assert server.uri in table
    assert all(s["meta"]["health"]["status"] == "ok" for s in sessions)
    assert "health" in table and " ok " in table  # a failed vital task would show here


# -- collections and partitions -----------------------------------------------------------------
def test_collection_lifecycle(server: StandaloneProcess) -> None:
    out = cli(server, "collection", "create", "books", "--dim", "8", "--auto-id")
    assert "created collection books" in out

    created = cli_json(
        server,
        "collection",
        "create",
        "films",
        "--dim",
        "4",
        "--shards",
        "2",
        "--id-type",
        "varchar",
        "--metric",
        "L2",
        "--consistency",
        "Strong",
        "--description",
        "moving pictures",
    )
    assert created["name"] == "films"
    assert created["num_shards"] == 2 and len(created["vchannels"]) == 2
    assert created["consistency_level"] == "Strong"
    fields = {f["name"]: f for f in created["schema"]["fields"]}
    assert fields["id"]["type"] == "VarChar" and fields["vector"]["dim"] == 4
    assert created["properties"]["metric_type"] == "L2"
    assert created["description"] == "moving pictures"

    assert {"books", "films"} <= set(cli_json(server, "collection", "list"))
    assert "books" in cli(server, "collection", "list")

    described = cli_json(server, "collection", "describe", "books")
    assert described["name"] == "books"
    assert described["schema"]["fields"][0]["auto_id"] is True
    assert [p["name"] for p in described["partitions"]] == ["_default"]
    assert described["load"]["state"] == "Loaded"  # the quick setup loads it
    assert described["load"]["memory_bytes"] >= 0
    text = cli(server, "collection", "describe", "books")
    for expected in ("books", "FloatVector", "dim=8", "Int64", "_default"):
        assert expected in text
    assert "in memory on its query nodes" in text

    assert "renamed" in cli(server, "collection", "rename", "films", "movies")
    assert cli_json(server, "collection", "rename", "movies", "cinema") == {
        "renamed": "movies",
        "to": "cinema",
    }
    names = set(cli_json(server, "collection", "list"))
    assert "cinema" in names and "films" not in names and "movies" not in names

    assert cli_json(server, "collection", "drop", "cinema", "--yes") == {"dropped": "cinema"}
    assert "dropped collection books" in cli(server, "collection", "drop", "books", "--yes")
    assert not {"books", "cinema"} & set(cli_json(server, "collection", "list"))


def test_create_from_schema_file(server: StandaloneProcess, tmp_path: Path) -> None:
    schema = {
        "fields": [
            {"name": "pk", "type": "Int64", "is_primary": True},
            {"name": "title", "type": "VarChar", "max_length": 64},
            {"name": "emb", "type": "FloatVector", "dim": 16},
        ],
        "description": "from a file",
    }
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    created = cli_json(server, "collection", "create", "docs", "--schema", str(path))
    assert [f["name"] for f in created["schema"]["fields"]] == ["pk", "title", "emb"]
    assert "max_length=64" in cli(server, "collection", "describe", "docs")
    cli(server, "collection", "drop", "docs", "--yes")


def test_partitions(server: StandaloneProcess) -> None:
    cli(server, "collection", "create", "parts", "--dim", "4")
    assert "created partition p2024" in cli(server, "partition", "create", "parts", "p2024")
    assert cli_json(server, "partition", "create", "parts", "p2025") == {
        "created": "p2025",
        "collection": "parts",
    }
    assert sorted(cli_json(server, "partition", "list", "parts")) == ["_default", "p2024", "p2025"]
    assert "p2024" in cli(server, "partition", "list", "parts")
    cli(server, "release", "parts")  # quick setup loads, as pymilvus's: release to drop
    assert "dropped partition" in cli(server, "partition", "drop", "parts", "p2024", "--yes")
    assert sorted(cli_json(server, "partition", "list", "parts")) == ["_default", "p2025"]
    cli(server, "collection", "drop", "parts", "--yes")


def test_num_partitions_of_a_partition_key(server: StandaloneProcess, tmp_path: Path) -> None:
    schema = {
        "fields": [
            {"name": "id", "type": "Int64", "is_primary": True},
            {"name": "tenant", "type": "VarChar", "max_length": 32, "is_partition_key": True},
            {"name": "vector", "type": "FloatVector", "dim": 4},
        ]
    }
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps(schema))
    create = ("collection", "create", "tickets", "--schema", str(path), "--num-partitions", "4")
    cli(server, *create)
    described = cli_json(server, "collection", "describe", "tickets")
    assert described["num_partitions"] == 4
    assert [p["name"] for p in described["partitions"]] == [f"_default_{i}" for i in range(4)]
    assert "tenant (4 partitions)" in cli(server, "collection", "describe", "tickets")

    # The server checks the count, and refuses it without a partition key field.
    too_many = run_elanus(
        "collection", "create", "many", "--schema", str(path), "--num-partitions", "5000",
        "--uri", server.uri,
    )  # fmt: skip
    assert "num_partitions" in assert_one_line_error(too_many, "INVALID_ARGUMENT")
    keyless = run_elanus(
        "collection", "create", "plain", "--dim", "4", "--num-partitions", "4", "--uri", server.uri
    )
    assert "partition key" in assert_one_line_error(keyless, "INVALID_ARGUMENT")
    assert not {"many", "plain"} & set(cli_json(server, "collection", "list"))
    cli(server, "collection", "drop", "tickets", "--yes")


# -- failures -----------------------------------------------------------------------------------
def test_server_error_is_one_line(server: StandaloneProcess) -> None:
    result = run_elanus("collection", "drop", "no_such_collection", "--yes", "--uri", server.uri)
    line = assert_one_line_error(result, "COLLECTION_NOT_FOUND")
    assert "no_such_collection" in line

    result = run_elanus("partition", "list", "no_such_collection", "--uri", server.uri)
    assert_one_line_error(result, "COLLECTION_NOT_FOUND")


def test_global_options_before_the_command(server: StandaloneProcess) -> None:
    result = run_elanus("--uri", server.uri, "--json", "collection", "list")
    assert result.returncode == 0, result.stderr
    assert isinstance(json.loads(result.stdout), list)


def test_uri_before_the_command_beats_elanus_uri(server: StandaloneProcess) -> None:
    dead = f"grpc://127.0.0.1:{free_port()}"
    env = cli_env(ELANUS_URI=dead)
    result = run_elanus("--uri", server.uri, "--json", "collection", "list", env=env)
    assert result.returncode == 0, result.stderr
    # Without a flag the environment's uri is the one used (and named when unreachable).
    result = run_elanus("collection", "list", env=env)
    assert dead in assert_one_line_error(result, "UNAVAILABLE")


def test_unreachable_uri() -> None:
    uri = f"grpc://127.0.0.1:{free_port()}"
    result = run_elanus("collection", "list", "--uri", uri)
    line = assert_one_line_error(result, "UNAVAILABLE")
    assert uri in line
    # The default uri comes from the settings (here: env), so the error names that one.
    port = free_port()
    result = run_elanus("status", env=cli_env(ELANUS_FLIGHT_PORT=str(port)))
    assert f"127.0.0.1:{port}" in assert_one_line_error(result, "UNAVAILABLE")


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    no_shape = run_elanus("collection", "create", "x", "--uri", "grpc://127.0.0.1:1")
    assert no_shape.returncode == 2 and "--dim" in no_shape.stderr
    no_nats = run_elanus("run", "coord", "--data-dir", str(tmp_path))
    assert no_nats.returncode == 2 and "--nats" in no_nats.stderr
    unknown_role = run_elanus("run", "nosuchrole", "--nats", "nats://127.0.0.1:1")
    assert unknown_role.returncode == 2 and "nosuchrole" in unknown_role.stderr
    no_yes = run_elanus("collection", "drop", "x", "--uri", "grpc://127.0.0.1:1")
    assert no_yes.returncode == 2 and "--yes" in no_yes.stderr
    for result in (no_shape, no_nats, unknown_role, no_yes):
        assert "Traceback" not in result.stderr
