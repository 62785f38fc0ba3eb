"""docs/milvus-compat.md lists every public ``MilvusClient`` method and every
``MilvusService`` RPC of the pymilvus installed, and says of each RPC what the servicer
really does with it: a pymilvus release that adds a method or an RPC fails here until a
row says whether it works, and a row cannot drift from ``milvus/servicer.py``'s registry.
What the refused methods answer is checked against a server in ``test_milvus_refusals.py``."""

from __future__ import annotations

import inspect

from compat_doc import MethodRow, method_rows, rpc_rows
from pymilvus import MilvusClient

from elanus.milvus.server import MilvusServicer
from elanus.milvus.servicer import SERVICE, unimplemented

STATUSES = {"works", "refused", "client-side"}
ERRORS = {"10", "UNIMPLEMENTED", "1100"}


def _public_methods() -> set[str]:
    members = inspect.getmembers(MilvusClient)
    return {name for name, value in members if not name.startswith("_") and callable(value)}


def _answer(rpc: str) -> str:
    """What the servicer answers ``rpc``: served, or how it refuses it."""
    if rpc in MilvusServicer.served_rpcs():
        return "served"
    return "UNIMPLEMENTED" if unimplemented(rpc) else "10"


def test_every_client_method_has_a_row() -> None:
    listed = set(method_rows())
    methods = _public_methods()
    assert len(methods) > 100  # what inspect finds is the client, not an empty stand-in
    assert sorted(methods - listed) == [], "MilvusClient methods missing from the table"
    assert sorted(listed - methods) == [], "rows for methods MilvusClient does not have"


def test_every_rpc_has_a_row_saying_what_the_servicer_answers() -> None:
    rows = rpc_rows()
    assert list(rows) == [m.name for m in SERVICE.methods], "one row per RPC, in proto order"
    wrong = {name: row.answer for name, row in rows.items() if row.answer != _answer(name)}
    assert wrong == {}, "rows out of step with milvus/servicer.py"
    unexplained = [name for name, row in rows.items() if row.answer != "served" and not row.notes]
    assert unexplained == [], "a refused RPC's row says why"


def test_method_rows_are_well_formed() -> None:
    rpcs = rpc_rows()
    for row in method_rows().values():
        assert row.status in STATUSES, row
        assert (row.error in ERRORS) == (row.status == "refused"), row
        assert bool(row.rpcs) == (row.status != "client-side"), row
        assert set(row.rpcs) <= set(rpcs), f"{row.name} names an RPC MilvusService lacks"


def test_a_methods_status_follows_from_its_rpcs() -> None:
    """A method works when its last RPC is served; a refused one ends on an RPC refused
    the way its row says (``10``, ``UNIMPLEMENTED``), or is refused by a served RPC's
    field check (``1100``)."""
    flaws = {row.name: _flaw(row) for row in method_rows().values()}
    assert {name: flaw for name, flaw in flaws.items() if flaw} == {}


def _flaw(row: MethodRow) -> str:
    answers = [_answer(rpc) for rpc in row.rpcs]
    if row.status == "works" and answers[-1] != "served":
        return f"works, yet {row.rpcs[-1]} is answered {answers[-1]}"
    if row.status == "refused" and row.error == "1100" and set(answers) != {"served"}:
        return "refused by a field check of RPCs not all served"
    if row.status == "refused" and row.error != "1100" and answers[-1] != row.error:
        return f"refused with {row.error}, yet {row.rpcs[-1]} is answered {answers[-1]}"
    return ""


def test_the_rpc_table_names_the_methods_that_send_each() -> None:
    sent_by: dict[str, set[str]] = {}
    for row in method_rows().values():
        for rpc in row.rpcs:
            sent_by.setdefault(rpc, set()).add(row.name)
    callers = {name: set(row.callers) for name, row in rpc_rows().items()}
    wrong = {
        rpc: (sorted(named), sorted(sent_by.get(rpc, set())))
        for rpc, named in callers.items()
        if named != sent_by.get(rpc, set())
    }
    assert wrong == {}, "RPC rows' MilvusClient column against the method rows' RPCs"
