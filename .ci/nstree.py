"""The ``elanus`` namespace as one directory tree of symbolic links, for tools that find
modules by walking directories (mypy, import-linter).

At run time ``elanus``'s sub-packages live in sibling directories (setuptools
``package-dir``: ``elanus.flight`` is ``flight/``), and an editable install reaches them
through an import hook that static tools cannot follow: to them every ``elanus.<mapped>``
import is missing. The tree is built from pyproject's own ``package-dir`` (so it cannot
drift), anew on each run (so a new module is in it): ``build/namespace/elanus/...``,
git-ignored. ``python .ci/nstree.py`` builds it and prints its root.
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "namespace"
"""The shared tree: ``make lint``'s mypy and import-linter both read it."""


def build_tree(into: Path = TREE) -> Path:
    """``into/elanus/...``: links to the root package's files, and one to each mapped
    sub-package's directory; what was there before is replaced. Returns ``into``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    top = into / "elanus"
    shutil.rmtree(top, ignore_errors=True)
    top.mkdir(parents=True)
    for entry in (ROOT / package_dir["elanus"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for name, directory in package_dir.items():
        if name != "elanus":
            (top / name.removeprefix("elanus.")).symlink_to(ROOT / directory)
    return into


def real_path(path: str, tree: Path = TREE) -> str:
    """A path in the tree (as a tool reports it) as the repository's own file, so a
    message points at the file to edit; other paths are returned as they are."""
    resolved = Path(path).resolve()
    if Path(path).absolute().is_relative_to(tree) and resolved.is_relative_to(ROOT):
        return str(resolved.relative_to(ROOT))
    return path


if __name__ == "__main__":
    print(build_tree(Path(sys.argv[1]) if len(sys.argv) > 1 else TREE))
