"""Reading request bodies with errors that name the offending key.

Shared by the proxy (static checks on client requests) and the roles (checks on the
requests they receive), so both reject the same things with the same words. ``Body`` reads
a dict key by key; a ``@request`` dataclass declares the whole schema, and ``decode``
checks a body against it once, where the body arrives (``Role.serve``).
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import (
    Annotated,
    Any,
    TypeVar,
    Union,
    cast,
    dataclass_transform,
    get_args,
    get_origin,
    get_type_hints,
)

from elanus.errors import invalid
from elanus.frozenrecord import frozen_dataclass
from elanus.schema import check_name
from elanus.wiretypes import wire_type

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


# -- typed requests -----------------------------------------------------------------------
# A request type is a frozen dataclass whose annotated fields are the body's schema (as a
# dask handler's signature is its message): ``decode`` checks a body once, at the edge
# where it arrives, with the same words as ``Body``, and the handler reads plain
# attributes. A field with a default (or ``default_factory``) is optional; ``None`` counts
# as absent, as in ``Body``. Bounds go in ``Annotated[int, Range(lo, hi)]``.

R = TypeVar("R")
Checker = Callable[[builtins.str, builtins.str, Any], Any]
"""``(what, label, value) -> value`` (possibly converted), or raises INVALID_ARGUMENT."""


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of a number field: ``Annotated[int, Range(1, 100)]``."""

    lo: builtins.int | builtins.float | None = None
    hi: builtins.int | builtins.float | None = None


@dataclass(frozen=True)
class Named:
    """A name field, held to Milvus's naming rules (``elanus.schema.check_name``):
    ``Annotated[str, Named("collection")]``; ``what`` names it in the error."""

    what: builtins.str


@dataclass_transform(kw_only_default=True, frozen_default=True)
def request(what: builtins.str) -> Callable[[type[R]], type[R]]:
    """Declare a request type; ``what`` names it in errors (usually its subject). It is a wire
    type too: a caller sends the instance, which arrives as one (``elanus/wiretypes.py``)."""

    def declare(cls: type[R]) -> type[R]:
        made = frozen_dataclass(cls)
        made.__request_what__ = what  # type: ignore[attr-defined]
        return wire_type(made)

    return declare


def is_request(tp: Any) -> builtins.bool:
    """Whether ``tp`` can be decoded into: a ``@request`` (or any) dataclass."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def decode(cls: type[R], raw: Any, what: builtins.str | None = None) -> R:
    """Check a body against ``cls`` and build it; an instance of ``cls`` passes as is."""
    if isinstance(raw, cls):
        return raw
    plan = _PLANS.get(cls) or _compile(cls)
    what = what or plan.what
    if not isinstance(raw, dict):
        raise invalid(f"{what} body must be a JSON object, got {type(raw).__name__}")
    values: builtins.dict[builtins.str, Any] = {}
    for name, label, check, default, factory in plan.fields:
        value = raw.get(name)
        if value is None:
            if default is not _MISSING:
                value = default
            elif factory is not None:
                value = factory()
            else:
                raise invalid(f"{what}: missing required key {label}")
        elif check is not None:
            value = check(what, label, value)
        values[name] = value
    if not plan.names.issuperset(raw):
        unknown = sorted(set(raw) - plan.names)
        raise invalid(f"{what}: unknown key(s) {', '.join(map(repr, unknown))}")
    return cls(**values)


def request_type(fn: Callable[..., Any]) -> type | None:
    """The request type a handler's first parameter is annotated with, or ``None`` (a
    handler of raw dicts). Resolved once, when the handler is served."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if not params or params[0].annotation is inspect.Parameter.empty:
        return None
    ann = params[0].annotation
    if isinstance(ann, builtins.str):
        scope = getattr(inspect.unwrap(getattr(fn, "__func__", fn)), "__globals__", {})
        try:
            ann = eval(ann, scope)  # noqa: S307 - an annotation of our own code
        except Exception as exc:
            raise TypeError(
                f"handler {getattr(fn, '__qualname__', fn)!r}: cannot resolve {ann!r} ({exc}); "
                "import its request type at run time, not under TYPE_CHECKING"
            ) from None
    if not is_request(ann):
        return None
    _PLANS.get(ann) or _compile(ann)  # a bad annotation fails when served, not when called
    return cast(type, ann)


class _Plan:
    __slots__ = ("fields", "names", "what")

    def __init__(self, what: builtins.str, fields: builtins.list[Any]) -> None:
        self.what = what
        self.fields = fields
        self.names = frozenset(f[0] for f in fields)


_PLANS: builtins.dict[type, _Plan] = {}


