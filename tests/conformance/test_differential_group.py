"""The differential searches, counts and row reads against a standalone with two serving
processes (docs/process-model.md), asked through the further process's own Flight port:
its proxy plans and reduces, and its query node, a member of the node group, holds the
sealed and growing rows and answers. Milvus Lite's answers are the same as for one process.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from conformance_fixtures import ela_fixture, lite_fixture  # noqa: F401  (fixtures)
from conftest import StandaloneProcess
from test_differential import test_count, test_rows, test_search  # noqa: F401  (collected here)

from elanus.client.client import Client

pytestmark = [pytest.mark.conformance, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """In place of the suite's one-process standalone: the uri is the second serving
    process's Flight port, so ``ela`` creates, fills, loads and reads through it."""
    sp = StandaloneProcess(
        tmp_path_factory.mktemp("group") / "data", env={"ELANUS_SERVING_PROCESSES": "2"}
    )
    try:
        sp.start().wait_ready(90)
        with Client(sp.uri) as first:
            ports = [
                s["meta"]["flight_port"]
                for s in first.list_sessions()
                if s["role"] == "proxy" and s["meta"]["flight_port"] != sp.port
            ]
        assert len(ports) == 1, ports
        yield SimpleNamespace(uri=f"grpc://127.0.0.1:{ports[0]}")
    finally:
        sp.stop()
