"""The SDK's cluster calls (mixed into ``Client``): sessions, health, timestamps, actions,
backups."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from elanus.client.base import ClientBase
from elanus.client.compat import reject_unknown
from elanus.client.replies import ServerVersion
from elanus.ops import control
from elanus.ops.replies import BackupCreated, Health, Session, Sessions
from elanus.wire.codec import from_flight_error


class AdminAPI(ClientBase):
    def list_sessions(self) -> list[Session]:
        return list(self._reply(control.ListSessions(), Sessions)["sessions"])

    def health(self) -> Health:
        return self._reply(control.Health(), Health)

    def get_server_version(
        self, timeout: float | None = None, detail: bool = False, **kwargs: Any
    ) -> str | ServerVersion:
        """The proxy's Elanus version (pymilvus's ``get_server_version``); with ``detail``,
        ``{"version", "deploy_mode"}``."""
        reject_unknown("get_server_version", kwargs)
        proxy = self._reply(control.Health(), Health, timeout=timeout).get("proxy")
        version = str(proxy.get("version") or "unknown") if proxy else "unknown"
        return ServerVersion(version=version, deploy_mode="elanus") if detail else version

    def get_timestamp(self) -> int:
        """A fresh hybrid timestamp from the TSO (``physical_ms << 18 | logical``)."""
        return int(self._op(control.GetTimestamp())["ts"])

    def create_backup(
        self, target: str, name: str | None = None, timeout_s: float = 3600.0
    ) -> BackupCreated:
        """Back up every collection at one timestamp to ``target`` (an absolute path on the
        coord's machine, or ``s3://bucket/prefix``); waits for the copy. The reply names
        the backup's ``location`` and its timestamp ``ts`` (docs/deploy.md, Backup)."""
        op = control.CreateBackup(target=target, name=name, timeout_s=timeout_s)
        return self._reply(op, BackupCreated, timeout=timeout_s + 60.0)

    def list_actions(self) -> dict[str, str]:
        """Action name -> description, as the proxy lists them (Flight ListActions)."""
        try:
            actions = self._conn().list_actions(self._options(None))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise from_flight_error(exc) from None
        return {a.type: a.description for a in actions}