def _compile(cls: type) -> _Plan:
    hints = get_type_hints(cls, include_extras=True)
    fields = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        factory = None if f.default_factory is dataclasses.MISSING else f.default_factory
        default = _MISSING if f.default is dataclasses.MISSING else f.default
        fields.append((f.name, repr(f.name), _checker(hints[f.name]), default, factory))
    plan = _Plan(getattr(cls, "__request_what__", cls.__name__), fields)
    _PLANS[cls] = plan
    return plan


def _checker(tp: Any, bounds: Range | None = None) -> Checker | None:
    """How to check a value of annotation ``tp`` (``None``: anything goes)."""
    origin = get_origin(tp)
    if origin is Annotated:
        named = [m for m in tp.__metadata__ if isinstance(m, Named)]
        if named:
            return _name_checker(named[0].what)
        found = [m for m in tp.__metadata__ if isinstance(m, Range)]
        return _checker(tp.__origin__, found[0] if found else bounds)
    if origin in (Union, types.UnionType):
        kinds = [a for a in get_args(tp) if a is not type(None)]
        if len(kinds) != 1:
            raise TypeError(f"unsupported request field type {tp!r}: one type, or X | None")
        return _checker(kinds[0], bounds)
    if tp is Any:
        return None
    if tp is builtins.bool:
        return _check_bool
    if tp is builtins.int or tp is builtins.float:
        return _number_checker(tp is builtins.float, bounds)
    if tp is builtins.str:
        return _check_str
    if tp is builtins.list or origin is builtins.list:
        args = get_args(tp)
        return _container_checker(builtins.list, _checker(args[0]) if args else None)
    if tp is builtins.dict or origin is builtins.dict:
        args = get_args(tp)
        return _container_checker(builtins.dict, _checker(args[1]) if args else None)
    cls = origin if isinstance(origin, type) else tp
    if isinstance(cls, type):
        return _instance_checker(cls)
    raise TypeError(f"unsupported request field type {tp!r}")


def _exact(kind: type) -> Callable[[Checker], Checker]:
    def mark(check: Checker) -> Checker:
        check.exact = kind  # type: ignore[attr-defined]
        return check

    return mark


@_exact(builtins.bool)
def _check_bool(what: builtins.str, label: builtins.str, value: Any) -> Any:
    if not isinstance(value, builtins.bool):
        raise invalid(f"{what}: {label} must be true or false, got {value!r}")
    return value


@_exact(builtins.str)
def _check_str(what: builtins.str, label: builtins.str, value: Any) -> Any:
    if not isinstance(value, builtins.str):
        raise invalid(f"{what}: {label} must be a string, got {type(value).__name__}")
    return value


def _name_checker(kind: builtins.str) -> Checker:
    def check(what: builtins.str, label: builtins.str, value: Any) -> Any:
        _check_str(what, label, value)
        return check_name(value, kind)

    return check


def _number_checker(real: builtins.bool, bounds: Range | None) -> Checker:
    kinds: Any = (builtins.int, builtins.float) if real else builtins.int
    word = "a number" if real else "an integer"
    lo, hi = (bounds.lo, bounds.hi) if bounds else (None, None)

    def check(what: builtins.str, label: builtins.str, value: Any) -> Any:
        if isinstance(value, builtins.bool) or not isinstance(value, kinds):
            raise invalid(f"{what}: {label} must be {word}, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise invalid(f"{what}: {label} = {value} is out of range [{lo}, {hi}]")
        return builtins.float(value) if real else value

    if not real and bounds is None:
        check.exact = builtins.int  # type: ignore[attr-defined]
    return check


def _container_checker(kind: type, item: Checker | None) -> Checker:
    """A list or dict, and each item (dict: each value) if typed. Items are checked, not
    converted; a plain scan first, so a long list of ints costs one pass."""
    word = "a JSON array" if kind is builtins.list else "a JSON object"
    exact = getattr(item, "exact", None)

    def check(what: builtins.str, label: builtins.str, value: Any) -> Any:
        if not isinstance(value, kind):
            raise invalid(f"{what}: {label} must be {word}")
        if item is None:
            return value
        got: Any = value
        listed = kind is builtins.list
        if exact is not None and all(type(v) is exact for v in (got if listed else got.values())):
            return value
        for k, v in enumerate(got) if listed else got.items():
            item(what, f"{label}[{k!r}]", v)
        return value

    if item is None:
        check.exact = kind  # type: ignore[attr-defined]
    return check


def _instance_checker(cls: type) -> Checker:
    def check(what: builtins.str, label: builtins.str, value: Any) -> Any:
        if not isinstance(value, cls):
            raise invalid(
                f"{what}: {label} must be of type {cls.__name__}, got {type(value).__name__}"
            )
        return value

    return check
