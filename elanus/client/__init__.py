"""The Elanus client SDK: ``Client`` (pymilvus's ``MilvusClient`` names over Arrow Flight).

Importable without the proxy or any role: it needs only pyarrow and the shared types of
``elanus/``. ``wire``, ``tls`` and ``putresult`` are the Flight protocol's codec, which the
proxy (``elanus.flight``) uses too.
"""

from __future__ import annotations

from elanus.client.client import Client

__all__ = ["Client"]
