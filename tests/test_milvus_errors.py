"""Bad requests through pymilvus raise the same exception types against Elanus's Milvus
face as against Milvus Lite (run live, in a child process: Milvus Lite must not share a
process that forks), and the codes pymilvus itself branches on match."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from milvus_stack import milvus_stack

CASES = r"""
import json, sys
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException

def run(c):
    out = {}
    def t(name, f):
        try:
            f()
            out[name] = None
        except MilvusException as e:
            out[name] = [type(e).__name__, e.code]
        except Exception as e:
            out[name] = [type(e).__name__, None]
    t("unknown_describe", lambda: c.describe_collection("nope"))
    t("unknown_search", lambda: c.search("nope", data=[[0.1, 0.2]]))
    t("unknown_query", lambda: c.query("nope", filter="id > 0"))
    c.create_collection("q", dimension=2, consistency_level="Strong")
    t("wrong_dim_insert", lambda: c.insert("q", [{"id": 1, "vector": [0.1, 0.2, 0.3]}]))
    t("bad_expr_query", lambda: c.query("q", filter="id >>> 3"))
    t("bad_expr_search", lambda: c.search("q", data=[[0.1, 0.2]], filter="id >>> 3"))
    t("drop_index_loaded", lambda: c.drop_index("q", "vector"))
    t("nq_too_many", lambda: c.search("q", data=[[0.1, 0.2]] * 16385))
    t("topk_too_large", lambda: c.search("q", data=[[0.1, 0.2]], limit=16385))
    c.release_collection("q")
    t("not_loaded", lambda: c.query("q", filter="id > 0"))
    c.drop_collection("q")
    return out

c = MilvusClient(sys.argv[1])
json.dump(run(c), sys.stdout)
c.close()
"""

# What Milvus Lite answers with a code of its own for bad input (6); Milvus's server and
# Elanus answer ParameterInvalid (1100). Everything else must match exactly.
INPUT_ERRORS = {
    "wrong_dim_insert", "bad_expr_query", "bad_expr_search",
    # Milvus's server answers 65535 here (an error without a class), Lite 6: Elanus 1100
    "drop_index_loaded",
}  # fmt: skip
LITE_TAKES = {"nq_too_many", "topk_too_large"}
"""Past Milvus's limits (nq and topk at most 16384), which Milvus Lite 3.2 does not check:
Milvus's server refuses them with 1100, and so does Elanus."""


def _answers(target: str, cwd: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CASES, target],
        capture_output=True, text=True, timeout=240, cwd=cwd,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


@pytest.fixture
def elanus_uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    for s in milvus_stack(request, tmp_path):
        yield s.milvus_uri


@pytest.mark.slow
def test_bad_requests_match_milvus_lite(elanus_uri: str, tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite")
    lite = _answers(str(tmp_path / "lite.db"), tmp_path)
    ours = _answers(elanus_uri, tmp_path)
    assert set(ours) == set(lite)
    for case, answer in lite.items():
        if case in LITE_TAKES:
            assert ours[case] == ["MilvusException", 1100], f"{case}: {ours[case]}"
            continue
        assert ours[case] is not None, f"{case}: Elanus raised nothing; Lite raised {answer}"
        assert ours[case][0] == answer[0], f"{case}: {ours[case]} vs Lite {answer}"
        if case in INPUT_ERRORS:
            assert ours[case][1] == 1100, case
        else:
            assert ours[case][1] == answer[1], f"{case}: {ours[case]} vs Lite {answer}"


def test_unauthenticated_when_auth_is_on(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from pymilvus import MilvusClient
    from pymilvus.exceptions import MilvusException

    for s in milvus_stack(request, tmp_path, auth_enabled=True, root_password="root-pw-1"):
        with pytest.raises(MilvusException):
            MilvusClient(uri=s.milvus_uri, token="root:wrong", timeout=10)
        with pytest.raises(MilvusException):
            MilvusClient(uri=s.milvus_uri, timeout=10)
        c = MilvusClient(uri=s.milvus_uri, token="root:root-pw-1", timeout=10)
        try:
            assert c.list_collections() == []
        finally:
            c.close()
