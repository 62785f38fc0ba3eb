"""The markers say what the tests are, so ``-m "not spark and not chaos and not slow"`` is a
true inner loop: a test that kills a process is marked ``chaos``, one that starts a Spark
job without the ``spark`` fixture is marked ``spark``, one that runs the ``elanus`` command
is marked ``slow`` (tests/conftest.py marks the users of the ``spark`` and
``elanus_processes`` fixtures). Read from the test sources, so a new test cannot slip
past."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from conftest import MARKED_BY_FIXTURE

TESTS = Path(__file__).resolve().parent
KILLS = re.compile(r"SIGKILL|killpg|kill9|\.kill\(\)")
STARTS_SPARK = re.compile(r"run_index_build|--spark-master|spark-submit")
RUNS_THE_CLI = re.compile(r"\b(run_elanus|cli|cli_json)\(")
BY_FIXTURE = {f: m.name for f, m in MARKED_BY_FIXTURE.items()} | {"standalone_factory": "slow"}
"""The marks tests/conftest.py gives a test that takes these fixtures (standalone_factory
is built on elanus_processes)."""


def _marks(node: ast.expr) -> set[str]:
    """The ``pytest.mark.NAME`` names in a decorator or a ``pytestmark`` value."""
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "mark"
    }


@functools.cache
def _tests() -> list[tuple[str, str, set[str], str]]:
    """(file, test name, its marks, its source) of every test function."""
    out = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if path == Path(__file__).resolve():
            continue  # its own names speak of kills
        src = path.read_text(encoding="utf-8")
        lines = src.splitlines()
        tree = ast.parse(src)
        module_marks: set[str] = set()
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets
            ):
                module_marks |= _marks(stmt.value)
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("test_"):
                marks = module_marks.union(*(_marks(d) for d in stmt.decorator_list))
                marks |= {BY_FIXTURE[a.arg] for a in stmt.args.args if a.arg in BY_FIXTURE}
                body = "\n".join(lines[stmt.lineno - 1 : stmt.end_lineno])
                out.append((path.name, stmt.name, marks, body))
    return out


def test_every_test_that_kills_a_process_is_marked_chaos() -> None:
    unmarked = [
        f"{file}::{name}"
        for file, name, marks, body in _tests()
        if (KILLS.search(body) or "kill" in name) and "chaos" not in marks
    ]
    assert unmarked == [], "mark these @pytest.mark.chaos"


def test_every_test_that_starts_spark_itself_is_marked_spark() -> None:
    unmarked = [
        f"{file}::{name}"
        for file, name, marks, body in _tests()
        if STARTS_SPARK.search(body) and "spark" not in marks
    ]
    assert unmarked == [], "mark these @pytest.mark.spark"


def test_every_test_that_runs_the_elanus_command_is_left_out_of_the_inner_loop() -> None:
    unmarked = [
        f"{file}::{name}"
        for file, name, marks, body in _tests()
        if RUNS_THE_CLI.search(body) and not marks & {"slow", "spark", "chaos"}
    ]
    assert unmarked == [], "mark these @pytest.mark.slow"


def test_a_unit_test_that_starts_a_process_fails_naming_the_mark() -> None:
    """The guard of tests/tiers.py: this test is of the unit tier (it starts nothing the
    sources show), so starting a process here must raise."""
    import subprocess as sp

    try:
        sp.Popen(["true"])
    except RuntimeError as exc:
        assert "@pytest.mark.integration" in str(exc)
    else:
        raise AssertionError("a process started from the unit tier")
