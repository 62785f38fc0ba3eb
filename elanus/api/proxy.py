"""The proxy's API toward the coord: the calls the coord makes to one proxy instance.

``segments.release``: give back the rows a proxy reserved in segments the coord is about
to seal (seed 000's segment allocation). ``timetick.report``: report pending DML now,
so a Strong read's tick need not wait out the interval."""

from __future__ import annotations

from elanus.api.base import Ack, Stub
from elanus.channels import subjects
from elanus.channels.bus import Bus
from elanus.requests import request


@request("segments.release")
class ReleaseQuotas:
    segment_ids: list[int]


@request("timetick.report")
class ReportNow:
    pass


class ProxyAPI(Stub):
    def __init__(self, bus: Bus, node_id: str) -> None:
        super().__init__(bus, subjects.node_prefix("proxy", node_id))

    async def release_quotas(self, req: ReleaseQuotas, timeout: float = 10.0) -> Ack:
        return await self._ask("segments.release", req, Ack, timeout)

    async def report_now(self, timeout: float = 5.0) -> Ack:
        return await self._ask("timetick.report", ReportNow(), Ack, timeout)
