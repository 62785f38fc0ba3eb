"""Shared fixtures: a real nats-server, the asyncio loop thread, and a running stack
(coord + Flight proxy on a loopback port) that tests reach through real Flight clients."""

from __future__ import annotations

import os

# pymilvus (the Milvus Lite reference in tests/conformance and elsewhere) brings grpc into
# this process. With grpc's fork support on, a fork for a child process (the embedded
# nats-server, started with a preexec_fn) could run grpc's fork handlers while its poller
# threads were busy and abort the child before exec ("epoll_wait error: Bad file
# descriptor"; seen twice in a full run). The children exec at once and never use grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
# Servers the tests start never take Milvus's port 19530 (other test runs, a real Milvus):
# the Milvus face is off unless a test asks for it on a free port (tests/test_milvus_*.py).
os.environ["ELANUS_MILVUS_PORT"] = "0"
# Every JVM the tests start (the session's Spark, `elanus index build --spark-master`,
# spark-submit: each launched through spark-submit, which adds SPARK_SUBMIT_OPTS to the
# driver's java command) compiles with C1 only and collects with one GC thread: a test's
# JVM lives seconds to minutes, and C2's compiler threads and parallel GC cost more CPU
# than they save on two cores (a Spark start and first jobs: ~17 s of CPU, 11 s this way).
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

import contextlib  # noqa: E402
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scheduling import LongestFirst, record_seconds  # noqa: E402
from tiers import install_guards, mark_integration, unit_guard  # noqa: E402, F401

from elanus import ElanusError, ErrorCode
from elanus.channels.bus import Bus
from elanus.channels.nats_server import EmbeddedNats
from elanus.channels.natsauth import NatsCredentials
from elanus.channels.runtime.loop import LoopThread
from elanus.client.client import Client
from elanus.flight.proxy import ProxyServer
from elanus.index.indexnode import IndexNode
from elanus.meta.coord import Coordinator
from elanus.schema import quick_schema
from elanus.segments.datanode.node import DataNode
from elanus.segments.querynode.node import QueryNode
from elanus.settings import Settings

STEP_TIMEOUT_S = 30.0


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[EmbeddedNats]:
    server = EmbeddedNats(tmp_path / "nats").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    loop = LoopThread("test-loop").start()
    try:
        yield loop
    finally:
        loop.stop()


