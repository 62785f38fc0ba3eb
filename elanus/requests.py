"""Reading JSON request bodies with errors that name the offending key.

Shared by the proxy (static checks on client requests) and the coord (re-checks on the
requests it receives), so both reject the same things with the same words.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any

from elanus.errors import invalid

_MISSING = object()


class Body:
    """A request body being read; ``done()`` rejects keys nobody asked for."""

    def __init__(self, body: Any, what: str = "request") -> None:
        if not isinstance(body, dict):
            raise invalid(f"{what} body must be a JSON object, got {type(body).__name__}")
        self.raw = body
        self.what = what
        self._seen: set[str] = set()

    def _get(self, key: str, default: Any) -> Any:
        self._seen.add(key)
        value = self.raw.get(key, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise invalid(f"{self.what}: missing required key {key!r}")
            return default
        return value

    def str(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is not default and not isinstance(value, str):
            raise invalid(f"{self.what}: {key!r} must be a string, got {type(value).__name__}")
        return value

    def int(
        self,
        key: builtins.str,
        default: Any = _MISSING,
        *,
        lo: builtins.int | None = None,
        hi: builtins.int | None = None,
    ) -> Any:
        value = self._get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(f"{self.what}: {key!r} must be an integer, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise invalid(f"{self.what}: {key!r} = {value} is out of range [{lo}, {hi}]")
        return value

    def float(self, key: builtins.str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise invalid(f"{self.what}: {key!r} must be a number, got {value!r}")
        return float(value)

    def bool(self, key: builtins.str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is not default and not isinstance(value, bool):
            raise invalid(f"{self.what}: {key!r} must be true or false, got {value!r}")
        return value

    def dict(self, key: builtins.str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is not default and not isinstance(value, dict):
            raise invalid(f"{self.what}: {key!r} must be a JSON object")
        return value

    def list(self, key: builtins.str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is not default and not isinstance(value, list):
            raise invalid(f"{self.what}: {key!r} must be a JSON array")
        return value

    def any(self, key: builtins.str, default: Any = _MISSING) -> Any:
        return self._get(key, default)

    def allow(self, keys: Iterable[builtins.str]) -> Body:
        """Accept these keys without reading them (e.g. routing keys handled elsewhere)."""
        self._seen.update(keys)
        return self

    def done(self) -> None:
        unknown = sorted(set(self.raw) - self._seen)
        if unknown:
            raise invalid(f"{self.what}: unknown key(s) {', '.join(map(repr, unknown))}")
