"""Operation records of the external builders' pull protocol (``elanus/ops/indexes.py``):
claim tasks under a lease, renew it, report a result. Keys from the records, the dict
checker's words for a bad body, the SDK's wire bodies as before."""

from __future__ import annotations

import pytest
from opcheck import RecordingClient, declaration_test, decoded, refusal_test

from elanus.errors import ElanusError
from elanus.ops import checked
from elanus.ops.indexes import ClaimIndexTasks, IndexHeartbeat, ReportIndexTask

test_an_operations_action_is_declared_by_its_record = declaration_test(
    [ClaimIndexTasks, IndexHeartbeat, ReportIndexTask]
)


def test_a_body_decodes_into_the_record_once() -> None:
    got = decoded("claim_index_tasks", {"node_id": "spark-1", "collection": "", "limit": 3})
    assert got == ClaimIndexTasks(node_id="spark-1", collection="", limit=3)  # "": all
    report = decoded(
        "report_index_task",
        {"build_id": 7, "version": 2, "node_id": "n", "ok": True, "files": ["a"], "seconds": 1},
    )
    assert (report.files, report.seconds) == (["a"], 1.0)  # seconds as a float


BAD_BODIES = [
        ("claim_index_tasks", {}, "claim_index_tasks: missing required key 'node_id'"),
        ("claim_index_tasks", {"node_id": "a b"},
         "node_id 'a b' must be 1 to 128 letters, digits, '_' or '-'"),
        ("claim_index_tasks", {"node_id": "n", "collection": "9c"},
         "collection name '9c' is invalid"),
        ("claim_index_tasks", {"node_id": "n", "limit": 0},
         "claim_index_tasks: 'limit' = 0 is out of range [1, None]"),
        ("claim_index_tasks", {"node_id": "n", "retry_failed": "yes"},
         "claim_index_tasks: 'retry_failed' must be true or false, got 'yes'"),
        ("index_heartbeat", {"node_id": "x" * 129}, "must be 1 to 128 letters"),
        ("index_heartbeat", {"node_id": 5}, "index_heartbeat: 'node_id' must be a string"),
        ("report_index_task", {"version": 1, "node_id": "n", "ok": True},
         "report_index_task: missing required key 'build_id'"),
        ("report_index_task", {"build_id": 1, "version": 1, "node_id": "n", "ok": 1},
         "report_index_task: 'ok' must be true or false, got 1"),
        ("report_index_task", {"build_id": 1, "version": 1, "node_id": "n", "ok": True,
                               "seconds": "1"},
         "report_index_task: 'seconds' must be a number, got '1'"),
        ("report_index_task", {"build_id": 1, "version": 1, "node_id": "n", "ok": True,
                               "files": [3]},
         "report_index_task: 'files'[0] must be a string"),
]  # fmt: skip
test_a_bad_body_is_refused_naming_the_problem = refusal_test(BAD_BODIES)


def test_a_record_built_by_a_face_is_checked_as_a_body_is() -> None:
    with pytest.raises(ElanusError, match="must be 1 to 128 letters"):
        checked(IndexHeartbeat(node_id=""))


def test_the_sdk_sends_the_bodies_it_always_sent() -> None:
    client = RecordingClient({"report_index_task": {"accepted": True}})
    client.claim_index_tasks("n")
    client.claim_index_tasks("n", "c", retry_failed=True, db="d")
    client.index_heartbeat("n")
    client.report_index_task("n", {"build_id": 1, "version": 2, "ok": False,
                                   "fail_reason": "boom", "seconds": 0.5})  # fmt: skip
    assert client.bodies() == [
        ("claim_index_tasks", {"db": "own", "node_id": "n", "retry_failed": False}),
        ("claim_index_tasks", {"db": "d", "collection": "c", "node_id": "n",
                               "retry_failed": True}),
        ("index_heartbeat", {"node_id": "n"}),
        ("report_index_task", {"build_id": 1, "version": 2, "node_id": "n", "ok": False,
                               "fail_reason": "boom", "seconds": 0.5}),
    ]  # fmt: skip
