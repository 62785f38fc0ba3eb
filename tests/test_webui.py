"""The operator's web console (issue 38, item 5): served by the proxy on ``webui_port``,
its pages tested in a real headless Chromium (``tests/browser.py``): each page loads with
no console error and shows live data, and a page refreshes without a reload. Behind the
proxy's users (a login; each view runs with the user's privileges) and its TLS.

One ``elanus standalone`` with the console on serves the open pages; an in-process stack
with authentication and TLS serves the login. Set ``ELANUS_CONSOLE_SHOTS=docs/img`` to
write each page's screenshot for docs/console.md.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from browser import Browser, require
from certs import CertAuthority
from conftest import Stack, StandaloneProcess, own_stack
from prometheus_client import CollectorRegistry, Counter, Gauge

import elanus
from elanus.channels.nats_server import free_port
from elanus.channels.runtime import requestlog
from elanus.client.client import Client
from elanus.webui.samples import MetricSamples
from elanus.webui.server import WebConsole

DIM = 8
ROOT_PASSWORD = "console-root-pw"
SHOTS = os.environ.get("ELANUS_CONSOLE_SHOTS")


@pytest.fixture(scope="module")
def chrome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium, driver = require()
    tmp = tmp_path_factory.mktemp("chromium")
    browser = Browser(chromium, driver, tmp / "profile", tmp / "chromedriver.log")
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """A standalone with its console on, as ``make run`` starts one."""
    sp = StandaloneProcess(
        tmp_path_factory.mktemp("console") / "data",
        "--webui-port",
        str(free_port()),
        env={"ELANUS_SLOW_REQUEST_S": "0.05"},  # a few slow ones to show
    )
    try:
        yield sp.start().wait_ready()
    finally:
        sp.stop()


def console_url(sp: StandaloneProcess) -> str:
    url: str = sp.info()["webui_url"]
    return url


@pytest.fixture(scope="module")
def client(server: StandaloneProcess) -> Iterator[Client]:
    c = Client(server.uri, timeout=60)
    try:
        yield c
    finally:
        c.close()


def _rows(start: int, n: int) -> dict[str, Any]:
    rng = np.random.default_rng(start)
    return {"id": np.arange(start, start + n), "vector": rng.random((n, DIM), dtype=np.float32)}


@pytest.fixture(scope="module")
def books(
    server: StandaloneProcess, client: Client, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """Collections with something in every section: flushed segments, an index, a load and
    its replica, a compaction, an import and a backup."""
    client.create_collection("books", dimension=DIM)  # indexed (AUTOINDEX) and loaded
    client.create_collection("drafts", schema=elanus.Schema.from_dict(_drafts_schema()))
    for start in (0, 600):
        client.insert("books", _rows(start, 600))
        client.flush("books")
    client.compact("books")
    imports = server.data_dir / "import"
    columns = _rows(5000, 400)
    table = pa.table({"id": columns["id"], "vector": list(columns["vector"])})
    pq.write_table(table, imports / "more-books.parquet")
    client.wait_import(client.bulk_import("books", ["more-books.parquet"]))
    client.create_backup(str(tmp_path_factory.mktemp("backups")), name="nightly")
    client.wait_for_index("books")
    return "books"


def _drafts_schema() -> dict[str, Any]:
    return {
        "fields": [
            {"name": "id", "type": "Int64", "is_primary": True},
            {"name": "title", "type": "VarChar", "max_length": 200},
            {"name": "emb", "type": "FloatVector", "dim": DIM},
        ],
        "description": "not loaded yet",
    }


def _count(client: Client) -> int:
    rows = client.query("books", "", ["count(*)"], consistency_level="Strong")
    return int(rows[0]["count(*)"])


def _get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers)
    opener = urllib.request.build_opener(_NoRedirect())
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


# -- serving ------------------------------------------------------------------------------
def test_the_console_is_announced_and_serves_its_own_files(
    server: StandaloneProcess, client: Client
) -> None:
    url = console_url(server)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/webui/", url)
    assert re.search(r"console\s+" + re.escape(url), server.log())  # the start panel
    port = int(url.split(":")[2].split("/")[0])
    sessions = client.list_sessions()
    assert [s["meta"]["webui_port"] for s in sessions if s["role"] == "proxy"] == [port]
    assert {s["meta"]["version"] for s in sessions} == {elanus.__version__}

    root = url.removesuffix("/webui/")
    status, headers, _ = _get(root + "/")
    assert status == 302 and headers["Location"] == "/webui/"
    status, headers, page = _get(url)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    for asset in re.findall(rb'(?:src|href)="([^"#]+)"', page):  # all from the package
        assert not asset.startswith((b"http", b"//")), asset
        assert _get(url + asset.decode())[0] == 200, asset
    for name in ("console.js", "console.css", "favicon.svg"):
        body = _get(url + name)[1:][1].decode()
        external = set(re.findall(r"https?://[^\s\"')]+", body)) - {"http://www.w3.org/2000/svg"}
        assert not external, (name, external)  # no CDN, no font or script from elsewhere
    assert _get(url + "nope.js")[0] == 404
    status, _, body = _get(root + "/api/nope")
    assert status == 404 and json.loads(body)["error"]["code"] == "INVALID_ARGUMENT"
    request = urllib.request.Request(root + "/api/overview", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 405  # read-only: nothing but GET, and the login


def test_the_operators_reads_are_actions(client: Client, books: str, tmp_path: Path) -> None:
    """What the Tasks and Requests pages show, as any Flight client reads it."""
    target = str(tmp_path)
    client.create_backup(target, name="twice")
    with pytest.raises(elanus.ElanusError, match="already exists"):
        client.create_backup(target, name="twice")
    tasks = _action(client, "list_backup_tasks")["tasks"]
    assert [(t["name"], t["state"]) for t in tasks[:2]] == [
        ("twice", "Failed"),
        ("twice", "Completed"),
    ]
    assert "already exists" in tasks[0]["reason"] and tasks[1]["files"] > 0
    books_id = client.describe_collection(books)["collection_id"]
    compactions = _action(client, "list_compactions", {"limit": 5})["compactions"]
    manual = [c for c in compactions if c["manual"]]
    assert manual and manual[0]["collection_id"] == books_id
    assert manual[0]["state"] in ("executing", "completed")
    listed = _action(client, "list_requests", {"limit": 3})
    assert listed["slow_request_s"] == 0.05 and len(listed["recent"]) == 3
    assert listed["recent"][0]["function"] == "list_compactions"  # newest first
    assert all(r["seconds"] >= 0.05 for r in listed["slow"])
    with pytest.raises(elanus.ElanusError, match="limit"):
        _action(client, "list_requests", {"limit": 0})


def _action(client: Client, name: str, body: dict[str, Any] | None = None) -> Any:
    return client._action(name, body or {})


def test_recent_and_slow_requests_are_kept_apart() -> None:
    previous = requestlog.slow_threshold()
    requestlog.set_slow_threshold(0.5)
    try:
        requestlog.record("fast_one", "ok", 0.1)
        requestlog.record("slow_one", "RATE_LIMITED", 0.7)
    finally:
        requestlog.set_slow_threshold(previous)
    assert [r["function"] for r in requestlog.recent()[:2]] == ["slow_one", "fast_one"]
    slow = requestlog.slow()[0]
    assert (slow["function"], slow["status"], slow["seconds"]) == ("slow_one", "RATE_LIMITED", 0.7)
    assert "fast_one" not in [r["function"] for r in requestlog.slow()]


def test_the_charts_turn_counters_into_rates() -> None:
    registry = CollectorRegistry()
    requests = Counter("elanus_proxy_req_count", "r", ["function", "status"], registry=registry)
    memory = Gauge("process_resident_memory_bytes", "m", registry=registry)
    samples = MetricSamples(registry)
    memory.set(1 << 20)
    samples.take()
    requests.labels("search", "ok").inc(30)
    requests.labels("search", "RATE_LIMITED").inc(10)
    memory.set(3 << 20)
    time.sleep(0.05)
    samples.take()
    charts = {c["key"]: c["points"] for c in samples.charts()["charts"]}
    assert set(charts) == {"requests", "errors", "rss"}  # only what this registry has
    (t0, _), (t1, _) = charts["rss"][:2]
    assert [v for _, v in charts["rss"][:2]] == [1.0, 3.0]  # MiB
    assert charts["requests"][0][1] == pytest.approx(40 / (t1 - t0))  # per second
    assert charts["errors"][0][1] == pytest.approx(10 / (t1 - t0))


# -- the pages in a browser ---------------------------------------------------------------
PAGES = [
    # (hash, a script that is true once the page shows its live data)
    (
        "#/",
        "return !!document.querySelector('tr[data-role=proxy]') && "
        "document.querySelector('[data-card=version] .value')?.textContent === arguments[0]",
    ),
    (
        "#/collections",
        "return document.querySelector('tr[data-collection=books] "
        "[data-field=rows]')?.textContent === arguments[1] && "
        "!!document.querySelector('tr[data-collection=drafts]')",
    ),
    (
        "#/collection/default/books",
        "return document.querySelector('[data-field=live_rows]')"
        "?.textContent === arguments[1] && !!document.querySelector('tr[data-segment]') && "
        "!!document.querySelector('tr[data-replica]') && "
        "!!document.querySelector('tr[data-index=vector] [data-progress]')",
    ),
    (
        "#/tasks",
        "return !!document.querySelector('tr[data-index=\"books/vector\"]') && "
        "!!document.querySelector('#compactions + table tr[data-compaction]') && "
        "!!document.querySelector('#imports + table [data-state=Completed]') && "
        "!!document.querySelector('tr[data-backup=nightly] [data-state=Completed]')",
    ),
    (
        "#/requests",
        "return !!document.querySelector('#recent + table tr[data-function=get_collection_stats]')",
    ),
    ("#/channels", "return !!document.querySelector('tr[data-channel^=dml_]')"),
    ("#/metrics", "return document.querySelectorAll('[data-chart] polyline').length >= 3"),
    (
        "#/config",
        "return document.querySelector('tr[data-key=webui_port] code')"
        "?.textContent === arguments[2]",
    ),
]


def test_each_page_shows_live_data_with_no_console_error(
    chrome: Browser, server: StandaloneProcess, client: Client, books: str
) -> None:
    url = console_url(server)
    chrome.get(url)
    chrome.run("console.error('the console log is read')")
    assert any("the console log is read" in e for e in chrome.errors())  # errors are seen
    flushed = f"{client.get_collection_stats(books)['row_count']:,}"
    expected = (elanus.__version__, flushed, url.split(":")[2].split("/")[0])
    for fragment, shows in PAGES:
        chrome.get(url + fragment)
        chrome.wait(shows, *expected, timeout=30, what=f"live data on {fragment}")
        assert chrome.errors() == [], fragment
        if SHOTS:
            name = fragment.strip("#/").split("/")[0] or "overview"
            chrome.screenshot(Path(SHOTS) / f"console-{name}.png")
    count = _count(client)
    chrome.get(url + "#/collection/default/books")  # the row count of a loaded collection
    chrome.wait(PAGES[2][1], *expected[:1], f"{count:,}", timeout=30)


def test_a_page_refreshes_without_a_reload(
    chrome: Browser, server: StandaloneProcess, client: Client, books: str
) -> None:
    url = console_url(server)
    chrome.get(url + "#/collection/default/books")
    before = _count(client)
    live = "return document.querySelector('[data-field=live_rows]')?.textContent === arguments[0]"
    chrome.wait(live, f"{before:,}", timeout=30, what="the row count")
    loaded_at, renders = chrome.run(
        "return [window.elanusConsole.loadedAt, window.elanusConsole.renders]"
    )
    client.insert(books, _rows(10_000, 250))
    chrome.wait(live, f"{before + 250:,}", timeout=30, what="the new row count on the page")
    now = chrome.run("return [window.elanusConsole.loadedAt, window.elanusConsole.renders]")
    assert now[0] == loaded_at and now[1] > renders  # redrawn in place, not reloaded
    assert chrome.errors() == []


# -- users and TLS ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A stack with authentication and TLS, its console started on its proxy (port 0: any
    free one), a user ``alice`` with the public role only."""
    tmp = tmp_path_factory.mktemp("secured")
    ca = CertAuthority(tmp / "ca")
    cert = ca.issue("server", server=True)
    with own_stack(
        tmp,
        "console-auth",
        auth_enabled=True,
        root_password=ROOT_PASSWORD,
        tls_cert=str(cert.cert),
        tls_key=str(cert.key),
    ) as stack:
        root = Client(stack.uri, token=f"root:{ROOT_PASSWORD}", tls_root_certs=str(ca.cert))
        root.create_collection("books", dimension=DIM)
        root.create_user("alice", "alice-pw")
        console = WebConsole(stack.proxy).start()
        try:
            context = ssl.create_default_context(cafile=str(ca.cert))
            yield {"stack": stack, "console": console, "url": console.url, "tls": context}
        finally:
            console.stop()
            root.close()


