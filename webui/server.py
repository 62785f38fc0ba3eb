"""The console's HTTP server: the pages from ``static/`` under ``/webui/``, the JSON views
under ``/api/``, behind the proxy's users and TLS.

The standard library's threading HTTP server, one thread per connection: a page asks a
view every few seconds, each a handful of in-process actions, so nothing here is hot. With
``tls_cert`` the server speaks https only (with ``tls_client_ca``, browsers must show a
certificate it signed, as Flight clients must); the TLS handshake runs on the
connection's own thread, so a slow client holds up nobody.

Who is calling: with ``auth_enabled`` the login page posts a user and password to
``/api/login``, which answers the proxy's own bearer token in an HttpOnly, SameSite=Strict
cookie; ``curl`` may send ``Authorization: Basic`` or ``Bearer`` instead. Every view runs
as that user (``views.Reader``). POSTs must be JSON, which a cross-site form cannot send.
With authentication off the console is open, as the proxy is (only on loopback unless
``--insecure``: ``elanus standalone`` checks the host both share).
"""

from __future__ import annotations

import contextlib
import http.cookies
import logging
import mimetypes
import socket
import ssl
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from elanus.errors import ElanusError, ErrorCode
from elanus.flight.auth import ANONYMOUS, Caller
from elanus.webui import views
from elanus.webui.samples import MetricSamples

if TYPE_CHECKING:
    from elanus.flight.proxy import ProxyServer

log = logging.getLogger(__name__)

