"""Run mypy over the ``elanus`` namespace as the one package it is at run time.

mypy checks the tree of links ``.ci/nstree.py`` lays out, so ``from elanus.channels.bus
import Bus`` resolves to ``channels/bus.py`` instead of a missing module (which would be
``Any``: nothing across packages checked). Messages name the repository's files, not the
links. Extra arguments are passed on to mypy.
"""

from __future__ import annotations

import os
import sys

from mypy import api
from nstree import ROOT, build_tree, real_path


def main() -> int:
    tree = build_tree()
    os.chdir(ROOT)  # the cache and the configuration are the repository's
    out, err, status = api.run([str((tree / "elanus").relative_to(ROOT)), *sys.argv[1:]])
    for line in out.splitlines():
        path, sep, rest = line.partition(":")
        print(real_path(path) + sep + rest if sep else line)
    sys.stderr.write(err)
    return status


if __name__ == "__main__":
    sys.exit(main())