def _call(
    secured: dict[str, Any], path: str, body: Any = None, **headers: str
) -> tuple[int, dict[str, str], dict[str, Any]]:
    root = secured["url"].removesuffix("/webui/")
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers.setdefault("Content-Type", "application/json")
    request = urllib.request.Request(root + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30, context=secured["tls"]) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def test_a_login_runs_the_views_as_that_user(secured: dict[str, Any]) -> None:
    assert secured["url"].startswith("https://")
    status, _, me = _call(secured, "/api/me")
    assert status == 200 and me == {"auth_enabled": True, "authenticated": False}
    status, _, answer = _call(secured, "/api/overview")
    assert status == 401 and answer["error"]["code"] == "UNAUTHENTICATED"
    status, _, answer = _call(secured, "/api/login", {"user": "alice", "password": "nope"})
    assert status == 401 and answer["error"]["code"] == "UNAUTHENTICATED"
    form = {"Content-Type": "application/x-www-form-urlencoded"}  # what a cross-site form sends
    assert _call(secured, "/api/login", {"user": "alice", "password": "alice-pw"}, **form)[0] == 415

    status, headers, answer = _call(
        secured, "/api/login", {"user": "alice", "password": "alice-pw"}
    )
    assert status == 200 and answer == {"user": "alice"}
    cookie = headers["Set-Cookie"]
    for attribute in ("HttpOnly", "SameSite=Strict", "Secure", "Path=/"):
        assert attribute in cookie, cookie
    jar = {"Cookie": cookie.split(";")[0]}
    assert _call(secured, "/api/me", **jar)[2]["user"] == "alice"
    overview = _call(secured, "/api/overview", **jar)[2]
    assert overview["health"]["ok"]["status"] == "ok"  # any user may ask
    assert overview["sessions"]["error"]["code"] == "PERMISSION_DENIED"  # DescribeCluster
    listed = _call(secured, "/api/collections", **jar)[2]["collections"]["ok"]
    assert [c["name"] for c in listed] == ["books"]  # public: ShowCollections, IndexDetail
    assert "ok" in listed[0]["describe"] and "ok" in listed[0]["indexes"]
    assert listed[0]["load"]["error"]["code"] == "PERMISSION_DENIED"  # GetLoadState

    basic = {"Authorization": "Basic " + _b64(f"root:{ROOT_PASSWORD}")}  # as curl -u sends
    assert "ok" in _call(secured, "/api/overview", **basic)[2]["sessions"]
    shown = _call(secured, "/api/config", **basic)[2]["config"]["ok"]["settings"]
    assert shown["root_password"] == "***" and shown["auth_enabled"] is True
    assert _call(secured, "/api/config", **jar)[2]["config"]["error"]["code"] == "PERMISSION_DENIED"
    status, headers, _ = _call(secured, "/api/logout", {}, **jar)
    assert status == 200 and "Max-Age=0" in headers["Set-Cookie"]

    plain = secured["url"].replace("https://", "http://") + "../api/me"
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(plain, timeout=10)  # https only


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


