"""mypy sees ``elanus`` as the one package it is at run time (``make lint`` checks the tree
of links ``.ci/nstree.py`` lays out). Were a mapped package (``elanus.flight`` is
``flight/``) missing to mypy, every name imported from it would be ``Any`` and nothing
across packages would be checked, silently: here each package's name must fail a
deliberately wrong assignment with its own type."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tomllib
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
    "setuptools"
]["package-dir"]

PROBES = {
    "elanus": ("elanus.schema", "Schema"),
    "elanus.channels": ("elanus.channels.bus", "Bus"),
    "elanus.cli": ("elanus.cli.roles", "RoleSpec"),
    "elanus.flight": ("elanus.flight.proxy", "ProxyServer"),
    "elanus.index": ("elanus.index.indexnode", "IndexNode"),
    "elanus.meta": ("elanus.meta.coord", "Coordinator"),
    "elanus.milvus": ("elanus.milvus.server", "MilvusFace"),
    "elanus.segments": ("elanus.segments.datanode.node", "DataNode"),
    "elanus.spark": ("elanus.spark.index_run", "IndexRun"),
    "elanus.webui": ("elanus.webui.server", "WebConsole"),
}
"""One class of each ``package-dir`` entry."""


def _nstree():  # .ci/ is scripts, not a package
    spec = importlib.util.spec_from_file_location("nstree", ROOT / ".ci" / "nstree.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lint_cache(tmp_path: Path) -> str:
    """A copy of ``make lint``'s mypy cache, when there is one (CI lints first): the tree's
    modules are not analysed again (~11 s of CPU on CI's machine), while the probe and where
    each of its imports resolves (the links of the tree built here) are checked anew."""
    copy = tmp_path / "mypy-cache"
    try:
        shutil.copytree(ROOT / ".mypy_cache", copy)
    except OSError:  # none yet, or a lint writing it right now: start from nothing
        return os.devnull
    return str(copy)


def test_every_mapped_package_has_a_probe() -> None:
    assert set(PROBES) == set(PACKAGE_DIR)


def test_names_across_packages_resolve_to_their_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _nstree().build_tree(tmp_path)
    probe = Path("elanus", "_typeprobe.py")
    lines = [f"from {module} import {name}" for module, name in PROBES.values()]
    lines += [f"wrong_{i}: int = {name}" for i, (_, name) in enumerate(PROBES.values())]
    (tmp_path / probe).write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)  # the tree's elanus, not the repository's elanus/ directory
    config = str(ROOT / "pyproject.toml")
    cache = lint_cache(tmp_path)
    out, err, _ = api.run([str(probe), "--config-file", config, "--cache-dir", cache])
    assert err == ""
    mine = [line for line in out.splitlines() if line.startswith(str(probe))]
    first = len(PROBES) + 1
    expected = [
        f"{probe}:{first + i}: error: Incompatible types in assignment (expression has type "
        f'"type[{name}]", variable has type "int")  [assignment]'
        for i, (_, name) in enumerate(PROBES.values())
    ]
    assert mine == expected