PAGES = "/webui/"
COOKIE = "elanus_console"
MAX_BODY = 16 * 1024
"""The largest POST body (a login)."""
IDLE_S = 60.0
"""A kept-alive connection with no request for this long is closed."""
HANDSHAKE_S = 10.0
STATUS: dict[str, HTTPStatus] = {
    ErrorCode.INVALID_ARGUMENT: HTTPStatus.BAD_REQUEST,
    ErrorCode.UNAUTHENTICATED: HTTPStatus.UNAUTHORIZED,
    ErrorCode.PERMISSION_DENIED: HTTPStatus.FORBIDDEN,
    ErrorCode.UNAVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
    ErrorCode.TIMEOUT: HTTPStatus.GATEWAY_TIMEOUT,
}
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""On every answer: the pages run their own script and style only, fetch only from here,
and are never framed or cached."""


def _assets() -> dict[str, tuple[bytes, str]]:
    """Every file of ``static/`` by name, with its content type, read once."""
    out = {}
    for entry in (resources.files("elanus.webui") / "static").iterdir():
        if entry.is_file():
            kind = mimetypes.guess_type(entry.name)[0] or "application/octet-stream"
            if kind.startswith("text/") or kind.endswith(("javascript", "json", "svg+xml")):
                kind += "; charset=utf-8"
            out[entry.name] = (entry.read_bytes(), kind)
    return out


class WebConsole:
    """The console of one proxy, on ``webui_port`` of ``flight_host``, until ``stop``."""

    def __init__(self, proxy: ProxyServer) -> None:
        self.proxy = proxy
        s = proxy.settings
        self.assets = _assets()
        self.tls = _tls_context(s.tls_cert, s.tls_key, s.tls_client_ca) if s.tls_cert else None
        self.samples = MetricSamples()
        self.host = s.flight_host
        try:
            self._httpd = _HttpServer((s.flight_host, s.webui_port), self)
        except OSError as exc:
            raise ElanusError(
                ErrorCode.UNAVAILABLE,
                f"cannot serve the web console on {s.flight_host}:{s.webui_port} "
                f"(setting webui_port): {exc.strerror or exc}",
            ) from None
        self.port = int(self._httpd.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"{self.proxy.settings.webui_scheme}://{host}:{self.port}{PAGES}"

    def start(self) -> WebConsole:
        self.samples.start()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, daemon=True, name=f"console-{self.port}"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._httpd.shutdown()
            thread.join(timeout=10)
        self._httpd.server_close()
        self.samples.stop()

    # -- one request ------------------------------------------------------------------------
    def handle(self, h: _Handler, method: str) -> None:
        url = urlsplit(h.path)
        path, params = url.path, dict(parse_qsl(url.query))
        if path == "/" or path == PAGES.rstrip("/"):
            h.answer(HTTPStatus.FOUND, b"", {"Location": PAGES})
        elif path.startswith(PAGES) and method == "GET":
            self._asset(h, path.removeprefix(PAGES) or "index.html")
        elif path == "/favicon.ico" and method == "GET":
            self._asset(h, "favicon.svg")
        elif path.startswith("/api/"):
            self._api(h, method, path.removeprefix("/api/"), params)
        else:
            h.error(HTTPStatus.NOT_FOUND, ErrorCode.INVALID_ARGUMENT, f"no page at {path}")

    def _asset(self, h: _Handler, name: str) -> None:
        asset = self.assets.get(name)
        if asset is None:
            h.error(HTTPStatus.NOT_FOUND, ErrorCode.INVALID_ARGUMENT, f"no file {name!r}")
            return
        body, kind = asset
        h.answer(HTTPStatus.OK, body, {"Content-Type": kind})

    def _api(self, h: _Handler, method: str, name: str, params: dict[str, str]) -> None:
        try:
            if method == "POST" and name in ("login", "logout"):
                self._login(h) if name == "login" else self._logout(h)
                return
            if method != "GET":
                raise _Refused(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} /api/{name}: use GET")
            if name == "me":
                self._me(h)
                return
            caller = self._caller(h)
            view = views.VIEWS.get(name)
            if view is None and name != "metrics":
                raise _Refused(HTTPStatus.NOT_FOUND, f"no view /api/{name}")
            if caller is None:
                raise ElanusError(ErrorCode.UNAUTHENTICATED, "log in first (POST /api/login)")
            if view is None:
                h.json(self.samples.charts())
            else:
                h.json(view(views.Reader(self.proxy, caller), params))
        except _Refused as exc:
            h.error(exc.status, ErrorCode.INVALID_ARGUMENT, exc.message)
        except ElanusError as exc:
            status = STATUS.get(exc.code, HTTPStatus.INTERNAL_SERVER_ERROR)
            h.error(status, exc.code, exc.message)
        except Exception as exc:  # noqa: BLE001 - one line to the page, the rest to the log
            log.exception("console /api/%s failed", name)
            h.error(HTTPStatus.INTERNAL_SERVER_ERROR, ErrorCode.INTERNAL, type(exc).__name__)

    def _me(self, h: _Handler) -> None:
        """Who the page's user is; not logged in (or a lapsed token) is an answer too, so
        the page shows its login form without a failed request."""
        try:
            caller = self._caller(h)
        except ElanusError as exc:
            if exc.code != ErrorCode.UNAUTHENTICATED:
                raise
            caller = None
        if caller is None:
            logged_out = {"auth_enabled": True, "authenticated": False}
            h.json(logged_out, cookie=self._cookie("", 0) if h.cookie(COOKIE) else None)
            return
        h.json(views.me(views.Reader(self.proxy, caller)))

    def _caller(self, h: _Handler) -> Caller | None:
        """The user a request comes from; None when it carries no credential at all."""
        if not self.proxy.settings.auth_enabled:
            return ANONYMOUS
        auth = self.proxy.auth
        if auth is None:
            raise ElanusError(ErrorCode.UNAVAILABLE, "the proxy is starting")
        header = h.headers.get("Authorization")
        if header:
            return auth.authenticate({"authorization": [header]})[0]
        token = h.cookie(COOKIE)
        return auth.check_token(token) if token else None

    def _login(self, h: _Handler) -> None:
        doc = h.json_body()
        user, password = doc.get("user"), doc.get("password")
        if not isinstance(user, str) or not isinstance(password, str) or not user:
            raise _Refused(HTTPStatus.BAD_REQUEST, "send {'user': ..., 'password': ...}")
        auth = self.proxy.auth
        if not self.proxy.settings.auth_enabled or auth is None:
            raise _Refused(HTTPStatus.BAD_REQUEST, "authentication is off: the console is open")
        caller = auth.check_password(user, password)
        token = auth.issue(caller)
        ttl = int(self.proxy.settings.token_ttl_s)
        h.json({"user": caller.user}, cookie=self._cookie(token, ttl))

    def _logout(self, h: _Handler) -> None:
        h.json_body()
        h.json({"user": None}, cookie=self._cookie("", 0))

    def _cookie(self, token: str, max_age: int) -> str:
        secure = "; Secure" if self.tls is not None else ""
        return f"{COOKIE}={token}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Strict{secure}"


class _Refused(Exception):  # noqa: N818 - a refusal, answered with its status
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _tls_context(cert: str, key: str | None, client_ca: str | None) -> ssl.SSLContext:
    """The proxy's certificate (and its clients' CA) for https."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
        if client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(client_ca)
    except (OSError, ssl.SSLError) as exc:
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT, f"the web console cannot use tls_cert {cert}: {exc}"
        ) from None
    return context


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], console: WebConsole) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.console = console
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """On the connection's thread: the TLS handshake first, when the console has TLS."""
        tls = self.console.tls
        if tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_S)
        try:
            wrapped = tls.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as exc:  # a plain-http client, a refused certificate
            log.debug("console TLS handshake with %s failed: %s", client_address, exc)
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            self.shutdown_request(wrapped)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("console connection from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer
    protocol_version = "HTTP/1.1"
    server_version = "elanus-console"
    sys_version = ""
    timeout = IDLE_S

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.server.console.handle(self, "GET")

    def do_POST(self) -> None:  # noqa: N802
        self.server.console.handle(self, "POST")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - its signature
        log.debug("console %s: " + format, self.address_string(), *args)

    def cookie(self, name: str) -> str | None:
        jar = http.cookies.SimpleCookie()
        with contextlib.suppress(http.cookies.CookieError):
            jar.load(self.headers.get("Cookie") or "")
        morsel = jar.get(name)
        return morsel.value if morsel is not None and morsel.value else None

    def json_body(self) -> dict[str, Any]:
        """A POST's JSON object; refused unless sent as JSON (no cross-site form can)."""
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            size = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            size = -1
        if kind != "application/json":
            raise _Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send the body as application/json")
        if not 0 <= size <= MAX_BODY:
            raise _Refused(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a body is {MAX_BODY} bytes at most"
            )
        try:
            doc = orjson.loads(self.rfile.read(size) or b"{}")
        except orjson.JSONDecodeError:
            raise _Refused(HTTPStatus.BAD_REQUEST, "the body is not JSON") from None
        if not isinstance(doc, dict):
            raise _Refused(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        return doc

    def json(self, doc: Any, status: HTTPStatus = HTTPStatus.OK, cookie: str | None = None) -> None:
        headers = {"Content-Type": "application/json"}
        if cookie is not None:
            headers["Set-Cookie"] = cookie
        self.answer(status, orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS), headers)

    def error(self, status: HTTPStatus, code: str, message: str) -> None:
        """An error answer; the connection closes after it (a refused POST's body may be
        unread)."""
        self.close_connection = True
        self.json({"error": {"code": str(code), "message": message}}, status)

    def answer(self, status: HTTPStatus, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in {**HEADERS, **headers}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
