"""A real headless Chromium for the console's tests, driven through ChromeDriver's WebDriver
protocol (JSON over HTTP, so the standard library is the whole client).

Chromium and ChromeDriver come from Debian's packages (``chromium``, ``chromium-driver``;
``.ci/run`` installs them where missing). ``find`` locates them; ``require`` skips a test
module where they are absent, except in CI (``CI=true``), where their absence fails it.
The browser starts as the machine allows it (root needs ``--no-sandbox``; no GPU; no
background connections, which a closed network refuses) with an empty profile of its own.
Its console is read through ChromeDriver's log of the browser (``goog:loggingPrefs``):
``console.error``, uncaught exceptions, failed loads and policy violations are ``SEVERE``.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from elanus.channels.nats_server import free_port

CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--window-size=1200,800",
)
START_S = 30.0


def find() -> tuple[str, str] | None:
    """The Chromium and ChromeDriver binaries, or None where either is missing."""
    chromium = next(
        (p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))),
        None,
    )
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def require() -> tuple[str, str]:
    """The binaries; skips the caller where they are missing, unless in CI (then fails)."""
    found = find()
    if found is not None:
        return found
    message = (
        "Chromium and ChromeDriver are not installed (apt-get install chromium chromium-driver)"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}: in CI the console's browser tests must run")
    pytest.skip(message)


class Browser:
    """One headless Chromium session until ``close``."""

    def __init__(self, chromium: str, driver: str, profile: Path, log: Path) -> None:
        self.port = free_port()
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [driver, f"--port={self.port}"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        self.session = ""
        try:
            self._wait_ready()
            options = {"binary": chromium, "args": [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]}
            caps = {
                "browserName": "chrome",
                "acceptInsecureCerts": True,
                "goog:chromeOptions": options,
                "goog:loggingPrefs": {"browser": "ALL"},
            }
            answer = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})
            self.session = answer["sessionId"]
        except BaseException:
            self.close()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_S
        while True:
            try:
                if self._call("GET", "/status").get("ready"):
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("chromedriver did not start")
            time.sleep(0.05)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read()).get("value")
        except urllib.error.HTTPError as exc:
            detail = json.loads(exc.read() or b"{}").get("value") or {}
            raise AssertionError(f"WebDriver {method} {path}: {detail.get('message')}") from None

    def _session(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    # -- what tests do ---------------------------------------------------------------------
    def get(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    def run(self, script: str, *args: Any) -> Any:
        """The value of ``script`` (a function body: ``return ...``) run in the page."""
        return self._session("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait(self, script: str, *args: Any, timeout: float = 20.0, what: str = "") -> Any:
        """Poll ``script`` until it returns something true (returned), or fail."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.run(script, *args)
            if value:
                return value
            if time.monotonic() > deadline:
                shown = self.run("return document.body ? document.body.innerText : ''")
                raise AssertionError(f"timed out waiting for {what or script}; the page:\n{shown}")
            time.sleep(0.1)

    def text(self, selector: str) -> str | None:
        """The text of the first element matching ``selector`` (None: no such element)."""
        return self.run(  # type: ignore[no-any-return]
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            selector,
        )

    def console(self) -> list[dict[str, Any]]:
        """The browser's console messages since the last call."""
        return list(self._session("POST", "/se/log", {"type": "browser"}) or [])

    def errors(self) -> list[str]:
        """The console's errors (``SEVERE``) since the last call to ``console``/``errors``."""
        return [e["message"] for e in self.console() if e.get("level") == "SEVERE"]

    def screenshot(self, path: Path, max_height: int = 1000) -> None:
        """The page as a PNG, down to ``max_height`` pixels (the DevTools protocol's
        ``Page.captureScreenshot``, beyond the window)."""
        width, height = self.run(
            "const e = document.documentElement; return [e.clientWidth, e.scrollHeight];"
        )
        clip = {"x": 0, "y": 0, "width": width, "height": min(height, max_height), "scale": 1}
        params = {"format": "png", "captureBeyondViewport": True, "clip": clip}
        shot = self._session(
            "POST", "/goog/cdp/execute", {"cmd": "Page.captureScreenshot", "params": params}
        )
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        if self.session:
            try:
                self._session("DELETE", "")
            except (AssertionError, OSError):
                pass
            self.session = ""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
