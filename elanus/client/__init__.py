"""The Elanus client SDK: ``Client`` (pymilvus's ``MilvusClient`` names over Arrow Flight).

Importable without the proxy or any role: it needs only pyarrow and the shared types of
``elanus/``. ``wire``, ``tls`` and ``putresult`` are the Flight protocol's codec, which the
proxy (``elanus.flight``) uses too: ``Client`` is imported on first use, so the proxy, which
imports only the codec, does not load the whole SDK (~30 ms of its start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from elanus.client.client import Client

__all__ = ["Client"]


def __getattr__(name: str) -> Any:
    if name == "Client":
        from elanus.client.client import Client

        return Client
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
