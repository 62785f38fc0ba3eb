"""Settings for roles a test starts by hand on an ``EmbeddedNats`` (not through ``Stack``):
the server's URL and credentials are what every such role needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elanus.channels.nats_server import EmbeddedNats
from elanus.settings import Settings


def settings_on(nats: EmbeddedNats, data_dir: Path, **overrides: Any) -> Settings:
    """Settings for a role on ``nats`` that keeps its data under ``data_dir``."""
    creds = nats.credentials
    return Settings(
        data_dir=str(data_dir),
        nats_url=nats.url,
        nats_user=creds.user,
        nats_password=creds.password,
        **overrides,
    )
