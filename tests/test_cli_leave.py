"""``elanus``'s end of process (``cli/leave.py``): no interpreter teardown, but what a normal
exit does that anyone could see still happens."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import atexit, concurrent.futures, sys, tempfile, threading, time
    from pathlib import Path
    from elanus.cli.leave import leave

    out = Path(sys.argv[1])
    kept = tempfile.TemporaryDirectory(dir=out.parent)  # its finalizer runs at exit
    atexit.register(lambda: out.open("a").write("atexit\\n"))

    def late() -> None:  # a thread that is no daemon: the exit waits for it
        time.sleep(0.3)
        out.open("a").write("thread\\n")

    threading.Thread(target=late).start()
    concurrent.futures.ThreadPoolExecutor(2).submit(time.sleep, 0)  # idle workers end
    sys.stdout.write("buffered, no newline")  # a pipe: only a flush writes it
    leave(int(sys.argv[2]))
    """
)


def test_leave_joins_threads_runs_atexit_and_flushes_then_exits_with_the_status(
    tmp_path: Path,
) -> None:
    out = tmp_path / "said"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(out), "3"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered, no newline"
    assert out.read_text() == "thread\natexit\n"  # the thread first, as a normal exit orders them
    assert [p.name for p in tmp_path.iterdir()] == ["said"], "the finalizer's dir is left"


def test_the_elanus_command_ends_with_its_status_and_its_output(tmp_path: Path) -> None:
    """Through the console script: a usage error's status and line, a command's output."""
    exe = str(Path(sys.executable).parent / "elanus")
    bad = subprocess.run([exe, "nosuch"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: [INVALID_ARGUMENT] No such command 'nosuch'")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() != ""
