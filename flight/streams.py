"""Record batch streams at the Flight edge: those a client streams in (DoPut, DoExchange),
read as untrusted input, and those a server streams out (DoGet), whose errors leave coded.

Arrow's IPC reader checks a message's framing but not its data: a batch whose string
offsets run backwards or past their buffer arrives as a "valid" batch, and any kernel
that reads it would read memory that is not its own (and a write would store the result).
So every batch is fully validated before any code looks at it, and a stream that is not
Arrow at all is refused as bad input (INVALID_ARGUMENT), not as a server failure.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as flight

from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.wire.codec import to_flight_error

log = logging.getLogger(__name__)
_REASON_CHARS = 160


def client_chunks(
    reader: flight.MetadataRecordBatchReader, call: str
) -> Iterator[flight.FlightStreamChunk]:
    """Every message of a client stream (for the stream caps, which count them all), each
    record batch in it validated in full."""
    index = 0
    while True:
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            return
        except flight.FlightError:
            raise  # the client went away or cancelled: not the data's fault
        except (pa.ArrowException, OSError) as exc:
            reason = _reason(exc)
            raise invalid(
                f"{call}: message {index} of the stream is not Arrow IPC ({reason})"
            ) from None
        index += 1
        batch = chunk.data
        if batch is not None and batch.num_rows:
            try:
                batch.validate(full=True)
            except (pa.ArrowException, OSError) as exc:
                raise invalid(
                    f"{call}: record batch {index - 1} of the stream is malformed ({_reason(exc)})"
                ) from None
        yield chunk


def client_batches(reader: flight.MetadataRecordBatchReader, call: str) -> Iterator[pa.RecordBatch]:
    """The non-empty record batches of a client stream, each validated in full."""
    for chunk in client_chunks(reader, call):
        if chunk.data is not None and chunk.data.num_rows:
            yield chunk.data


def coded_stream(batches: Iterator[pa.RecordBatch], call: str) -> Iterator[pa.RecordBatch]:
    """``batches`` for a server stream: an error in the middle of it leaves as a Flight
    error with a code, never as a traceback."""
    try:
        yield from batches
    except ElanusError as exc:
        raise to_flight_error(exc) from None
    except flight.FlightError:
        raise
    except Exception as exc:  # noqa: BLE001 - never leak a traceback to the client
        log.exception("%s stream failed", call)
        raise to_flight_error(
            ElanusError(ErrorCode.INTERNAL, f"{call}: {type(exc).__name__}: {exc}")
        ) from None


def _reason(exc: BaseException) -> str:
    """Arrow's words for what is wrong with the bytes, cut short."""
    text = str(exc).strip().rstrip(".")
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS] + "…"
