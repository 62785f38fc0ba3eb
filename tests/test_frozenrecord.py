"""``frozen_dataclass`` makes the classes ``dataclass(frozen=True, kw_only=True)`` makes.

Each case declares one class body twice, once per maker, and checks that the two behave
alike: construction and its errors, defaults and factories, repr, equality, hashing,
frozenness, ``replace``, ``fields``, pickling and ``__post_init__``."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import field
from typing import Any, ClassVar

import pytest

from elanus.api import coord  # noqa: F401 - imports every role API module
from elanus.frozenrecord import frozen_dataclass
from elanus.wiretypes import _TYPES

PLAIN = dataclasses.dataclass(frozen=True, kw_only=True)


def both(body: type[Any]) -> tuple[type[Any], type[Any]]:
    """The body made by each maker, as two fresh classes of the same name."""
    made = []
    for maker in (frozen_dataclass, PLAIN):
        ns = {k: v for k, v in body.__dict__.items() if k not in ("__dict__", "__weakref__")}
        ns = {k: (copy.copy(v) if isinstance(v, dataclasses.Field) else v) for k, v in ns.items()}
        made.append(maker(type(body.__name__, body.__bases__, ns)))
    return made[0], made[1]


class Segment:
    """A segment descriptor."""

    segment_id: int
    rows: int = 0
    paths: list[str] = field(default_factory=list)
    note: str = field(default="", compare=False, repr=False)
    kind: ClassVar[str] = "segment"


class Undocumented:
    channel: str
    position: int = -1


class Empty:
    """No fields at all."""


class Checked:
    """A __post_init__ that rejects input."""

    limit: int

    def __post_init__(self) -> None:
        if self.limit < 0:
            raise ValueError("limit must be >= 0")


class OwnRepr:
    """A class body's own method wins, as with dataclasses."""

    name: str

    def __repr__(self) -> str:
        return f"<{self.name}>"


@pytest.mark.parametrize("body", [Segment, Undocumented, Empty, Checked, OwnRepr])
def test_both_makers_give_classes_that_behave_alike(body: type[Any]) -> None:
    fast, plain = both(body)
    args: dict[str, Any] = {
        Segment: {"segment_id": 7, "paths": ["a"]},
        Undocumented: {"channel": "c0"},
        Empty: {},
        Checked: {"limit": 3},
        OwnRepr: {"name": "x"},
    }[body]
    a, b = fast(**args), plain(**args)
    assert repr(a) == repr(b)
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert [f.name for f in dataclasses.fields(fast)] == [f.name for f in dataclasses.fields(plain)]
    assert fast.__match_args__ == plain.__match_args__
    assert fast.__doc__ == plain.__doc__
    assert a == fast(**args) and _hash(a) == _hash(b)  # a list field: unhashable in both
    assert a != b  # another class, as two dataclasses of one body are
    for made, obj in ((fast, a), (plain, b)):
        assert dataclasses.is_dataclass(made)
        assert made.__dataclass_params__.frozen and made.__dataclass_params__.eq
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.anything = 1
        with pytest.raises(dataclasses.FrozenInstanceError):
            del obj.anything
    if args:
        with pytest.raises(TypeError) as fast_err:
            fast(*args.values())
        with pytest.raises(TypeError) as plain_err:
            plain(*args.values())
        assert str(fast_err.value).split("(")[1:] == str(plain_err.value).split("(")[1:]
        with pytest.raises(TypeError, match="missing 1 required keyword-only argument"):
            fast()


def _hash(obj: Any) -> int | str:
    try:
        return hash(obj)
    except TypeError as exc:
        return str(exc)


def test_defaults_factories_and_compare_flags_are_kept() -> None:
    fast, plain = both(Segment)
    one, two = fast(segment_id=1), fast(segment_id=1)
    assert one.paths == [] and one.paths is not two.paths  # a fresh list each time
    assert fast(segment_id=1, note="x") == fast(segment_id=1, note="y")  # compare=False
    assert "note" not in repr(one)
    assert dataclasses.replace(one, rows=5) == fast(segment_id=1, rows=5)
    assert fast.kind == "segment" and "kind" not in {f.name for f in dataclasses.fields(fast)}
    assert one != plain(segment_id=1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'rows'"):
        one.rows = 2


def test_post_init_runs_and_a_subclass_of_a_record_takes_the_plain_path() -> None:
    fast, _ = both(Checked)
    with pytest.raises(ValueError, match="limit must be >= 0"):
        fast(limit=-1)

    class Wider(fast):  # type: ignore[misc, valid-type]
        extra: int = 0

    wider = frozen_dataclass(Wider)
    assert wider(limit=1, extra=2).extra == 2
    assert [f.name for f in dataclasses.fields(wider)] == ["limit", "extra"]


def test_a_field_named_self_takes_the_plain_path() -> None:
    class Odd:
        self: int
        other: str = "x"

    made = frozen_dataclass(Odd)
    assert made(self=1).self == 1 and repr(made(self=1)).endswith("Odd(self=1, other='x')")


def test_every_role_api_type_keeps_its_dataclass_contract() -> None:
    """All the wire types the role APIs declare: frozen, comparable, hashable when their
    fields are, each with a keyword-only ``__init__`` over its fields."""
    import inspect

    api_types = [t for name, t in _TYPES.items() if name.startswith("elanus.api.")]
    assert len(api_types) > 150
    for cls in api_types:
        params = cls.__dataclass_params__
        assert params.frozen and params.eq and params.init, cls
        sig = inspect.signature(cls)
        assert [p.name for p in sig.parameters.values()] == [
            f.name for f in dataclasses.fields(cls)
        ], cls
        assert all(p.kind is p.KEYWORD_ONLY for p in sig.parameters.values()), cls


def test_a_role_api_reply_pickles_compares_and_hashes() -> None:
    from elanus.api.datanode import Checkpoint

    point = Checkpoint(**{f.name: _sample(f) for f in dataclasses.fields(Checkpoint)})
    assert pickle.loads(pickle.dumps(point)) == point
    assert hash(point) == hash(dataclasses.replace(point))


def _sample(f: dataclasses.Field[Any]) -> Any:
    return {"int": 3, "str": "ch-0", "float": 1.5}.get(str(f.type))
