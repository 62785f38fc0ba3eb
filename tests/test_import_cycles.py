"""No import cycles among ``elanus``'s modules, ``TYPE_CHECKING`` imports included
(issue 34, item 4): a module that needs a type of the one that uses it names what it uses
as a Protocol instead (``DelegatorHost``, ``DataNodeHost``, ``Placement``, ``Journal``,
``SyncReplier``, ``functions.SchemaView``, ``auth.Guarded``, ``fileplan.FilesReads``,
``searcher.Searcher``, ``dml.WriteHost``, ``actions.ActionHost``), and the proxy's action
executors name it through ``flight/executors.py``, which only they import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_typecheck_tree import _nstree

KNOWN: tuple[set[str], ...] = ()
"""Cycles allowed: none (28 modules formed one until the action registry moved below the
services and the write path and the search helpers were given Protocols)."""


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


def test_no_import_cycle(tmp_path: Path) -> None:
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
    others = [sorted(c) for c in found if not any(c <= known for known in KNOWN)]
    assert others == [], f"import cycles (TYPE_CHECKING imports count): {others}"
    assert len(found) <= len(KNOWN)
