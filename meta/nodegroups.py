"""Node groups: query nodes the coord places on as if they were one node.

A standalone with ``serving_processes`` > 1 runs a query node in each of its serving
processes (docs/process-model.md). They form one group, named by the setting
``node_group``. To placement, balance and repair the group is a single node: a replica
placed on it lists the group's name as its node, delegators and segments included. Every
call the coord makes to the group goes to each member (``fanned``), so each member holds
the whole share and a read is answered in the process that received it: each member also
answers to the group's name from its own process (``QueryNode.start``), which is how the
proxy and the delegators of that process reach it without knowing its id.

A member that starts asks to join (``query.join_group``): the coord copies onto it
what is placed on the group, then counts it in. A member a fanned call found gone is
forgotten; should it still have a session at the next ``keep_loaded`` (it was only slow to
answer), what it holds is dropped and copied again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from elanus.api.base import Stub
from elanus.api.querynode import (
    NODE_TIMEOUT_S,
    DelegateChannel,
    LoadSegments,
    QueryNodeAPI,
    ReleaseOnNode,
    SegmentSpec,
    WorkerAPI,
)
from elanus.channels.bus import Bus
from elanus.channels.runtime.sessions import SessionInfo
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.interfaces import CollectionLookup, SegmentTable

if TYPE_CHECKING:
    from elanus.meta.replicas import Loaded, Replica

log = logging.getLogger(__name__)
R = TypeVar("R")


class NodeGroups:
    """Which live query nodes belong to which group, and which members hold the group's
    share (``joined``)."""

    def __init__(self) -> None:
        self.joined: dict[str, set[str]] = {}
        """group -> members that hold everything placed on it."""

    @staticmethod
    def group_of(info: SessionInfo) -> str:
        return str(info.meta.get("group") or "")

    def logical(self, live: set[str], sessions: list[SessionInfo]) -> set[str]:
        """The nodes placement sees: each ungrouped live node, and each group with a
        joined live member."""
        grouped = {s.node_id: g for s in sessions if (g := self.group_of(s))}
        out = {n for n in live if n not in grouped}
        for group, members in self.joined.items():
            if members & live:
                out.add(group)
        return out

    def members(self, group: str) -> list[str]:
        return sorted(self.joined.get(group, ()))

    def is_group(self, node: str) -> bool:
        return node in self.joined

    def strays(self, live: set[str], sessions: list[SessionInfo]) -> list[tuple[str, str]]:
        """(member, group) of live grouped nodes not counted as members (a coord that
        started after them, or a member a fanned call found gone that still has a
        session)."""
        return sorted(
            (s.node_id, g)
            for s in sessions
            if (g := self.group_of(s))
            and s.node_id in live
            and s.node_id not in self.joined.get(g, ())
        )

    def join(self, group: str, member: str) -> None:
        self.joined.setdefault(group, set()).add(member)

    def forget(self, member: str) -> None:
        for members in self.joined.values():
            members.discard(member)


class _Fanned(Stub):
    """A stub whose every call goes to each member of a group, and answers with the first
    member's reply. A member that is gone (UNAVAILABLE: nobody serves its subjects) is
    left out and forgotten; any other failure fails the call, so a load that does not fit
    on every member is refused as a whole rather than served by some of them."""

    groups: NodeGroups
    member_stubs: list[Stub]

    async def _ask(self, method: str, req: Any, kind: type[R], timeout: float | None = None) -> R:
        got = await asyncio.gather(
            *(m._ask(method, req, kind, timeout) for m in self.member_stubs),
            return_exceptions=True,
        )
        answers: list[Any] = []
        failed: BaseException | None = None
        for stub, reply in zip(self.member_stubs, got, strict=True):
            member = stub.prefix.rsplit(".", 1)[-1]
            if isinstance(reply, ElanusError) and reply.code == ErrorCode.UNAVAILABLE:
                log.warning("group member %s is gone (%s): left out", member, reply.message)
                self.groups.forget(member)
            elif isinstance(reply, BaseException):
                failed = failed or reply
            else:
                answers.append(reply)
        if failed is not None:
            raise failed
        if not answers:
            raise ElanusError(ErrorCode.UNAVAILABLE, f"no member of node group {self.prefix}")
        return answers[0]  # type: ignore[no-any-return]


class FannedQueryNode(_Fanned, QueryNodeAPI):
    """``QueryNodeAPI`` of a group: its delegators' calls go to every member."""

    def __init__(self, bus: Bus, group: str, groups: NodeGroups) -> None:
        QueryNodeAPI.__init__(self, bus, group)
        self.groups = groups
        self.member_stubs = [QueryNodeAPI(bus, m) for m in groups.members(group)]


class FannedWorker(_Fanned, WorkerAPI):
    """``WorkerAPI`` of a group: segment loads and releases go to every member."""

    def __init__(self, bus: Bus, group: str, groups: NodeGroups) -> None:
        WorkerAPI.__init__(self, bus, group, NODE_TIMEOUT_S)
        self.groups = groups
        self.member_stubs = [WorkerAPI(bus, m, NODE_TIMEOUT_S) for m in groups.members(group)]


class GroupPlacement(Protocol):
    """What copying a group's share uses of the query coord (``QueryCoord``)."""

    loaded: dict[int, Loaded]

    @property
    def lookup(self) -> CollectionLookup: ...
    @property
    def data(self) -> SegmentTable: ...
    @property
    def bus(self) -> Bus: ...
    def segment_spec(self, seg: Any, info: dict[str, Any]) -> SegmentSpec: ...
    def delegate_request(
        self, lo: Loaded, r: Replica, info: dict[str, Any], vchannel: str
    ) -> DelegateChannel: ...


async def copy_share(qc: GroupPlacement, group: str, member: str, afresh: bool) -> None:
    """Load onto ``member`` the segments and delegators every placed replica has on
    ``group``: the segments first, so its delegators find them on their worker. ``afresh``:
    drop what it holds first (a member that missed calls may hold what the group no longer
    does)."""
    bus = qc.bus
    for lo in list(qc.loaded.values()):
        if afresh:
            await QueryNodeAPI(bus, member).release_collection(
                ReleaseOnNode(collection_id=lo.collection_id)
            )
        for r in lo.replicas:
            if not r.placed or group not in r.used():
                continue
            info = await qc.lookup.describe_by_id(lo.collection_id)
            specs = [
                qc.segment_spec(seg, info)
                for sid, n in r.segments.items()
                if n == group and (seg := qc.data.segments.get(sid)) is not None
            ]
            if specs:
                load = LoadSegments(
                    collection_id=lo.collection_id, schema=info["schema"], segments=specs
                )
                await WorkerAPI(bus, member, NODE_TIMEOUT_S).load(load)
            for v, n in r.channels.items():
                if n == group:
                    await QueryNodeAPI(bus, member).watch(qc.delegate_request(lo, r, info, v))
