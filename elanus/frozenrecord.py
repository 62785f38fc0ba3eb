"""Frozen keyword-only dataclasses, made with one ``exec`` per class.

Every role API type (``@request``, ``@reply``, ``@record``) is
``dataclass(frozen=True, kw_only=True)``: about 200 classes, all made while a role process
imports its modules. Python 3.11's ``dataclasses`` compiles each generated method
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``)
with an ``exec`` of its own, 1.0-1.3 ms a class here: a quarter of a second of every
role's start, which a restarted proxy spends before it serves. ``frozen_dataclass`` lets
``dataclasses`` do the fields (so ``fields``, ``replace``, ``asdict`` and ``is_dataclass``
work as ever), compiles only ``__init__`` and gives the other five as closures.

Only the plain case takes this path: no base dataclass, every field in ``__init__``, no
``InitVar``. Anything else, and Python 3.13+ (which compiles the methods in one
``exec``), gets ``dataclasses.dataclass`` itself. ``tests/test_frozenrecord.py`` holds
both makers' classes side by side.
"""

from __future__ import annotations

import dataclasses
import inspect  # loaded by dataclasses already
import operator
import sys
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_FAST = sys.version_info < (3, 13)
_OWN = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")


def frozen_dataclass(cls: type[T]) -> type[T]:
    """``dataclasses.dataclass(frozen=True, kw_only=True)(cls)``, made faster."""
    if not _FAST or not _plain_case(cls):
        return dataclasses.dataclass(frozen=True, kw_only=True)(cls)
    own = {name: name in cls.__dict__ for name in _OWN}
    # a class that sets __eq__ but not __hash__ has __hash__ None: dataclass makes one then
    explicit_hash = own["__hash__"] and not (cls.__dict__["__hash__"] is None and own["__eq__"])
    undocumented = not cls.__dict__.get("__doc__")
    if undocumented:
        cls.__doc__ = "-"  # spares dataclasses' inspect.signature; written below
    made = dataclasses.dataclass(init=False, repr=False, eq=False, kw_only=True)(cls)
    fields = dataclasses.fields(made)  # type: ignore[arg-type]
    namespace = _methods(made, fields)
    for name in ("__init__", "__repr__", "__eq__", "__setattr__", "__delattr__"):
        if not own[name]:
            setattr(made, name, namespace[name])
    if not explicit_hash:
        made.__hash__ = namespace["__hash__"]  # type: ignore[method-assign]
    params = made.__dataclass_params__  # type: ignore[attr-defined]
    params.init = params.repr = params.eq = params.frozen = True
    if undocumented:
        made.__doc__ = made.__name__ + _signature_text(fields)
    return made


def _plain_case(cls: type[Any]) -> bool:
    """No base dataclass, no ``InitVar``, no ``field(init=False)``, no field whose name the
    generated ``__init__`` uses itself: what the fast path makes."""
    if any(dataclasses.is_dataclass(base) for base in cls.__mro__[1:]):
        return False
    for name, kind in cls.__dict__.get("__annotations__", {}).items():
        if name == "self" or name.startswith("__"):
            return False
        if "InitVar" in (kind if isinstance(kind, str) else repr(kind)):
            return False
        value = cls.__dict__.get(name)
        if isinstance(value, dataclasses.Field) and not value.init:
            return False
    return True


def _methods(cls: type[Any], fields: tuple[dataclasses.Field[Any], ...]) -> dict[str, Any]:
    """The six methods. Only ``__init__``, which runs per instance, is compiled for the
    class (defaults and factories bound as globals of its code, as ``dataclasses`` binds
    them); the other five are closures over the class's field names."""
    scope: dict[str, Any] = {"__set": object.__setattr__, "__factory_marker": _FACTORY}
    params, body = [], []
    for f in fields:
        value = f.name
        if f.default is not dataclasses.MISSING:
            scope[f"__d_{f.name}"] = f.default
            params.append(f"{f.name}=__d_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"__f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=__factory_marker")
            value = f"__f_{f.name}() if {f.name} is __factory_marker else {f.name}"
        else:
            params.append(f.name)
        body.append(f"  __set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("  self.__post_init__()")
    star = "*, " if params else ""
    source = f"def __init__(self, {star}{', '.join(params)}) -> None:\n" + "\n".join(
        body or ["  pass"]
    )
    exec(source, scope)  # noqa: S102 - source built above from field names
    methods = {"__init__": scope["__init__"], **_shared_methods(cls, fields)}
    for name, fn in methods.items():
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        fn.__module__ = cls.__module__
    methods["__init__"].__annotations__ = {f.name: f.type for f in fields} | {"return": None}
    return methods


def _shared_methods(cls: type[Any], fields: tuple[dataclasses.Field[Any], ...]) -> dict[str, Any]:
    """``__repr__``, ``__eq__``, ``__hash__`` and the frozen ``__setattr__``/``__delattr__``,
    answering as the ones ``dataclasses`` writes do."""
    shown = tuple(f.name for f in fields if f.repr)
    compared = _values(tuple(f.name for f in fields if f.compare))
    hashed = _values(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
    names = frozenset(f.name for f in fields)

    def __repr__(self: Any) -> str:
        shows = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({shows})"

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return {
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
    }


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The named attributes of an object, as a tuple (what ``dataclasses`` compares and
    hashes), however many names there are."""
    if not names:
        return lambda _obj: ()
    get = operator.attrgetter(*names)
    if len(names) == 1:
        return lambda obj: (get(obj),)
    return get  # type: ignore[return-value]


def _signature_text(fields: tuple[dataclasses.Field[Any], ...]) -> str:
    """What ``dataclasses`` would write as an undocumented class's ``__doc__``."""
    if not fields:
        return "()"
    parts = []
    for f in fields:
        kind = inspect.formatannotation(f.type)
        if f.default is not dataclasses.MISSING:
            parts.append(f"{f.name}: {kind} = {f.default!r}")
        elif f.default_factory is not dataclasses.MISSING:
            parts.append(f"{f.name}: {kind} = <factory>")
        else:
            parts.append(f"{f.name}: {kind}")
    return "(*, " + ", ".join(parts) + ")"


class _FactoryMarker:
    """The default of a parameter whose field has a ``default_factory``."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _FactoryMarker()
