"""Issue 22's chaos run, short: a multi-process cluster (coord, 2 proxies, 2 data nodes,
3 query nodes, 3 clustered nats-servers; a collection loaded with 2 replicas) under a writer
and Strong readers, each role in turn killed with SIGKILL and restarted (``bench/_chaos.py``).

Asserted: no acknowledged row lost or stored twice, no acknowledged delete undone, no row
that was never sent, no raw NATS/gRPC/Python text in any error a client saw, and reads
through every proxy that succeed again after each kill. Timing is asserted only where it
holds with a wide margin on a loaded 2-core CI machine (reads during a query node's death,
with a second replica, stay well under the request timeout); the issue's strict bounds
(1 s, 2 s, two tick intervals) are measured and compared by ``bench/chaos.py`` (figures in
bench/README.md), not here: a CI machine busy with other tests misses them by noise.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parent.parent / "bench" / "_chaos.py"
_spec = importlib.util.spec_from_file_location("bench_chaos", PATH)
assert _spec is not None and _spec.loader is not None
chaos = importlib.util.module_from_spec(_spec)
sys.modules["bench_chaos"] = chaos  # dataclasses look their module up
_spec.loader.exec_module(chaos)

SECONDS_PER_ROLE = 6.0
ENV = {"ELANUS_SESSION_TTL_S": "3"}  # a dead data node's channels move sooner


@pytest.mark.chaos
@pytest.mark.slow
def test_killing_each_role_in_turn_loses_nothing_and_reads_come_back(tmp_path: Path) -> None:
    cfg = chaos.Config(tmp_path / "cluster", batch=100, settle_s=1.0, env=ENV)
    phases = chaos.run_chaos(cfg, list(chaos.ROLES), SECONDS_PER_ROLE, log=print)
    assert [p.role for p in phases] == list(chaos.ROLES)
    for p in phases:
        f = p.figures
        what = f"after the kill of {p.name}: {f}"
        assert "check_error" not in f, what
        assert f["rows_lost"] == 0, what
        assert f["rows_duplicated"] == 0, what
        assert f["deletes_undone"] == 0, what
        assert f["rows_never_sent"] == 0, what
        assert f["raw_errors"] == [], what
        assert f["writes_ok"] > 0, what
        # the coord stops when it cannot renew its lease (a NATS server died that led the
        # lease bucket): the harness starts it again, as a service manager would; no other
        # role may exit by itself
        assert all(e.startswith("coord") for e in f["exits"]), what
        for label in ("A", "B"):
            assert not math.isinf(f[f"back_after_restart_s@{label}"]), what
            assert f[f"reads_ok_after_back@{label}"] > 0, what
        if p.role == "querynode":  # the other replica answers: no read waits it out
            assert f["read_unavailable_s@A"] < 5.0, what
            assert f["read_unavailable_s@B"] < 5.0, what
    assert phases[-1].figures["rows_acked"] > 0
