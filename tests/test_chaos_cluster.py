"""Issue 22's chaos run, short: a multi-process cluster (coord, 2 proxies, 2 data nodes,
3 query nodes, 3 clustered nats-servers; a collection loaded with 2 replicas) under a writer
and Strong readers, roles killed in turn with SIGKILL and restarted (``bench/_chaos.py``);
the NATS kill in a run of its own, so each run stays under 90 s.

Asserted: no acknowledged row lost or stored twice, no acknowledged delete undone, no row
that was never sent, no raw NATS/gRPC/Python text in any error a client saw, no role but
the coord exiting by itself, and writes and reads through every proxy succeeding again
after each kill (within the harness's 60 s). No timing bound is asserted: the issue's
bounds (1 s, 2 s, two tick intervals) are measured and compared by ``bench/chaos.py``
(figures in bench/README.md), and several are not met yet (a read in flight to a killed
query node waits out the client's timeout; a coord restart places every replica again),
while a CI machine busy with other tests would miss the others by noise.
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
@pytest.mark.parametrize("roles", [("querynode", "datanode", "coord", "proxy"), ("nats",)])
def test_killing_roles_in_turn_loses_nothing_and_reads_come_back(
    tmp_path: Path, roles: tuple[str, ...]
) -> None:
    cfg = chaos.Config(tmp_path / "cluster", batch=100, settle_s=1.0, env=ENV)
    phases = chaos.run_chaos(cfg, list(roles), SECONDS_PER_ROLE, log=print)
    assert tuple(p.role for p in phases) == roles
    for p in phases:
        f = p.figures
        what = f"after the kill of {p.name}: {f}"
        assert "check_error" not in f, what
        assert f["rows_acked"] > 0, what
        assert f["rows_lost"] == 0, what
        assert f["rows_duplicated"] == 0, what
        assert f["deletes_undone"] == 0, what
        assert f["rows_never_sent"] == 0, what
        assert f["raw_errors"] == [], what
        # the coord stops when it cannot renew its lease (a NATS server died that led the
        # lease bucket): the harness starts it again, as a service manager would
        assert all(e.startswith("coord") for e in f["exits"]), what
        assert not math.isinf(f["back_after_restart_s"]), what
        assert f["writes_ok"] > 0, what
        for label in ("A", "B"):
            assert f[f"reads_ok_after_back@{label}"] > 0, what
