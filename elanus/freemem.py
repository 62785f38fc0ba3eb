"""Giving memory that large structures freed back to the system.

A process does not shrink when it frees: glibc's malloc keeps freed chunks in its arenas,
and Arrow's memory pool (mimalloc) keeps freed pages for reuse. Lance's reader, FAISS's
inverted lists and numpy's buffers come from malloc, Arrow's arrays from the pool. So a
role calls :func:`release` after a moment that frees much at once: a query node after a
load or a release, a datanode after a flush, an index node after a build, the coord after
checking a report (it loads the index). Before, a 1 M x 128-d IVF_FLAT collection left
+413 MB on the datanode after its flush, +881 MB on the index node after the build and
+470 MB on the coord (bench/README.md, "Memory").

Lance reads on a pool of threads, and glibc gives each thread that contends an arena of
its own (up to 8 per core): freed chunks scattered over many arenas are not whole pages,
and ``malloc_trim`` cannot return them. Scanning a 100 MB segment five times grew a
process by 214 MB, then 200 MB after trimming; with two arenas by 54 MB, from the first
scan on. So a server process caps the arenas at :data:`ARENAS` (:func:`limit_arenas`),
unless ``MALLOC_ARENA_MAX`` is set.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Any

import pyarrow as pa

ARENAS = 2
"""malloc arenas a server process uses at most (glibc's ``M_ARENA_MAX``)."""
_M_ARENA_MAX = -8


def _glibc(name: str) -> Any:
    """A function of glibc's malloc, or ``None`` (another C library, another system)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    return getattr(libc, name, None)


_TRIM = _glibc("malloc_trim")
_MALLOPT = _glibc("mallopt")


def release() -> None:
    """Return the freed memory of Arrow's pool and of malloc's arenas to the system."""
    pa.default_memory_pool().release_unused()
    if _TRIM is not None:
        _TRIM(0)


def use_system_pool() -> None:
    """Allocate Arrow's buffers with malloc rather than the bundled mimalloc (call before
    the roles start), unless ``ARROW_DEFAULT_MEMORY_POOL`` names a pool.

    On this 2-core VM, mimalloc made a growing segment's settles twice as slow: a query node
    appending 5,000-row batches of 128-d vectors and searching after every five spent
    1.4-1.5 s decoding and appending 1 M rows and 2.7 s in its reads (p50 75 ms) with
    mimalloc, 0.70-0.75 s and 1.0-1.1 s (p50 22-30 ms) with malloc or jemalloc; in
    ``bench/flow.py --cluster`` the Strong reads' shard search fell from 1.2-1.8 s to 0.66 s
    (bench/README.md, "Flow control"). The time goes to first touches of fresh pages
    (~5 us each on this Firecracker VM, whose free memory DAMON reclaims): mimalloc appears
    to take new pages for each large block and return them soon after a merge frees it.
    malloc's pages are what :func:`release` trims, as before."""
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pa.set_memory_pool(pa.system_memory_pool())


def limit_arenas(arenas: int = ARENAS) -> None:
    """Cap this process's malloc arenas (call before its threads start), unless the
    environment sets ``MALLOC_ARENA_MAX`` (glibc read it at start)."""
    if _MALLOPT is not None and "MALLOC_ARENA_MAX" not in os.environ:
        _MALLOPT(_M_ARENA_MAX, arenas)
