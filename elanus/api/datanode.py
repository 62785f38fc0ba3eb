"""The datanode's API: the coord gives it vchannels to write (``watch``/``unwatch``) and
bulk import jobs to run or finish (``import.run``/``import.finalize``)."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from elanus.api.base import Ack, Stub, record, reply
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.requests import request

WATCH_TIMEOUT_S = 15.0
UNWATCH_TIMEOUT_S = 10.0
IMPORT_TIMEOUT_S = 15.0


@record
class Checkpoint:
    """A vchannel's position a consumer starts from: the stream ``seq`` and its tick ``ts``
    (everything before is in flushed segments)."""

    seq: int
    ts: int


@record
class ChannelStart:
    """What a watch of a vchannel starts from, on a datanode (its writer) or a query node
    (its delegator): the channel, its collection's schema, the checkpoint to consume from."""

    vchannel: str
    pchannel: str
    collection_id: int
    schema: dict[str, Any]
    checkpoint: Checkpoint | None = None


@request("datanode.watch")
class WatchChannel(ChannelStart):
    segments: list[dict[str, Any]] = field(default_factory=list)
    """The channel's segments as the coord records them (``SegmentInfo.to_dict``)."""


@request("datanode.unwatch")
class UnwatchChannel:
    vchannel: str


@reply
class Watching:
    vchannel: str


@request("datanode.import.run")
class RunImport:
    job_id: int
    collection_id: int
    schema: dict[str, Any]
    vchannels: list[str]
    units: list[dict[str, Any]]
    """The job's checked units: ``{"format", "paths", "partition_id"?}`` each."""
    options: dict[str, Any] = field(default_factory=dict)
    max_rows: int
    staged: bool = False
    partitions: list[dict[str, Any]] = field(default_factory=list)
    """The collection's partitions (name, partition_id): a partition key routes rows by them."""


@record
class ImportedSegment:
    segment_id: int
    path: str


@request("datanode.import.finalize")
class FinalizeImport:
    """A committed job whose executor went away: stamp ``_ts`` at ``ts``, report it."""

    job_id: int
    ts: int
    segments: list[ImportedSegment]


@reply
class ImportTaken:
    """The job runs (or finishes) in the background; the coord follows its reports."""

    job_id: int


class DataNodeAPI(Stub):
    def __init__(self, bus: Bus, node_id: str) -> None:
        super().__init__(bus, subjects.node_prefix("datanode", node_id))

    async def watch(self, req: WatchChannel) -> Watching:
        return await self._ask("watch", req, Watching, WATCH_TIMEOUT_S)

    async def unwatch(self, req: UnwatchChannel) -> Ack:
        return await self._ask("unwatch", req, Ack, UNWATCH_TIMEOUT_S)

    async def run_import(self, req: RunImport) -> ImportTaken:
        return await self._ask("import.run", req, ImportTaken, IMPORT_TIMEOUT_S)

    async def finalize_import(self, req: FinalizeImport) -> ImportTaken:
        return await self._ask("import.finalize", req, ImportTaken, IMPORT_TIMEOUT_S)
