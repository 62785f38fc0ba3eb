"""The querynode role: delegators (one per watched vchannel) and a worker, as in query
node v2 (seed 001). Both halves answer over the bus, whose transport calls them directly
when the caller is in this process; searches are blocking handlers, so an in-process
search runs on its caller's thread with no event-loop hop."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from elanus.channels import subjects
from elanus.channels.bus import Bus, Handler, blocking
from elanus.channels.role import Role
from elanus.errors import ElanusError, ErrorCode
from elanus.expr import Expr, parse
from elanus.index.kernels import stop_faiss_interrupt_checks
from elanus.requests import Body
from elanus.schema import Schema
from elanus.segments import snapshot_read
from elanus.segments.delegator import Delegator
from elanus.segments.worker import Worker
from elanus.settings import Settings

log = logging.getLogger(__name__)
CALL_TIMEOUT_S = 60.0


class QueryNode(Role):
    role_name = "querynode"

    def __init__(self, settings: Settings, bus: Bus, node_id: str | None = None) -> None:
        super().__init__(settings, bus, node_id)
        self.worker = Worker(on_index_failure=self._index_failed)
        self.delegators: dict[str, Delegator] = {}
        self.schemas: dict[int, Schema] = {}

    @property
    def address(self) -> str:
        return f"{subjects.PREFIX}.querynode.{self.node_id}"

    def handlers(self) -> dict[str, Handler]:
        return {
            "watch": self.watch,
            "unwatch": self.unwatch,
            "sync": self.sync,
            "release_collection": self.release_collection,
            "status": self.status,
            "search": self.search,
            "query": self.query,
            "count": self.count,
            "read.plan": self.read_plan,
            "read.segments": self.read_segments,
            "read.deletes": self.read_deletes,
            "worker.load": self.worker_load,
            "worker.release": self.worker_release,
            "worker.delete": self.worker_delete,
            "worker.load_index": self.worker_load_index,
            "worker.drop_index": self.worker_drop_index,
            "worker.search": self.worker_search,
            "worker.query": self.worker_query,
            "worker.count": self.worker_count,
        }

    async def start(self) -> None:
        stop_faiss_interrupt_checks()  # searches run on Flight threads beside the loop
        await self.open_data_bus()
        await self.serve()
        await self.register()

    async def stop(self) -> None:
        for d in list(self.delegators.values()):
            await d.stop()
        self.delegators.clear()
        await super().stop()

    async def call(self, node_id: str, method: str, body: dict[str, Any]) -> Any:
        """A request to a querynode (this one or another), by node id."""
        return await self.bus.request(
            subjects.node("querynode", node_id, method), body, CALL_TIMEOUT_S
        )

    # -- delegators -------------------------------------------------------------------------
    async def watch(self, raw: dict[str, Any]) -> dict[str, Any]:
        b = Body(raw, "querynode.watch")
        vchannel = b.str("vchannel")
        b.allow(
            [
                "pchannel",
                "collection_id",
                "schema",
                "checkpoint",
                "sealed",
                "partition_ids",
                "ready_ts",
            ]
        ).done()
        self.schemas[int(raw["collection_id"])] = Schema.from_dict(raw["schema"])
        old = self.delegators.pop(vchannel, None)
        if old is not None:
            await old.stop()
        delegator = Delegator(self, raw)
        await delegator.start()
        self.delegators[vchannel] = delegator
        await delegator.catch_up()  # a load answers once its data is readable at any level
        return {"vchannel": vchannel, "tsafe": delegator.tsafe}

    async def unwatch(self, raw: dict[str, Any]) -> dict[str, Any]:
        d = self.delegators.pop(Body(raw, "querynode.unwatch").str("vchannel"), None)
        if d is not None:
            await d.stop()
        return {}

    def _delegator(self, vchannel: str) -> Delegator:
        d = self.delegators.get(vchannel)
        if d is None:
            raise ElanusError(
                ErrorCode.COLLECTION_NOT_LOADED, f"this query node does not serve {vchannel}"
            )
        return d

    async def sync(self, raw: dict[str, Any]) -> dict[str, Any]:
        d = self._delegator(raw["vchannel"])
        remove = [int(s) for s in raw.get("remove", [])]
        await d.sync(raw.get("add", []), remove, raw.get("checkpoint"))
        return {}

    async def release_collection(self, raw: dict[str, Any]) -> dict[str, Any]:
        cid = int(raw["collection_id"])
        for v, d in list(self.delegators.items()):
            if d.collection_id == cid:
                await d.stop()
                del self.delegators[v]
        self.worker.release_collection(cid)
        return {}

    async def status(self, raw: dict[str, Any]) -> dict[str, Any]:
        return {
            "delegators": {
                v: {
                    "tsafe": d.tsafe,
                    "growing": {s: g.num_rows for s, g in d.growing.items()},
                    "sealed": {s: seg.node_id for s, seg in d.distribution.sealed.items()},
                }
                for v, d in self.delegators.items()
            },
            "segments": {s: seg.num_rows for s, seg in self.worker.segments.items()},
        }

    def _expr(self, collection_id: int, raw: dict[str, Any]) -> Expr | None:
        text = raw.get("filter")
        return parse(text, self.schemas[collection_id], raw.get("params")) if text else None

    @blocking
    def search(self, raw: dict[str, Any]) -> dict[str, Any]:
        """``{"vchannel", "request": SearchRequest}``: the delegator's search."""
        return self._delegator(raw["vchannel"]).search(raw["request"])

    async def query(self, raw: dict[str, Any]) -> dict[str, Any]:
        d = self._delegator(raw["vchannel"])
        return await d.query(raw, self._expr(d.collection_id, raw))

    async def count(self, raw: dict[str, Any]) -> dict[str, Any]:
        d = self._delegator(raw["vchannel"])
        return await d.count(raw, self._expr(d.collection_id, raw))

    async def read_plan(self, raw: dict[str, Any]) -> dict[str, Any]:
        return await snapshot_read.plan(self._delegator(raw["vchannel"]), raw)

    async def read_segments(self, raw: dict[str, Any]) -> dict[str, Any]:
        d = self._delegator(raw["vchannel"])
        return await snapshot_read.read_segments(d, raw, self._expr(d.collection_id, raw))

    async def read_deletes(self, raw: dict[str, Any]) -> dict[str, Any]:
        return await snapshot_read.deletes(self._delegator(raw["vchannel"]), raw)

    # -- worker -----------------------------------------------------------------------------
    async def worker_load(self, raw: dict[str, Any]) -> dict[str, Any]:
        cid = int(raw["collection_id"])
        schema = self.schemas.setdefault(cid, Schema.from_dict(raw["schema"]))
        loaded = await self.worker.load(cid, schema, raw["segments"])
        return {"loaded": loaded, "rows": self.worker.rows(loaded)}

    async def worker_release(self, raw: dict[str, Any]) -> dict[str, Any]:
        self.worker.release([int(s) for s in raw["segment_ids"]])
        return {}

    async def worker_delete(self, raw: dict[str, Any]) -> dict[str, Any]:
        """``{"segment_ids", "pks": pa.Array, "ts": one int or a uint64 array per key}``."""
        ts = raw["ts"] if isinstance(raw["ts"], np.ndarray) else int(raw["ts"])
        return {"rows": self.worker.delete(raw["segment_ids"], raw["pks"], ts)}

    async def worker_load_index(self, raw: dict[str, Any]) -> dict[str, Any]:
        sid = int(raw["segment_id"])
        return {"loaded": await self.worker.load_index(sid, raw)}

    def _index_failed(self, segment_id: int, index: dict[str, Any]) -> None:
        """Tell the coord (in the background: the load answers meanwhile) that a finished
        index did not load here; it checks the files and has them built again."""
        if "build_id" not in index or "version" not in index:
            return
        body = {
            "build_id": int(index["build_id"]),
            "version": int(index["version"]),
            "segment_id": segment_id,
            "node_id": self.node_id,
        }
        self.supervisor.spawn(
            f"report index {body['build_id']} not loaded",
            lambda: self.bus.request(subjects.coord("index.load_failed"), body, CALL_TIMEOUT_S),
        )

    async def worker_drop_index(self, raw: dict[str, Any]) -> dict[str, Any]:
        self.worker.drop_index(int(raw["collection_id"]), str(raw["field"]))
        return {}

    def _collection_of(self, segment_ids: list[int]) -> int:
        for s in segment_ids:
            if s in self.worker.collection_of:
                return self.worker.collection_of[s]
        raise ElanusError(ErrorCode.SEGMENT_NOT_FOUND, f"segments {segment_ids} are not loaded")

    @blocking
    def worker_search(self, raw: dict[str, Any]) -> dict[str, Any]:
        """``{"segment_ids", "request": SearchRequest}``: hits of each named segment."""
        ids = [int(s) for s in raw["segment_ids"]]
        return {"parts": self.worker.search(ids, raw["request"])}

    async def worker_query(self, raw: dict[str, Any]) -> dict[str, Any]:
        ids = [int(s) for s in raw["segment_ids"]]
        expr = self._expr(self._collection_of(ids), raw)
        rows = self.worker.query(
            ids, int(raw["ts"]), expr, list(raw["output_fields"]), raw.get("limit")
        )
        return {"rows": rows}

    async def worker_count(self, raw: dict[str, Any]) -> dict[str, Any]:
        ids = [int(s) for s in raw["segment_ids"]]
        expr = self._expr(self._collection_of(ids), raw)
        return {"count": self.worker.count(ids, int(raw["ts"]), expr)}
