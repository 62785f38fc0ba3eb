"""Run import-linter (the contracts in pyproject.toml) over the ``elanus`` namespace.

import-linter finds a package's modules by walking its directory, but ``elanus``'s
sub-packages live in sibling directories (setuptools ``package-dir``: ``elanus.flight`` is
``flight/``). So this script lays the namespace out as one tree of symbolic links, built
from pyproject's own ``package-dir`` (so it cannot drift), in a temporary directory, and
runs ``lint-imports`` with that tree first on ``PYTHONPATH``. Extra arguments are passed on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build_tree(into: Path) -> None:
    """``into/elanus/...``: the root package's files, and each mapped sub-package."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    top = into / "elanus"
    top.mkdir()
    for entry in (ROOT / package_dir["elanus"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for name, directory in package_dir.items():
        if name != "elanus":
            (top / name.removeprefix("elanus.")).symlink_to(ROOT / directory)


def main() -> int:
    lint = Path(sys.executable).with_name("lint-imports")
    with tempfile.TemporaryDirectory(prefix="elanus-importlint-") as tmp:
        build_tree(Path(tmp))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, os.environ.get("PYTHONPATH", "")])}
        cmd = [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml"), *sys.argv[1:]]
        # from the tree: lint-imports puts its working directory first on sys.path, and the
        # repository root holds the unmapped elanus/ directory
        return subprocess.run(cmd, env=env, cwd=tmp, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
