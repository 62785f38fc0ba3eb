"""The coord's typed stubs (``elanus/api/coord.py``) and its handlers agree: every stub
method asks a subject the coord serves, and sends the request type that handler decodes."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest

from elanus.api.base import Stub, as_body
from elanus.api.coord import CoordAPI
from elanus.api.querycoord import LoadProgress
from elanus.api.rootcoord import AliasList
from elanus.channels import subjects
from elanus.errors import ElanusError, ErrorCode
from elanus.meta.coord import Coordinator
from elanus.requests import request_type
from elanus.settings import Settings


class _Recorder:
    """A bus that records what a stub asks and answers nothing a stub accepts."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def request(self, subject: str, payload: Any = None, timeout: float = 30.0) -> Any:
        self.asked.append(subject)
        return object()


def _calls(stub: Stub) -> list[tuple[str, type]]:
    """Each typed method of ``stub``'s own class, with its request type."""
    own = [
        (name, fn)
        for cls in type(stub).__mro__
        if cls not in (Stub, object)
        for name, fn in vars(cls).items()
        if inspect.iscoroutinefunction(fn) and not name.startswith("_")
    ]
    return [(name, _required(get_type_hints(fn)["req"])) for name, fn in own]


def _required(hint: Any) -> type:
    """``X`` of a hint ``X`` or ``X | None`` (a call whose request may be left out)."""
    kinds = [k for k in get_args(hint) if k is not type(None)] or [hint]
    return kinds[0]  # type: ignore[no-any-return]


def test_every_stub_method_reaches_a_handler_of_its_request_type(tmp_path: Path) -> None:
    bus: Any = _Recorder()
    api = CoordAPI(bus)
    handlers = Coordinator(Settings(data_dir=str(tmp_path)), bus).handlers()
    stubs = [api, *(v for v in vars(api).values() if isinstance(v, Stub))]
    checked = 0
    for stub in stubs:
        for name, kind in _calls(stub):
            with pytest.raises(ElanusError) as err:
                asyncio.run(getattr(stub, name)(None))
            assert err.value.code == ErrorCode.INTERNAL  # the recorder's non-reply
            method = bus.asked[-1].removeprefix(subjects.COORD + ".")
            assert method in handlers, f"{type(stub).__name__}.{name}: no handler {method!r}"
            assert request_type(handlers[method]) is kind, f"{method}: request type differs"
            checked += 1
    assert checked >= 40


def test_replies_keep_optional_keys_absent_in_json() -> None:
    assert as_body(AliasList(aliases=["a"], db_name="default")) == {
        "aliases": ["a"],
        "db_name": "default",
    }
    listed = AliasList(aliases=[], db_name="default", collection_name="c")
    assert as_body(listed)["collection_name"] == "c"
    idle = LoadProgress(state="NotLoad", progress=0, persisted_rows=5, loaded_rows=0)
    assert "partition_ids" in as_body(
        LoadProgress(state="Loaded", progress=100, persisted_rows=5, loaded_rows=5)
    )
    assert "partition_ids" not in as_body(idle)