class Stack:
    """A coord and any number of proxies on one NATS server, all on one loop thread.

    ``nats`` is the server (its URL and credentials are used) or a URL. ``proxy``/``uri``
    are the first proxy's; ``add_proxy`` starts more (optionally on their own NATS
    connection, as separate processes would have), ``restart`` replaces the coord and
    proxies with new ones on the same data dir. ``close`` stops whatever still runs.

    It ticks at the product's default interval (200 ms): Strong reads ask for a tick
    (``tick_now``) rather than wait for one, and an idle stack at 50 ms ticks cost a tenth
    of a core, which made the suite 17 % slower on 2 cores (20 stack-heavy files: 289-298 s
    at 50 ms, 241-251 s at 200 ms). A test that needs other ticks sets them.
    """

    def __init__(
        self, loop: LoopThread, nats: EmbeddedNats | str, data_dir: Path, **settings: Any
    ) -> None:
        self.loop = loop
        defaults: dict[str, Any] = {
            "data_dir": str(data_dir),
            "nats_url": nats if isinstance(nats, str) else nats.url,
            "flight_host": "127.0.0.1",
            "flight_port": 0,
            "milvus_port": 0,
            "session_ttl_s": 2,
        }
        if isinstance(nats, EmbeddedNats):
            creds = nats.credentials
            defaults.update(nats_user=creds.user, nats_password=creds.password)
        self.settings = Settings(**{**defaults, **settings})
        self.bus: Bus = self.call(self.new_bus("test-stack").connect())
        self._buses: list[Bus] = [self.bus]
        self.coord: Coordinator | None = None
        self.proxies: list[ProxyServer] = []
        self.datanodes: list[DataNode] = []
        self.querynodes: list[QueryNode] = []
        self.indexnodes: list[IndexNode] = []
        self._clients: list[Client] = []

    def call(self, coro: Any) -> Any:
        return self.loop.call(coro, timeout=STEP_TIMEOUT_S)

    @property
    def nats_credentials(self) -> NatsCredentials | None:
        s = self.settings
        return (
            NatsCredentials(s.nats_user or "elanus", s.nats_password) if s.nats_password else None
        )

    def new_bus(self, name: str) -> Bus:
        """An unconnected bus on the stack's NATS, with its credentials (as a role has)."""
        return Bus(
            self.settings.nats_url or "",
            name=name,
            credentials=self.nats_credentials,
            in_process=self.settings.transport != "nats",
            stream_replicas=self.settings.stream_replicas,
        )

    def role_env(self, **env: str) -> dict[str, str]:
        """``env`` plus the NATS credentials, for a role started as its own process (they
        travel in its environment, never on its command line)."""
        creds = self.nats_credentials
        return {**env, **(creds.env() if creds else {})}

    @property
    def proxy(self) -> ProxyServer:
        return self.proxies[0]

    @property
    def uri(self) -> str:
        return self.proxy.uri

    def start(self) -> Stack:
        self.coord = Coordinator(self.settings, self.bus)
        self.call(self.coord.start())
        self.add_datanode()
        self.add_querynode()
        self.add_proxy()
        return self

    def add_querynode(self) -> QueryNode:
        node = QueryNode(self.settings, self.bus)
        self.call(node.start())
        self.querynodes.append(node)
        return node

    def add_indexnode(self) -> IndexNode:
        node = IndexNode(self.settings, self.bus)
        self.call(node.start())
        self.indexnodes.append(node)
        return node

    def add_datanode(self) -> DataNode:
        node = DataNode(self.settings, self.bus)
        self.call(node.start())
        self.datanodes.append(node)
        return node

    def add_proxy(self, own_bus: bool = False, **settings: Any) -> ProxyServer:
        """Another proxy; ``settings`` replace the stack's for it alone."""
        bus = self.bus
        if own_bus:
            bus = self.call(self.new_bus("test-proxy").connect())
            self._buses.append(bus)
        proxy = ProxyServer(self.settings.replace(**settings), bus)
        self.call(proxy.start())
        self.proxies.append(proxy)
        return proxy

    def stop_proxy(self, proxy: ProxyServer) -> None:
        self.proxies.remove(proxy)
        self.call(proxy.stop())

    def client(self, uri: str | None = None, **kwargs: Any) -> Client:
        """An SDK client on the first proxy (closed by ``close``)."""
        c = Client(uri or self.uri, timeout=STEP_TIMEOUT_S, **kwargs)
        self._clients.append(c)
        return c

    def stop_roles(self) -> None:
        errors: list[BaseException] = []
        for proxy in reversed(self.proxies):
            _collect(errors, lambda p=proxy: self.call(p.stop()))
        self.proxies.clear()
        for ixn in reversed(self.indexnodes):
            _collect(errors, lambda n=ixn: self.call(n.stop()))
        self.indexnodes.clear()
        for qn in reversed(self.querynodes):
            _collect(errors, lambda n=qn: self.call(n.stop()))
        self.querynodes.clear()
        for node in reversed(self.datanodes):
            _collect(errors, lambda n=node: self.call(n.stop()))
        self.datanodes.clear()
        if self.coord is not None:
            _collect(errors, lambda: self.call(self.coord.stop()))  # type: ignore[union-attr]
            self.coord = None
        if errors:
            raise errors[0]

    def restart(self) -> None:
        """Stop the coord and proxies, then start new ones on the same data dir."""
        self.stop_roles()
        self.start()

    def close(self) -> None:
        errors: list[BaseException] = []
        for c in self._clients:
            _collect(errors, c.close)
        _collect(errors, self.stop_roles)
        for bus in self._buses:
            _collect(errors, lambda b=bus: self.call(b.close()))
        if errors:
            raise errors[0]


