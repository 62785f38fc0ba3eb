"""No import cycles among ``elanus``'s modules, ``TYPE_CHECKING`` imports included
(issue 34, item 4): a module that needs a type of the one that uses it names what it uses
as a Protocol instead (``DelegatorHost``, ``DataNodeHost``, ``Placement``, ``Journal``,
``SyncReplier``, ``functions.SchemaView``, ``auth.Guarded``, ``fileplan.FilesReads``).

Two cycles are left, named below, and may only shrink: the write path's with the proxy
(``DmlService``, ``ThreadWrite`` and ``PutPipeline`` hold the proxy, and ``actions.Call``
types executors on it), and the search service's with the helpers typed on it (``bykeys``,
``highlight``, ``text``, and ``hybrid``, which the highlighter reuses). Breaking them means
narrow ports for the write path, and Protocols for what the helpers use of the service
(docs/design-notes.md, "The tree by role").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_typecheck_tree import _nstree

KNOWN = (
    {
        "elanus.flight.actions", "elanus.flight.dml", "elanus.flight.proxy",
        "elanus.flight.putpipeline", "elanus.flight.threadwrite",
    },
    {
        "elanus.flight.search.bykeys", "elanus.flight.search.highlight",
        "elanus.flight.search.hybrid", "elanus.flight.search.service",
        "elanus.flight.search.text",
    },
)  # fmt: skip
"""The modules of the cycles left (each may lose members, never gain them; 28 modules in one
cycle before the action registry moved below the services)."""


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


def test_no_import_cycle_but_the_ones_named(tmp_path: Path) -> None:
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
