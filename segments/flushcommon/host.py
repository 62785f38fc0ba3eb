"""What the write path's parts use of the data node that assembles them (``DataNode``):
the role's common parts (``RoleHost``). Named here, so that ``flushcommon`` and the data
node's channel writers and import tasks never import the node they serve."""

from __future__ import annotations

from elanus.channels.runtime.role import RoleHost

DataNodeHost = RoleHost
