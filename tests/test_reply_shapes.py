"""The reply shapes clients read (``TypedDict``s in ``elanus/ops``) against the records the
coordinators send (``elanus/api``): where a reply is a record's body as ``as_body`` writes
it, its shape must name exactly the record's fields. A field added to a record without its
shape (or the other way round) fails here, not in a user's ``KeyError``."""

from __future__ import annotations

import dataclasses

import pytest

from elanus.api import (
    auth,
    backup,
    coord,
    datacoord,
    imports,
    indexcoord,
    indexnode,
    querycoord,
    rootcoord,
    snapshot,
)
from elanus.ops import imports as import_ops
from elanus.ops import replies
from elanus.ops import snapshots as snapshot_ops

MIRRORS: list[tuple[type, type]] = [
    (replies.UserDescription, auth.UserDescription),
    (replies.GrantEntry, auth.GrantEntry),
    (replies.RoleDescription, auth.RoleDescription),
    (replies.CoordHealth, coord.CoordHealth),
    (replies.BackupCreated, backup.BackupCreated),
    (replies.CollectionDescription, rootcoord.CollectionDescription),
    (replies.LoadProgress, querycoord.LoadProgress),
    (replies.SegmentRecord, datacoord.SegmentRecord),
    (replies.IndexDescription, indexcoord.IndexDescription),
    (replies.BuildTask, indexnode.BuildIndex),
    (replies.IndexClaim, indexcoord.Claimed),
    (replies.IndexLease, indexcoord.Lease),
    (replies.IndexVerdict, indexcoord.Verdict),
    (import_ops.ImportJob, imports.ImportJobView),
    (snapshot_ops.SnapshotListing, snapshot.SnapshotView),
]
"""(reply shape, the record whose body it is)."""


@pytest.mark.parametrize(("shape", "record"), MIRRORS, ids=lambda t: t.__name__)
def test_a_reply_shape_names_its_records_fields(shape: type, record: type) -> None:
    fields = {f.name for f in dataclasses.fields(record)}
    assert set(shape.__annotations__) == fields
