"""DoAction ``watch_collection``: where a collection's change stream is read.

The change stream (``elanus/client/changes.py``) reads the log itself, the collection's
JetStream DML streams, never the proxy, so watching costs writes and searches nothing.
This action only tells a caller allowed to query the collection where that log is: the
NATS servers (without credentials), each vchannel's stream and subjects, the headers
that carry a message's kind and timestamp, and the schema to decode rows with.
"""

from __future__ import annotations

from elanus.channels.dml import (
    H_TS,
    H_TYPE,
    data_subject,
    pchannel_of,
    stream_name,
    tick_subject,
)
from elanus.channels.natsauth import redact_url
from elanus.flight.executors import OpCall
from elanus.flight.registry import operation
from elanus.ops import imports as ops
from elanus.ops.replies import ChannelCoordinates, WatchCoordinates


def _run_watch(c: OpCall[ops.WatchCollection]) -> WatchCoordinates:
    info = c.proxy.dml.collection(c.request.db, c.request.collection)
    servers = redact_url(c.proxy.bus.url)
    assert servers is not None  # a bus always has a url
    channels: list[ChannelCoordinates] = []
    for v in info.vchannels:
        p = pchannel_of(v)
        channels.append(
            {
                "vchannel": v,
                "stream": stream_name(p),
                "data_subject": data_subject(p, v),
                "tick_subject": tick_subject(p),
            }
        )
    return {
        "collection": info.name,
        "collection_id": info.collection_id,
        "schema": info.schema.to_dict(),
        "servers": servers,
        "type_header": H_TYPE,
        "ts_header": H_TS,
        "vchannels": channels,
    }


operation(
    ops.WatchCollection,
    "Where a collection's change stream is read (the client's watch reads the log, not "
    "the proxy). Body: collection. Result: collection, collection_id, schema, servers "
    "(the NATS servers, no credentials), type_header, ts_header, vchannels (each with its "
    "vchannel, stream, data_subject and tick_subject).",
    privilege="Query",
    run=_run_watch,
)
