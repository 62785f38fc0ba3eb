"""Uploads: a client's file carried into the server's import area over a DoPut stream.

``elanus import`` and ``Client.bulk_import`` use it for a file the server cannot read
itself (outside the import roots, or on another machine), then import the path the upload
answers. The descriptor is the JSON command ``{"op": "upload", "collection", "name"}``; the
stream's batches have one binary column whose values, in order, are the file's bytes. The
file is written to ``<storage>/import/uploads/<id>/<name>`` through the storage interface
(``elanus/objstore.py``), local or an object store, so a data node on another machine reads
it: locally under a temporary name renamed when the stream ends, on S3 as one multipart
upload that appears when it completes; the path is answered only then, so an import never
reads half an upload (a failed stream removes the upload's directory). The one PutResult's
``app_metadata`` is JSON ``{"upload_id", "path", "bytes"}``. The stream is capped by
``max_put_bytes``. The coord removes an upload when the job that imported it ends, and
expires one no job took (``meta/importfiles.py``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.flight as flight

from elanus import layout, objstore
from elanus.errors import ElanusError, ErrorCode, invalid
from elanus.filenames import file_format, is_numpy
from elanus.flight.putcommand import UploadCommand
from elanus.importroots import safe_upload_name, upload_area
from elanus.ops.replies import Uploaded
from elanus.settings import Settings


def receive_upload(
    settings: Settings,
    request: UploadCommand,
    chunks: Iterable[flight.FlightStreamChunk],
    writer: flight.FlightMetadataWriter,
) -> Uploaded:
    """Write the stream to a new upload directory; answer (and return) where it is."""
    name = safe_upload_name(request["name"])
    if not is_numpy(name):
        file_format(name)  # refuses a type no import reads, before any byte is stored
    upload_id = uuid.uuid4().hex
    directory = layout.join(upload_area(settings), upload_id)
    final = layout.join(directory, name)
    limit = settings.max_put_bytes
    total = 0

    def received() -> Iterator[pa.Buffer]:
        nonlocal total
        for chunk in chunks:
            batch = chunk.data
            if batch is None or not batch.num_rows:
                continue
            for value in _bytes_column(batch):
                if not value.is_valid:
                    raise invalid("upload: a chunk of the file is null")
                data = value.as_buffer()
                total += data.size
                if total > limit:
                    raise ElanusError(
                        ErrorCode.REQUEST_TOO_LARGE,
                        f"upload of {name!r} passed {limit} bytes (max_put_bytes)",
                    )
                yield data

    try:
        objstore.write_stream(final, received())
    except BaseException:
        objstore.remove_tree(directory)
        raise
    reply: Uploaded = {"upload_id": upload_id, "path": final, "bytes": total}
    writer.write(pa.py_buffer(json.dumps(reply).encode()))
    return reply


def _bytes_column(batch: pa.RecordBatch) -> pa.Array:
    if batch.num_columns != 1 or not (
        pa.types.is_binary(batch.schema.types[0]) or pa.types.is_large_binary(batch.schema.types[0])
    ):
        raise invalid(
            "upload: each batch must have exactly one binary column holding the file's bytes, "
            f"got {batch.num_columns} column(s) of {', '.join(map(str, batch.schema.types))}"
        )
    return batch.column(0)
