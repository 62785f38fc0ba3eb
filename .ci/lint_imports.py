"""Run import-linter (the contracts in pyproject.toml) over the ``elanus`` namespace.

import-linter finds a package's modules by walking its directory, but ``elanus``'s
sub-packages live in sibling directories (setuptools ``package-dir``: ``elanus.flight`` is
``flight/``). So this script runs ``lint-imports`` with the namespace laid out as one tree
of symbolic links (``.ci/nstree.py``, the tree mypy checks too) first on ``PYTHONPATH``.
Extra arguments are passed on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nstree import ROOT, build_tree


def main() -> int:
    lint = Path(sys.executable).with_name("lint-imports")
    tree = build_tree()
    path = os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    cmd = [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml"), *sys.argv[1:]]
    # from the tree: lint-imports puts its working directory first on sys.path, and the
    # repository root holds the unmapped elanus/ directory
    return subprocess.run(cmd, env=env, cwd=tree, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
