"""The indexnode role (seed 002's IndexNode): takes build tasks pushed by the coord, runs
them one at a time off the event loop and reports each result. A report the coord
rejects (the task was dropped, or re-issued to another builder meanwhile) leaves files no
record points to, so the node removes them itself."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from elanus import objstore
from elanus.api.indexcoord import IndexCoordAPI, IndexReport
from elanus.api.indexnode import BuildIndex, BuildQueued
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.channels.runtime.loop import cancel_and_wait
from elanus.channels.runtime.role import Role, RoleHandler
from elanus.errors import ElanusError
from elanus.index.buildtask import run_build_task
from elanus.requests import decode
from elanus.settings import Settings

log = logging.getLogger(__name__)
REPORT_TIMEOUT_S = 30.0
REPORT_ATTEMPTS = 8


class IndexNode(Role):
    role_name = "indexnode"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        super().__init__(settings, bus, node_id)
        self.queue: asyncio.Queue[BuildIndex] = asyncio.Queue()
        self.current: BuildIndex | None = None
        self.built = 0
        self._runner: asyncio.Task[None] | None = None
        self.coord = IndexCoordAPI(bus, REPORT_TIMEOUT_S)

    @property
    def address(self) -> str:
        return f"{subjects.PREFIX}.indexnode.{self.node_id}"

    def handlers(self) -> dict[str, RoleHandler]:
        return {"build": self.build, "status": self.status}

    async def start(self) -> None:
        self._runner = self.supervisor.spawn("index builds", self._run, restart=True)
        await self.serve()
        await self.register()

    async def stop(self) -> None:
        await super().stop()
        await cancel_and_wait(self._runner)

    async def build(self, req: BuildIndex) -> BuildQueued:
        self.queue.put_nowait(req)
        return BuildQueued(accepted=True, queued=self.queue.qsize())

    async def status(self, raw: dict[str, Any]) -> dict[str, Any]:
        current = self.current
        return {
            "node_id": self.node_id,
            "queued": self.queue.qsize(),
            "building": current.build_id if current else None,
            "built": self.built,
        }

    async def _run(self) -> None:
        while True:
            task = await self.queue.get()
            self.current = task
            try:
                report = await asyncio.to_thread(
                    run_build_task,
                    task.build_id,
                    task.version,
                    task.field,
                    task.spec,
                    task.data_path,
                    task.out_dir,
                    self.settings.index_build_delay_s,
                )
                self.built += 1
                await self._report(task, report)
            except Exception:  # noqa: BLE001 - one bad task must not stop the node
                log.exception("index task %s", task.build_id)
            finally:
                self.current = None

    async def _report(self, task: BuildIndex, report: dict[str, Any]) -> None:
        body = decode(IndexReport, {**report, "node_id": self.node_id})
        for attempt in range(REPORT_ATTEMPTS):
            try:
                verdict = await self.coord.report(body)
                break
            except ElanusError as exc:  # the coord may be restarting
                log.warning("reporting task %s failed (%s), retrying", task.build_id, exc)
                await asyncio.sleep(min(5.0, 0.5 * 2**attempt))
        else:
            return  # the coord issues the task again once it sees it unfinished
        if not verdict.accepted:
            log.info("task %s not accepted (%s): removing its files", task.build_id, verdict)
            await asyncio.to_thread(objstore.remove_tree, task.out_dir)  # local or S3
