"""describe_alias and list_aliases answer in pymilvus's shapes, as Milvus Lite does.

Milvus Lite leaves ``db_name`` empty (so pymilvus omits it), where Milvus fills it in;
Elanus answers as Milvus, so its keys are Lite's plus ``db_name``. Lite also departs from
Milvus's rules (it drops a collection that has aliases; Milvus 2.5.5 refuses), so only the
shapes and values of the answers are compared here; tests/test_aliases.py holds the rules.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import Stack

pymilvus = pytest.importorskip("pymilvus", reason="the dev extra pins pymilvus and milvus-lite")
pytestmark = [pytest.mark.conformance, pytest.mark.slow]  # Milvus Lite in a child Python


def _answers(client: Any) -> list[dict[str, Any]]:
    for name in ("books", "films"):
        client.create_collection(name, dimension=3)
    client.create_alias("books", "pub")
    client.create_alias("books", "library")
    client.create_alias("films", "cinema")
    answers = [
        client.describe_alias("pub"),
        client.list_aliases("books"),
        client.list_aliases("films"),
        client.list_aliases(),
    ]
    client.alter_alias("films", "pub")
    answers += [client.describe_alias("pub"), client.list_aliases("films")]
    return answers


def test_alias_answers_have_pymilvus_shapes(stack: Stack, tmp_path: Path) -> None:
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    lite = pymilvus.MilvusClient(str(tmp_path / "lite.db"))
    try:
        expected = _answers(lite)
    finally:
        lite.close()
    got = _answers(stack.client())
    for want, have in zip(expected, got, strict=True):
        assert have.get("db_name") == "default"
        have = {k: v for k, v in have.items() if k != "db_name"}
        if "aliases" in want:  # Lite lists in no promised order; Elanus sorts
            want = {**want, "aliases": sorted(want["aliases"])}
        assert have == want
