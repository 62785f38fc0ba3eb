"""Ending an ``elanus`` process without CPython's teardown.

When a command has finished (or a server has stopped its roles, its nats-server and its
catalog), the interpreter still tears down every module and frees every object one by one
before the process ends: with pyarrow, FAISS, Lance, DuckDB and gRPC loaded that is
0.3 s of CPU for a standalone's stop (0.46 s from SIGTERM to exit, 0.15 s without it) and
60-80 ms of a 0.35 s CLI call. Nothing of ours needs it: files, the catalog, the log and
child processes are closed by the code that opened them.

``leave`` does the part of a normal exit that can matter to anyone, in its order: it joins
the threads that are not daemons (``threading._shutdown``, which first tells idle
executors to end), runs the ``atexit`` handlers (logging's flush, ``weakref.finalize``
and temporary directories, a Spark session's warehouse) and flushes stdout and stderr.
Then ``os._exit``.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def leave(status: int) -> NoReturn:
    """Exit with ``status`` once threads, ``atexit`` handlers and stdio are done."""
    join_threads = getattr(threading, "_shutdown", None)  # what Py_FinalizeEx calls first
    if join_threads is not None:
        join_threads()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`elanus ... | head`), a closed stream
            pass
    os._exit(status)


def exit_status(exc: SystemExit) -> int:
    """``sys.exit``'s argument as the process would report it: None is 0, a message is
    printed and is 1."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
