"""bench/'s private modules (``_record``, ``_chaos``, ...) for the tests of them: bench/ is
scripts, not a package, so a module is loaded from its file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_bench_module(file: str, name: str) -> ModuleType:
    """``bench/<file>`` as the module ``name``, entered in ``sys.modules`` before it runs
    (its dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
