"""Request types of the work the coordinator hands out to nodes: an index node's ``build``
and a datanode's ``import.*`` (the coord's own ``index.*`` and ``import.*`` calls are in
``elanus/api/indexcoord.py`` and ``elanus/api/imports.py``).

See ``elanus.coordrequests`` for how they are used; the key names are the wire format.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from elanus.requests import request

# -- index builds ----------------------------------------------------------------------------------


@request("build")
class BuildIndex:
    """One build task pushed to an index node (``IndexCoord.task_spec``)."""

    build_id: int
    version: int
    segment_id: int
    partition_id: int
    collection_id: int
    field: str
    data_path: str
    out_dir: str
    spec: dict[str, Any]
    num_rows: int | None = None


# -- import jobs: a datanode's handlers ---------------------------------------------------------


@request("datanode.import.run")
class RunImport:
    job_id: int
    collection_id: int
    schema: dict[str, Any]
    vchannels: list[str]
    units: list[dict[str, Any]]
    options: dict[str, Any] = field(default_factory=dict)
    max_rows: int
    staged: bool = False
    partitions: list[dict[str, Any]] = field(default_factory=list)
    """The collection's partitions (name, partition_id): a partition key routes rows by them."""


@request("datanode.import.finalize")
class FinalizeImport:
    """A committed job whose executor went away: stamp ``_ts`` at ``ts``, report it."""

    job_id: int
    ts: int
    segments: list[dict[str, Any]]
