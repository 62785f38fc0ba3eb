"""The proxy as hosts run it: Arrow Flight, Milvus's protocol (``milvus/face.py``) and,
when ``webui_port`` is set, the operator's web console (``server.py``), started last and
stopped first, with the same TLS files and the same users."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from elanus.milvus.face import MilvusProxy

if TYPE_CHECKING:
    from elanus.flight.proxy import ProxyServer
    from elanus.webui.server import WebConsole

log = logging.getLogger(__name__)


class ConsoleProxy(MilvusProxy):
    """The proxy role with every face; the console only when ``webui_port`` is not 0."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.console: WebConsole | None = None

    @property
    def webui_url(self) -> str | None:
        return self.console.url if self.console is not None else None

    def session_meta(self) -> dict[str, object]:
        port = self.console.port if self.console is not None else None
        return {**super().session_meta(), "webui_port": port}

    async def start(self) -> None:
        await super().start()
        if not self.settings.webui_port:
            return
        try:
            console = await asyncio.to_thread(_serve_console, self)
        except BaseException:
            await self.stop()
            raise
        self.console = console
        await self.meta_changed()
        log.info("proxy %s serving the web console on %s", self.node_id, console.url)

    async def stop(self) -> None:
        console, self.console = self.console, None
        if console is not None:
            await asyncio.to_thread(console.stop)
        await super().stop()


def _serve_console(proxy: ProxyServer) -> WebConsole:
    """A started console, built off the loop (it reads its files and binds its port)."""
    from elanus.webui.server import WebConsole

    return WebConsole(proxy).start()
