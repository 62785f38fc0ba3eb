"""The two tables at the end of docs/milvus-compat.md, read for the tests that hold them to
pymilvus and the servicer (``test_milvus_compat_doc.py``) and to the port's answers
(``test_milvus_refusals.py``): every ``MilvusClient`` method and every ``MilvusService`` RPC."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "milvus-compat.md"
METHODS = "## Every MilvusClient method"
RPCS = "## Every RPC"
_NAMES = re.compile(r"`(\w+)`")


@dataclass(frozen=True)
class MethodRow:
    """A ``MilvusClient`` method: ``status`` works, refused or client-side; ``rpcs`` sent
    in order; ``error`` (``10``, ``UNIMPLEMENTED``, ``1100``) when refused."""

    name: str
    status: str
    rpcs: tuple[str, ...]
    error: str


@dataclass(frozen=True)
class RpcRow:
    """An RPC: ``answer`` served, ``10`` or ``UNIMPLEMENTED``; the methods sending it."""

    name: str
    answer: str
    callers: tuple[str, ...]
    notes: str


def _rows(heading: str) -> list[list[str]]:
    """The cells of the table under ``heading`` (its header and rule left out)."""
    text = DOC.read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end >= 0 else len(text)]
    lines = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]


def _name(cell: str) -> str:
    names = _NAMES.findall(cell)
    assert len(names) == 1, f"a row's first cell names one thing: {cell!r}"
    return str(names[0])


def method_rows() -> dict[str, MethodRow]:
    rows = {}
    for cells in _rows(METHODS):
        assert len(cells) == 5, cells
        name = _name(cells[0])
        assert name not in rows, f"{name} is listed twice"
        error = cells[3].strip("`")
        rows[name] = MethodRow(name, cells[1], tuple(_NAMES.findall(cells[2])), error)
    return rows


def rpc_rows() -> dict[str, RpcRow]:
    rows = {}
    for cells in _rows(RPCS):
        assert len(cells) == 4, cells
        name = _name(cells[0])
        assert name not in rows, f"{name} is listed twice"
        callers = tuple(_NAMES.findall(cells[2]))
        rows[name] = RpcRow(name, cells[1].strip("`"), callers, cells[3])
    return rows
