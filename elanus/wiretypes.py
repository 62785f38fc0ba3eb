"""Request types that travel on the bus as themselves.

A dataclass registered here crosses the bus as its fields (``channels/frames.py`` lifts
it into the header, its arrays into frames) and arrives as an instance of the same class;
in-process it is simply the same object. Registration is by module and class name."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T", bound=type[Any])

_TYPES: dict[str, type[Any]] = {}


def type_name(cls: type[Any]) -> str:
    """The name a wire type travels under: its module and qualified name."""
    return f"{cls.__module__}:{cls.__qualname__}"


def wire_type(cls: T) -> T:
    """Class decorator: instances of ``cls`` may travel on the bus."""
    _TYPES[type_name(cls)] = cls
    return cls


def lookup(name: str) -> type[Any] | None:
    return _TYPES.get(name)


def is_wire_type(value: Any) -> bool:
    cls = type(value)
    return _TYPES.get(type_name(cls)) is cls
