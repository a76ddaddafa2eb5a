"""Arrow tables <-> a sequence of ``ArrowChunk`` messages, each far below gRPC's message limit.

Each chunk is a self-contained Arrow IPC stream (schema + batches) so a receiver can decode
chunks independently; batches are sliced so one chunk stays under ``MAX_CHUNK_BYTES``. Results
of any size stream without hitting the 4 MiB default limit, and without building one giant
message on either side.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from common.query.partial import RunStats
from services.rpc.gen.strata.v1 import types_pb2

MAX_CHUNK_BYTES = 1 << 20
MAX_BATCH_ROWS = 65_536


# The end-of-stream marker of the Arrow IPC stream format (a continuation token, then length 0).
_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"


def _flat(schema: pa.Schema) -> bool:
    """Whether the schema's columns need no dictionary batches (none is dictionary-encoded,
    at any depth): the stream is then the schema's message and each batch's, as they serialize."""
    return not any(_has_dictionary(f.type) for f in schema)


def _has_dictionary(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return True
    return any(_has_dictionary(t.field(i).type) for i in range(t.num_fields))


def _ipc(schema: pa.Schema, batches: list[pa.RecordBatch]) -> bytes:
    if _flat(schema):
        # A small partial's stream without a writer: about half the time of one (schema message,
        # batch messages, end-of-stream marker: what the writer would produce).
        return b"".join([schema.serialize().to_pybytes(), *(b.serialize().to_pybytes() for b in batches), _EOS])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for b in batches:
            writer.write_batch(b)
    return sink.getvalue().to_pybytes()


def _slices(table: pa.Table) -> Iterator[pa.RecordBatch]:
    for batch in table.to_batches(max_chunksize=MAX_BATCH_ROWS):
        if batch.num_rows == 0:
            continue
        per_row = max(1, batch.nbytes // max(batch.num_rows, 1))
        step = max(1, min(batch.num_rows, MAX_CHUNK_BYTES // per_row))
        for start in range(0, batch.num_rows, step):
            yield batch.slice(start, step)


def stats_to_proto(stats: RunStats) -> types_pb2.QueryStats:
    # Spelled out rather than through RunStats.to_json (its loop over dataclasses.fields).
    return types_pb2.QueryStats(segments=stats.segments, rows_in_segments=stats.rows_in_segments,
                                rows_after_prefilter=stats.rows_after_prefilter, rows_scanned=stats.rows_scanned,
                                rows_matched=stats.rows_matched, bytes_read=stats.bytes_read)


def stats_from_proto(msg: types_pb2.QueryStats) -> RunStats:
    return RunStats(msg.segments, msg.rows_in_segments, msg.rows_after_prefilter, msg.rows_scanned, msg.rows_matched,
                    msg.bytes_read)


def table_to_chunks(table: pa.Table, stats: RunStats | None = None) -> Iterator[types_pb2.ArrowChunk]:
    """Chunks for ``table``; the last carries ``stats``. An empty table still sends its schema."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in _slices(table):
        if pending and size + batch.nbytes > MAX_CHUNK_BYTES:
            yield types_pb2.ArrowChunk(ipc_stream=_ipc(table.schema, pending))
            pending, size = [], 0
        pending.append(batch)
        size += batch.nbytes
    last = types_pb2.ArrowChunk(ipc_stream=_ipc(table.schema, pending), last=True)
    if stats is not None:
        last.stats.CopyFrom(stats_to_proto(stats))
    yield last


def table_to_message(table: pa.Table, stats: RunStats, max_bytes: int) -> types_pb2.ArrowChunk | None:
    """The whole table in one chunk (``last`` set, carrying ``stats``), or None when its Arrow
    data exceeds ``max_bytes`` (stream it with ``table_to_chunks`` instead)."""
    if table.nbytes > max_bytes:
        return None
    return types_pb2.ArrowChunk(ipc_stream=_ipc(table.schema, table.to_batches()), last=True,
                                stats=stats_to_proto(stats))


def chunks_to_table(chunks: Iterable[types_pb2.ArrowChunk]) -> tuple[pa.Table, RunStats]:
    """Reassemble a streamed table; raises if the stream ended before its last chunk."""
    if isinstance(chunks, list) and len(chunks) == 1 and chunks[0].last:  # one message: RunQueryOnce's reply
        return pa.ipc.open_stream(chunks[0].ipc_stream).read_all(), stats_from_proto(chunks[0].stats)
    batches: list[pa.RecordBatch] = []
    schema = None
    stats = RunStats()
    finished = False
    for chunk in chunks:
        reader = pa.ipc.open_stream(pa.py_buffer(chunk.ipc_stream))
        schema = schema or reader.schema
        batches.extend(reader)
        if chunk.last:
            stats = stats_from_proto(chunk.stats)
            finished = True
    if not finished:
        raise ConnectionError("result stream ended before its last chunk")
    return pa.Table.from_batches(batches, schema=schema), stats