def _collect(errors: list[BaseException], fn: Any) -> None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - keep cleaning up, report the first
        errors.append(exc)


@contextlib.contextmanager
def own_stack(
    tmp: Path,
    name: str,
    *,
    max_payload_mb: int | None = None,
    kind: type[Stack] | None = None,
    **settings: Any,
) -> Iterator[Stack]:
    """A started ``Stack`` on its own nats-server and loop thread, for module-scoped
    fixtures; the stack, the loop and the server stop in that order, even on failure.
    ``max_payload_mb`` None gives the server its stock limits (1 MB messages); ``kind``:
    a subclass of ``Stack`` (``milvus_stack.MilvusStack``)."""
    nats = EmbeddedNats(tmp / "nats", max_payload_mb=max_payload_mb).start()
    try:
        loop = LoopThread(name).start()
        try:
            stack = (kind or Stack)(loop, nats, tmp / "data", **settings)
            try:
                stack.start()
                yield stack
            finally:
                stack.close()
        finally:
            loop.stop()
    finally:
        nats.stop()


def bare_collection(
    client: Client, name: str, dim: int, metric_type: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """The quick setup's collection (``id`` + ``vector``, dynamic fields) with no index and
    not loaded, for tests that need it so: quick setup itself indexes and loads, as
    pymilvus's does. ``metric_type`` is recorded as quick setup records it (a property)."""
    if metric_type is not None:
        kwargs["properties"] = {**kwargs.get("properties", {}), "metric_type": metric_type}
    return client.create_collection(name, schema=quick_schema(dim), **kwargs)


def bare_schema_file(path: Path, dim: int) -> Path:
    """``bare_collection``'s schema as a file, for ``elanus collection create --schema``
    (``--dim`` indexes and loads, as quick setup does)."""
    path.write_text(json.dumps(quick_schema(dim).to_dict()))
    return path


def wait_for(pred: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
    """Poll ``pred`` until it returns something true (and return that), or fail naming
    ``what``."""
    deadline = time.monotonic() + timeout
    while not (value := pred()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def raises_code(code: ErrorCode, call: Callable[[], Any], *words: str) -> str:
    """``call`` fails with ``code`` and a message holding every one of ``words``; the
    message."""
    with pytest.raises(ElanusError) as err:
        call()
    assert err.value.code == code, err.value
    for word in words:
        assert word in err.value.message, err.value.message
    return err.value.message


TRANSPORTS = ("auto", "nats")
both_transports = pytest.mark.parametrize("stack", TRANSPORTS, indirect=True)
"""Run a test on a stack whose roles call each other in-process, and again on one whose
every role-to-role request crosses NATS as frame messages (``transport = "nats"``)."""


@pytest.fixture
def stack_settings() -> dict[str, Any]:
    """Settings of the ``stack`` fixture's stack; a test module overrides this fixture to
    change them (small segments, no background compaction, ...)."""
    return {}


@pytest.fixture
def stack(
    nats_server: EmbeddedNats,
    loop_thread: LoopThread,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    stack_settings: dict[str, Any],
) -> Iterator[Stack]:
    transport = getattr(request, "param", "auto")
    s = Stack(loop_thread, nats_server, tmp_path / "data", transport=transport, **stack_settings)
    try:
        s.start()
        yield s
    finally:
        s.close()


# =============================================================================================
# CLI / standalone processes (used by tests/test_cli.py and tests/test_standalone.py).
# Real `elanus` processes run as a user would start them; everything they start is killed in
# finalizers, whatever the test did.
# =============================================================================================
import json as _json  # noqa: E402
import os as _os  # noqa: E402
import signal as _signal  # noqa: E402
import subprocess as _subprocess  # noqa: E402
import sys as _sys  # noqa: E402
import time as _time  # noqa: E402
from collections.abc import Callable as _Callable  # noqa: E402

import psutil as _psutil  # noqa: E402

from elanus.channels.nats_server import free_port as _free_port  # noqa: E402
from elanus.errors import ElanusError as _ElanusError  # noqa: E402

ELANUS_BIN = str(Path(_sys.executable).parent / "elanus")


def cli_env(**overrides: str) -> dict[str, str]:
    """The environment of a CLI subprocess: no inherited ELANUS_* settings, a wide terminal."""
    env = {k: v for k, v in _os.environ.items() if not k.startswith("ELANUS_")}
    env.update(COLUMNS="200", NO_COLOR="1", PYTHONUNBUFFERED="1", ELANUS_MILVUS_PORT="0")
    env.update(overrides)
    return env


def run_elanus(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60.0
) -> _subprocess.CompletedProcess[str]:
    """Run ``elanus ARGS`` to completion, capturing text output."""
    return _subprocess.run(
        [ELANUS_BIN, *args],
        cwd=cwd,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=_subprocess.DEVNULL,
    )


def cli(server: StandaloneProcess, *args: str) -> str:
    """Run a client command against ``server``; it must succeed and write nothing on stderr
    (no progress bars without a terminal). Returns stdout."""
    result = run_elanus(*args, "--uri", server.uri)
    assert result.returncode == 0, f"elanus {' '.join(args)} failed:\n{result.stderr}"
    assert result.stderr == "", result.stderr
    return result.stdout


def cli_json(server: StandaloneProcess, *args: str) -> Any:
    return _json.loads(cli(server, *args, "--json"))


def process_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting for a reaper counts as gone)."""
    try:
        return _psutil.Process(pid).status() == _psutil.STATUS_ZOMBIE
    except _psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = _time.monotonic() + timeout
    while _time.monotonic() < deadline:
        if process_gone(pid):
            return True
        _time.sleep(0.05)
    return process_gone(pid)


def wait_healthy(uri: str, timeout: float = 30.0, alive: _Callable[[], None] | None = None) -> None:
    """Poll the Flight ``health`` action at ``uri``; ``alive`` raises if the server died."""
    deadline = _time.monotonic() + timeout
    last: Exception | None = None
    while _time.monotonic() < deadline:
        if alive is not None:
            alive()
        try:
            with Client(uri, timeout=2) as client:  # connecting asks the proxy already
                client.health()
            return
        except _ElanusError as exc:
            if exc.code == "UNAUTHENTICATED":  # a server with auth_enabled: it answered
                return
            last = exc
        _time.sleep(0.1)
    raise AssertionError(f"{uri} not healthy in {timeout}s: {last}")


class ElanusProcess:
    """An ``elanus ...`` server command as a subprocess in its own session, output in a log.

    ``stop`` (and the fixtures) SIGKILL its process group and every child ever seen, so a
    failing test leaves nothing running.
    """

    def __init__(
        self,
        *args: str,
        log_path: Path,
        uri: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.args = args
        self.env = env or {}
        self.cwd = cwd
        self.log_path = log_path
        self.uri = uri
        self.proc: _subprocess.Popen[bytes] | None = None
        self._known_children: dict[int, _psutil.Process] = {}

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> ElanusProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = _subprocess.Popen(
                [ELANUS_BIN, *self.args],
                stdout=log,
                stderr=_subprocess.STDOUT,
                stdin=_subprocess.DEVNULL,
                env=cli_env(**self.env),
                start_new_session=True,
                cwd=self.cwd,
            )
        return self

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(
                f"elanus {' '.join(self.args)} exited with {self.proc.returncode}:\n{self.log()}"
            )

    def wait_ready(self, timeout: float = 30.0) -> ElanusProcess:
        """Wait until the proxy it hosts answers ``health``."""
        assert self.uri is not None, "this process serves no Flight uri"
        wait_healthy(self.uri, timeout, alive=self.check_alive)
        self.children()  # remember children (nats-server) for cleanup
        return self

    def children(self) -> list[_psutil.Process]:
        try:
            kids = _psutil.Process(self.pid).children(recursive=True)
        except _psutil.NoSuchProcess:
            return []
        self._known_children.update((k.pid, k) for k in kids)
        return kids

    def nats_children(self) -> list[_psutil.Process]:
        out = []
        for kid in self.children():
            try:
                if kid.name() == "nats-server":
                    out.append(kid)
            except _psutil.NoSuchProcess:
                pass
        return out

    def send(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait; then SIGKILL whatever is left. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.children()
            self.proc.send_signal(_signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except _subprocess.TimeoutExpired:
                pass
        self.kill_all()
        return self.proc.returncode

    def kill_all(self) -> None:
        assert self.proc is not None
        try:
            _os.killpg(self.proc.pid, _signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(5)
        for kid in self._known_children.values():
            try:
                kid.kill()  # psutil refuses if the pid now belongs to another process
            except _psutil.Error:
                pass


class StandaloneProcess(ElanusProcess):
    """``elanus standalone`` on a free Flight port and an embedded (or given) NATS."""

    uri: str

    def __init__(
        self,
        data_dir: Path,
        *extra: str,
        port: int | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.port = port or _free_port()
        nats = [] if "--nats" in extra else ["--nats-port", "0"]
        super().__init__(
            "standalone",
            "--data-dir",
            str(data_dir),
            "--port",
            str(self.port),
            *nats,
            *extra,
            log_path=data_dir.parent / f"{data_dir.name}-standalone.log",
            uri=f"grpc://127.0.0.1:{self.port}",
            env=env,
        )

    @property
    def info_path(self) -> Path:
        return self.data_dir / "standalone.json"

    def info(self) -> dict[str, Any]:
        doc: dict[str, Any] = _json.loads(self.info_path.read_text())
        return doc

    def start(self) -> StandaloneProcess:
        super().start()
        return self

    def wait_ready(self, timeout: float = 30.0) -> StandaloneProcess:
        """Flight answers, and the info file names this process: it is written once every
        role started, the Milvus face included (which binds its port after Flight)."""
        deadline = _time.monotonic() + timeout
        super().wait_ready(timeout)
        while True:
            try:
                if self.info().get("pid") == self.pid:
                    return self
            except (OSError, ValueError):
                pass  # not written yet, or mid-replace
            self.check_alive()
            assert _time.monotonic() < deadline, f"{self.info_path} not written in {timeout}s"
            _time.sleep(0.05)


@pytest.fixture
def elanus_processes() -> Iterator[ProcessTracker]:
    """``track(process)``: every tracked process is stopped (and killed) at teardown."""
    tracker = ProcessTracker()
    try:
        yield tracker
    finally:
        tracker.stop_all()


class ProcessTracker:
    """The processes a test started; ``stop_all`` before the NATS they use goes away
    (a role stopping without NATS waits out its timeouts)."""

    def __init__(self) -> None:
        self.tracked: list[ElanusProcess] = []

    def __call__(self, process: ElanusProcess) -> ElanusProcess:
        self.tracked.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.tracked:  # every one shuts down at once, then each is waited for
            if process.proc is not None and process.proc.poll() is None:
                process.children()
                process.proc.send_signal(_signal.SIGTERM)
        for process in reversed(self.tracked):
            process.stop(timeout=5)


@pytest.fixture
def standalone_factory(tmp_path: Path, elanus_processes: Any) -> _Callable[..., StandaloneProcess]:
    """Make (unstarted) standalone processes; all of them are killed at teardown."""
    count = 0

    def make(
        *extra: str, data_dir: Path | None = None, env: dict[str, str] | None = None
    ) -> StandaloneProcess:
        nonlocal count
        count += 1
        sp = StandaloneProcess(data_dir or tmp_path / f"data{count}", *extra, env=env)
        elanus_processes(sp)
        return sp

    return make


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """One standalone server per test module that asks for it (the CLI suites)."""
    sp = StandaloneProcess(tmp_path_factory.mktemp("standalone") / "data")
    try:
        yield sp.start().wait_ready()
    finally:
        sp.stop()


# =============================================================================================
# One local Spark (local[2]) for every Spark test module: starting a JVM costs 10-30 s.
# =============================================================================================
@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    import elanus.spark

    session = elanus.spark.session("local[2]", "elanus-tests")
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        elanus.spark.shutdown(session)  # the JVM too: it would outlive the tests otherwise


MARKED_BY_FIXTURE = {"spark": pytest.mark.spark, "elanus_processes": pytest.mark.slow}
"""What a fixture makes a test: a user of the session's Spark starts a JVM; one that starts
``elanus`` processes of its own (``standalone_factory`` too) is end-to-end, so slow."""


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by the fixtures it uses, directly or through other fixtures, so the
    inner loop (``-m "not spark and not chaos and not slow"``) holds no new test by mistake;
    then keep the tests of the ``--phase`` asked for."""
    for item in items:
        used = getattr(item, "fixturenames", ())
        for fixture, mark in MARKED_BY_FIXTURE.items():
            if fixture in used:
                item.add_marker(mark)
        mark_integration(item)
    phase = config.getoption("phase")
    if phase != "all":
        serial = [i.get_closest_marker("serial") is not None for i in items]
        keep = [i for i, s in zip(items, serial, strict=True) if s == (phase == "serial")]
        left = [i for i, s in zip(items, serial, strict=True) if s != (phase == "serial")]
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = keep


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--phase",
        choices=("all", "parallel", "serial"),
        default="all",
        help="make test's phases: every test but those marked serial (run by pytest-xdist "
        "workers side by side), or only those (alone, after); default all",
    )


def pytest_configure(config: pytest.Config) -> None:
    install_guards()


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: ``-p no:xdist`` has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LongestFirst | None:
    return LongestFirst(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The serial phase imports only the files that mark a test serial: importing every
    test module costs ~13 s of CPU."""
    if config.getoption("phase") != "serial" or not collection_path.name.startswith("test_"):
        return None
    if collection_path.suffix != ".py":
        return None
    return "mark.serial" not in collection_path.read_text() or None


SLOWEST_FILES = 15


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The files that took longest, setup and teardown included: with ``make test``'s scheduling
    a file runs whole in one worker, so these bound how far more workers can take the
    suite (issue 34 asks for it under 15 minutes on 2 cores)."""
    by_file: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid, duration = getattr(report, "nodeid", ""), getattr(report, "duration", None)
            if nodeid and isinstance(duration, float):
                path = nodeid.split("::")[0]
                by_file[path] = by_file.get(path, 0.0) + duration
    if len(by_file) < 2:
        return
    terminalreporter.section(f"slowest {SLOWEST_FILES} files")
    slowest = sorted(by_file.items(), key=lambda kv: -kv[1])[:SLOWEST_FILES]
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}s  {path}")
    terminalreporter.write_line(f"{sum(by_file.values()):8.1f}s  in all ({len(by_file)} files)")
    if terminalreporter.config.getoption("phase") != "serial":  # the order is the parallel phase's
        record_seconds(by_file)


# =============================================================================================
# S3 storage: a real S3-protocol server (moto_server) for tests that run on local and S3
# =============================================================================================
from s3 import MotoServer as _MotoServer  # noqa: E402
from s3 import start_moto as _start_moto  # noqa: E402


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_MotoServer]:
    server = _start_moto(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["local", "s3"])
def storage_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings overrides for a storage root: none (local, under the data dir) or a fresh
    bucket prefix on the moto server."""
    if request.param == "local":
        return {}
    server: _MotoServer = request.getfixturevalue("moto_server")
    return server.settings(server.new_bucket())
