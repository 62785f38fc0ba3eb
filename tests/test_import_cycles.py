"""No import cycles among ``elanus``'s modules, ``TYPE_CHECKING`` imports included
(issue 34, item 4): a module that needs a type of the one that uses it names what it uses
as a Protocol instead (``DelegatorHost``, ``DataNodeHost``, ``Placement``, ``Journal``,
``SyncReplier``, ``functions.SchemaView``).

One cycle is left, named below, and may only shrink: the proxy's, through the action
registry (``flight/actions.py``'s ``Call`` types executors on ``ProxyServer``, and the
search helpers type their service). Breaking it means executors that get narrow ports
rather than the proxy (docs/design-notes.md, "The tree by role").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_typecheck_tree import _nstree

KNOWN = {
    "elanus.flight.actions", "elanus.flight.auth", "elanus.flight.dbgate", "elanus.flight.dml",
    "elanus.flight.dml_actions", "elanus.flight.imports", "elanus.flight.loads",
    "elanus.flight.partial", "elanus.flight.ports", "elanus.flight.proxy",
    "elanus.flight.putpipeline", "elanus.flight.search", "elanus.flight.search.bodies",
    "elanus.flight.search.bykeys", "elanus.flight.search.fileplan",
    "elanus.flight.search.highlight", "elanus.flight.search.hybrid",
    "elanus.flight.search.readplan", "elanus.flight.search.service",
    "elanus.flight.search.text", "elanus.flight.snapshots", "elanus.flight.sql.catalog",
    "elanus.flight.sql.execution", "elanus.flight.sql.service", "elanus.flight.sql.snapshot",
    "elanus.flight.sql.tables", "elanus.flight.sql.vector_search", "elanus.flight.threadwrite",
}  # fmt: skip
"""The modules of the one cycle left (it may lose members, never gain them)."""


_SCRIPT = r"""
import json, sys
import grimp

graph = grimp.build_graph("elanus", cache_dir=None)
modules = sorted(graph.modules)
assert "elanus.flight.proxy" in graph.modules, "the tree's elanus was not the one read"
edges = {m: sorted(graph.find_modules_directly_imported_by(m) & set(modules)) for m in modules}
sys.setrecursionlimit(10 * len(modules) + 1000)
index, low, stack, on_stack, found = {}, {}, [], set(), []

def visit(v):  # Tarjan's strongly connected components
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop()
            on_stack.discard(w)
            component.append(w)
            if w == v:
                break
        if len(component) > 1:
            found.append(sorted(component))

for m in modules:
    if m not in index:
        visit(m)
json.dump(found, sys.stdout)
"""


def test_no_import_cycle_but_the_one_named(tmp_path: Path) -> None:
    """grimp reads the namespace tree (``.ci/nstree.py``) in a fresh interpreter, where the
    editable install's ``elanus`` (without its mapped packages) is not imported yet."""
    root = _nstree().build_tree(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True, text=True, env=env, cwd=root, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = [set(c) for c in json.loads(done.stdout)]
    others = [sorted(c) for c in found if not c <= KNOWN]
    assert others == [], f"import cycles (TYPE_CHECKING imports count): {others}"
    assert len(found) <= 1