def test_the_login_page_in_the_browser(chrome: Browser, secured: dict[str, Any]) -> None:
    chrome.get(secured["url"])
    chrome.wait("return !!document.querySelector('form.login')", what="the login form")
    if SHOTS:
        chrome.screenshot(Path(SHOTS) / "console-login.png")
    chrome.run(
        "document.querySelector('input[name=user]').value = 'alice';"
        "document.querySelector('input[name=password]').value = arguments[0];"
        "document.querySelector('form.login').requestSubmit();",
        "alice-pw",
    )
    chrome.wait(
        "return document.getElementById('view').dataset.page === 'overview' && "
        "!!document.querySelector('[data-error=PERMISSION_DENIED]') && "
        "!!document.querySelector('[data-user=alice]')",
        what="alice's overview, roles refused",
    )
    assert chrome.errors() == []
    chrome.run("document.querySelector('#who button').click()")
    chrome.wait("return !!document.querySelector('form.login')", what="the login form again")
    assert chrome.run("return document.cookie") == ""  # HttpOnly: no script reads the token
    assert chrome.errors() == []


def test_a_busy_console_port_is_a_clear_error(secured: dict[str, Any]) -> None:
    stack: Stack = secured["stack"]
    proxy = stack.proxy
    taken = secured["console"].port
    settings, proxy.settings = proxy.settings, proxy.settings.replace(webui_port=taken)
    try:
        with pytest.raises(elanus.ElanusError, match="webui_port") as err:
            WebConsole(proxy)
        assert err.value.code == elanus.ErrorCode.UNAVAILABLE
    finally:
        proxy.settings = settings
