"""Every CLI failure is the one ``error: [CODE] message`` line the README promises, usage
errors (Click's own included) too, with exit 2; global options work on either side of the
command. No server needed: these fail before reaching one, or reach a dead port."""

from __future__ import annotations

import pytest
from conftest import run_elanus

from elanus.channels.nats_server import free_port
from elanus.cli.main import COMMANDS, command_name, hoisted, root_command


def one_line(result: object, code: str, exit_code: int) -> str:
    assert result.returncode == exit_code, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    lines = result.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: [{code}] "), lines[0]
    return str(lines[0])


@pytest.mark.slow  # runs the elanus command
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("collection", "create"), "Missing argument 'name'"),
        (("nosuchcommand",), "No such command 'nosuchcommand'"),
        (("collection", "nosuch"), "No such command 'nosuch'"),
        (("collection", "list", "--bogus"), "No such option: --bogus"),
        (("collection", "create", "x", "--shards", "many"), "'--shards'"),
        (("search", "c", "--limit", "0"), "'--limit'"),
        (("collection", "create", "x"), "--dim"),  # a command's own check
        (("search", "c", "--topk", "3"), "No such option: --topk; did you mean --limit?"),
        (("search", "c", "--limt", "3"), "did you mean --limit?"),
        (("query", "c", "--expr", "x"), "did you mean --filter?"),
        (("query", "c", "--output_fields", "x"), "did you mean --output-fields?"),
        (("search", "c", "--consistency-level", "x"), "did you mean --consistency?"),
        (("query", "c", "x < 1", "--filter", "x < 2"), "give the filter once"),
        (("load",), "name one collection, or pass --all"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(args: tuple[str, ...], words: str) -> None:
    dead = f"grpc://127.0.0.1:{free_port()}"
    line = one_line(run_elanus(*args, "--uri", dead), "INVALID_ARGUMENT", 2)
    assert words in line and "-h')" in line, line


@pytest.mark.slow  # runs the elanus command
def test_every_global_option_works_after_the_command() -> None:
    dead = f"grpc://127.0.0.1:{free_port()}"
    for extra in (
        ("--token", "root:secret"),
        ("--user", "root", "--password", "secret"),
        ("--json",),
        ("--data-dir", "/tmp/nowhere"),
        ("--uri=" + dead,),
    ):
        result = run_elanus("collection", "list", "--uri", dead, *extra)
        line = one_line(result, "UNAVAILABLE", 1)
        assert dead in line and "start one with `elanus standalone`" in line, (extra, line)


def test_hoisting_moves_only_global_options() -> None:
    assert hoisted(["collection", "list", "--token", "t", "--json"]) == [
        "--token", "t", "--json", "collection", "list",
    ]  # fmt: skip
    assert hoisted(["query", "c", "--filter", "id > 1", "--uri=grpc://h:1"]) == [
        "--uri=grpc://h:1", "query", "c", "--filter", "id > 1",
    ]  # fmt: skip
    assert hoisted(["insert", "c", "--", "--json"]) == ["insert", "c", "--", "--json"]


def test_each_command_parses_with_an_app_of_its_own() -> None:
    """A run is parsed by an app of only the command it names (a role's start, and every
    client command, skip loading the others); anything else, ``-h`` before the command
    included, by the whole app. Each command parses alike in both."""
    assert command_name(["--json", "--uri", "u", "--token=t", "run", "proxy"]) == "run"
    assert command_name(["standalone", "--json"]) == "standalone"
    assert command_name(["-h", "run"]) is None
    assert command_name(["--", "run"]) is None
    assert command_name([]) is None
    full = root_command([])
    assert set(full.commands) == set(COMMANDS)  # type: ignore[attr-defined]
    assert set(root_command(["nosuch"]).commands) == set(COMMANDS)  # type: ignore[attr-defined]
    for name in COMMANDS:
        small = root_command([name, "x"])
        assert set(small.commands) == {name}  # type: ignore[attr-defined]
        ours = small.commands[name]  # type: ignore[attr-defined]
        theirs = full.commands[name]  # type: ignore[attr-defined]
        assert [p.opts for p in ours.params] == [p.opts for p in theirs.params]
        assert set(getattr(ours, "commands", {})) == set(getattr(theirs, "commands", {}))
