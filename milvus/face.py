"""The proxy with both faces: Arrow Flight (``flight/proxy.py``) and Milvus's gRPC
``MilvusService`` on ``milvus_port`` (0: off; ``server.py``), started after Flight and
stopped before it, with the same TLS files and the same users."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from elanus.flight.proxy import ProxyServer

if TYPE_CHECKING:
    from elanus.milvus.server import MilvusFace

log = logging.getLogger(__name__)


class MilvusProxy(ProxyServer):
    """The proxy role as hosts run it: Flight, plus Milvus's protocol unless
    ``milvus_port`` is 0."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.milvus: MilvusFace | None = None

    @property
    def milvus_port(self) -> int | None:
        return self.milvus.port if self.milvus is not None else None

    def session_meta(self) -> dict[str, object]:
        return {**super().session_meta(), "milvus_port": self.milvus_port}

    async def start(self) -> None:
        await super().start()
        if not self.settings.milvus_port:
            return
        try:
            face = await asyncio.to_thread(_serve_milvus, self)
        except BaseException:
            await self.stop()
            raise
        self.milvus = face
        await self.meta_changed()  # registered before the face bound its port
        log.info("proxy %s serving Milvus's protocol on port %s", self.node_id, face.port)

    async def stop(self) -> None:
        face, self.milvus = self.milvus, None
        if face is not None:
            await asyncio.to_thread(face.stop)
        await super().stop()


def _serve_milvus(proxy: ProxyServer) -> MilvusFace:
    """A started Milvus face, built off the loop: its import (pymilvus) takes a third of a
    second, which Flight, already serving, should not wait for."""
    from elanus.milvus.server import MilvusFace

    face = MilvusFace(proxy)
    face.start()
    return face
