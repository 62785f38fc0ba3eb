"""Consistency levels and how each turns into a guarantee timestamp (DESIGN.md, read path)."""

from __future__ import annotations

import enum


class ConsistencyLevel(enum.StrEnum):
    STRONG = "Strong"
    BOUNDED = "Bounded"
    SESSION = "Session"
    EVENTUALLY = "Eventually"

    @classmethod
    def parse(cls, value: str | ConsistencyLevel) -> ConsistencyLevel:
        if isinstance(value, ConsistencyLevel):
            return value
        exact = cls._value2member_map_.get(value)  # the usual spelling: one lookup
        if exact is not None:
            return exact  # type: ignore[return-value]
        for level in cls:
            if level.value.lower() == str(value).lower():
                return level
        names = ", ".join(level.value for level in cls)
        raise ValueError(f"unknown consistency level {value!r}; expected one of {names}")
