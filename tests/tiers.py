"""The unit tier: tests that start no process and no server, for the inner loop
(``make test-unit``, under 2 minutes); the rest are marked ``integration``.

A test is ``integration`` when its own source or the source of any fixture it uses,
directly or through other fixtures, starts something (``STARTS``): known at collection,
per test, so a module's pure tests stay in the unit tier beside its server tests. What the
sources cannot show (a helper that starts Milvus Lite, say) is caught in every run: while
a unit test runs, starting a process, a gRPC server or a proxy raises, naming the mark.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

STARTS = re.compile(
    r"EmbeddedNats\(|NatsCluster\(|StandaloneProcess\(|ElanusProcess\(|LocalCluster\(|"
    r"own_stack\(|\bStack\(|MilvusStack\(|milvus_stack\(|MilvusClient\(|lite_answers\(|"
    r"grpc\.server\(|FlightServerBase|start_moto\(|run_elanus\(|\bcli\(|cli_json\(|"
    r"subprocess\.|elanus\.spark\.session\(|SparkSession|RoleHost\(|\bCluster\(|"
    r"run_chaos\(|getfixturevalue\(|elanus_processes"
)
"""What starts a process or a server, as a test or fixture spells it."""


@functools.cache
def _starts(func: Callable[..., Any]) -> bool:
    try:
        return bool(STARTS.search(inspect.getsource(func)))
    except (OSError, TypeError):
        return False


def mark_integration(item: pytest.Item) -> None:
    """Mark ``item`` ``integration`` when it or one of its fixtures starts something."""
    funcs: list[Callable[..., Any]] = [getattr(item, "function", None) or (lambda: None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info is not None else ():
        funcs += [d.func for d in defs]
    if any(_starts(f) for f in funcs):
        item.add_marker(pytest.mark.integration)


_in_unit_test = False
"""True while a test of the unit tier runs (``unit_guard``): what it starts is refused."""


def install_guards() -> None:
    """Starting a process, a gRPC server or a proxy refuses while a unit test runs, in
    every run (CI's too): a test the sources did not show to start something fails,
    naming the mark it needs, instead of slowing the unit tier unseen."""
    import subprocess

    import grpc

    from elanus.flight.proxy import ProxyServer

    def guarded(what: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            if _in_unit_test:
                raise RuntimeError(
                    f"a test of the unit tier started {what}: mark it "
                    "@pytest.mark.integration (or let tests/tiers.py's STARTS see it)"
                )
            return original(*args, **kwargs)

        return call

    subprocess.Popen.__init__ = guarded("a process", subprocess.Popen.__init__)  # type: ignore[method-assign]
    grpc.server = guarded("a gRPC server", grpc.server)
    ProxyServer.__init__ = guarded("a proxy (a Flight server)", ProxyServer.__init__)  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def unit_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Set up before the test's other function fixtures (autouse goes first)."""
    global _in_unit_test
    _in_unit_test = request.node.get_closest_marker("integration") is None
    try:
        yield
    finally:
        _in_unit_test = False
