"""What travels on the Flight wire, shared by the proxy and the client SDK.

JSON bodies in and out of ``DoAction``, and errors as ``FlightServerError("[CODE] message",
extra_info=JSON)`` so clients in any language can read the code without parsing metadata.
This module imports only pyarrow and the shared types, so the client SDK may use it.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pyarrow.flight as flight

from elanus.errors import ElanusError, ErrorCode, invalid, parse_prefixed
from elanus.wire.bodyshape import check_body_shape, max_json_depth
from elanus.wire.tls import unavailable_hint

DEFAULT_DB = "default"


_ORJSON = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def encode_json(obj: Any) -> bytes:
    """Compact JSON; numpy-ish scalars and sets are tolerated so results never fail to encode.
    NaN and inf stay as such, so a server can name them in its error.

    Through orjson first (a single query's 64-1536 floats cost the stdlib encoder tens of
    microseconds, a third of the client's time per search); numpy scalars go through
    ``_default`` as with the stdlib (float32 widened exactly). orjson writes NaN and inf as
    ``null``, so a body whose text has a ``null`` anywhere is encoded again by the stdlib,
    which keeps them."""
    try:
        out = orjson.dumps(obj, default=_default, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        out = b"null"
    if b"null" not in out:
        return out
    return json.dumps(obj, separators=(",", ":"), default=_default).encode()


def encode_result(obj: Any) -> bytes:
    """``encode_json`` for the proxy's replies, through orjson (about 5x faster on search
    results: it matters for single-query calls). orjson would write NaN/inf as null: stored
    values never hold them (inserts refuse them) and the distances of real hits are finite.
    """
    try:
        return orjson.dumps(obj, default=_default, option=_ORJSON)
    except (TypeError, orjson.JSONEncodeError):
        return encode_json(obj)


def _default(obj: Any) -> Any:
    if isinstance(obj, bytes | bytearray | memoryview):
        return list(bytes(obj))  # binary vectors: byte values
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def decode_body(raw: bytes, what: str = "request body") -> dict[str, Any]:
    """Parse a JSON object; an empty body means ``{}``. Raises INVALID_ARGUMENT otherwise."""
    if not raw or not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # the standard library also reads NaN and Infinity, which clients may send
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise invalid(f"malformed JSON in {what}: {exc}") from None
        except RecursionError:
            raise invalid(
                f"{what} is nested too deeply to read; the limit is {max_json_depth()} levels "
                "(setting max_json_depth)"
            ) from None
    if not isinstance(body, dict):
        raise invalid(f"{what} must be a JSON object, got {_json_kind(body)}")
    return body


def decode_request(raw: bytes, what: str = "request body") -> dict[str, Any]:
    """``decode_body`` for what clients send the proxy: also refuses a key given twice in
    one object and nesting deeper than ``max_json_depth`` (see ``bodyshape``)."""
    body = decode_body(raw, what)
    if body:
        check_body_shape(raw, body, what)
    return body


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else type(value).__name__


MAX_ERROR_CHARS = 1024
"""Longest error message sent to a client. Messages quote what they refuse (a name, a
key); quoting a 100 KiB name in full made the status outgrow gRPC's 16 KiB metadata
limit, and the client got an uncoded RESOURCE_EXHAUSTED instead of the error."""


def clip_message(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """At most ``limit`` characters, and valid UTF-8 (a lone surrogate a client sent in a
    JSON escape is written as an escape again)."""
    if len(message) > limit:
        keep = limit - 40
        message = f"{message[:keep]}… ({len(message) - keep} more characters)"
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


_STATUS: dict[str, type[flight.FlightError]] = {
    ErrorCode.UNAUTHENTICATED: flight.FlightUnauthenticatedError,
    ErrorCode.PERMISSION_DENIED: flight.FlightUnauthorizedError,
}
"""Codes with a Flight status of their own (gRPC UNAUTHENTICATED / PERMISSION_DENIED), so
generic Flight clients see them as such; every other code travels as a server error."""


def to_flight_error(exc: ElanusError) -> flight.FlightError:
    """The one shape in which every error leaves the proxy."""
    message = clip_message(exc.message)
    info = json.dumps({"code": str(exc.code), "message": message}, ensure_ascii=False)
    kind = _STATUS.get(str(exc.code), flight.FlightServerError)
    return kind(f"[{exc.code}] {message}", extra_info=info.encode())


NOT_FLIGHT = ("unknown service arrow.flight.protocol.flightservice", "method not found")
"""What a gRPC server without Flight's service answers (Go's grpc, Milvus; grpcio)."""


def not_elanus(text: str, uri: str | None = None) -> ElanusError:
    """The error of a gRPC server that does not serve Flight: likely Milvus's port."""
    where = uri or "the server"
    detail = text.partition("message: ")[2] or text
    return ElanusError(
        ErrorCode.UNAVAILABLE,
        f"{where} is not an Elanus Flight endpoint ({detail}); is it Milvus's port? Use "
        "pymilvus there, or Elanus's Flight port (default 8815)",
    )


def from_flight_error(exc: BaseException, uri: str | None = None) -> ElanusError:
    """Turn whatever a Flight call raised into an ``ElanusError`` with the server's code;
    ``uri`` names the endpoint in the errors of one that is not an Elanus proxy."""
    extra = getattr(exc, "extra_info", None)
    if extra:
        try:
            d = json.loads(extra)
            if isinstance(d, dict) and "code" in d:
                return ElanusError.from_dict(d)
        except ValueError:
            pass
    text = str(exc)
    parsed = parse_prefixed(text)
    if parsed is not None:
        return ElanusError(*parsed)
    if any(sign in text.lower() for sign in NOT_FLIGHT):
        return not_elanus(text, uri)
    if isinstance(exc, flight.FlightUnavailableError):
        return unavailable_hint(text)
    if isinstance(exc, flight.FlightTimedOutError):
        return ElanusError(ErrorCode.TIMEOUT, f"the Elanus proxy did not answer in time: {text}")
    if isinstance(exc, flight.FlightCancelledError):
        return ElanusError(ErrorCode.UNAVAILABLE, f"the call was cancelled: {text}")
    return ElanusError(ErrorCode.INTERNAL, text)
