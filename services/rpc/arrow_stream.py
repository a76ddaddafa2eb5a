"""Arrow tables <-> a sequence of ``ArrowChunk`` messages, each far below gRPC's message limit.

Each chunk is a self-contained Arrow IPC stream (schema + batches) so a receiver can decode
chunks independently; batches are sliced so one chunk stays under ``MAX_CHUNK_BYTES``. Results
of any size stream without hitting the 4 MiB default limit, and without building one giant
message on either side.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from common.errors import ValidationError
from common.query.memory_budget import UNLIMITED, MemoryBudget
from common.query.partial import RunStats
from services.rpc.gen.strata.v1 import types_pb2

MAX_CHUNK_BYTES = 1 << 20
MAX_BATCH_ROWS = 65_536
# The largest chunk a peer takes in (services/grpc_server.MAX_MESSAGE_BYTES, less room for the
# IPC framing and the message's own fields). Rows are never split, so one row over it cannot go.
MAX_SENDABLE_BYTES = (64 << 20) - (64 << 10)


class RowTooLargeError(ValidationError):
    """Rows of a result too large for one message (a row is never split across chunks). The
    user's to fix, as a memory limit is: it is the same on every replica, so it is never retried
    (the broker retries RESOURCE_EXHAUSTED, a historical's stream limit, hence not the LIMIT kind)."""


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
            yield from _within_chunk(batch.slice(start, step))


def _within_chunk(piece: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """``piece`` halved until each part is one chunk's size or one row: a few rows far over the
    average get slices of their own, while the usual slice (about one chunk, perhaps a little
    over by its offsets and bitmaps) stays whole rather than going out a row at a time."""
    if piece.num_rows <= 1 or piece.nbytes <= 2 * MAX_CHUNK_BYTES:
        yield piece
        return
    half = piece.num_rows // 2
    yield from _within_chunk(piece.slice(0, half))
    yield from _within_chunk(piece.slice(half))


def stats_to_proto(stats: RunStats) -> types_pb2.QueryStats:
    # Spelled out rather than through RunStats.to_json (its loop over dataclasses.fields).
    return types_pb2.QueryStats(segments=stats.segments, rows_in_segments=stats.rows_in_segments,
                                rows_after_prefilter=stats.rows_after_prefilter, rows_scanned=stats.rows_scanned,
                                rows_matched=stats.rows_matched, bytes_read=stats.bytes_read)


def stats_from_proto(msg: types_pb2.QueryStats) -> RunStats:
    return RunStats(msg.segments, msg.rows_in_segments, msg.rows_after_prefilter, msg.rows_scanned, msg.rows_matched,
                    msg.bytes_read)


def _widest(batch: pa.RecordBatch) -> str:
    name, column = max(zip(batch.schema.names, batch.columns), key=lambda nc: nc[1].nbytes)
    return f"column '{name}' holds {column.nbytes:,} bytes of them"


def _check_sendable(batch: pa.RecordBatch, budget: MemoryBudget, max_bytes: int) -> None:
    """Refuse a slice whose serialized copy would pass the query's memory limit (it is held next
    to the partial while it goes), or that is larger than one message even when it is one row."""
    if batch.nbytes <= MAX_CHUNK_BYTES:
        return  # the usual slice: nothing to refuse, no message to build
    rows = f"{batch.num_rows:,} row{'s' if batch.num_rows != 1 else ''}"
    budget.check(batch.nbytes, f"serializing {rows} of {batch.nbytes:,} bytes to send them ({_widest(batch)})")
    if batch.nbytes > max_bytes:
        raise RowTooLargeError(
            f"a result row of {batch.nbytes:,} bytes ({_widest(batch)}) is larger than the {max_bytes:,} bytes "
            f"one message between strata nodes carries; select less of it (e.g. LEFT(value, n)) or filter it out")


def table_to_chunks(table: pa.Table, stats: RunStats | None = None, budget: MemoryBudget = UNLIMITED,
                    max_bytes: int = MAX_SENDABLE_BYTES) -> Iterator[types_pb2.ArrowChunk]:
    """Chunks for ``table``; the last carries ``stats``. An empty table still sends its schema.
    A slice over the query's ``budget`` or over ``max_bytes`` raises (a StrataError of its kind)."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in _slices(table):
        _check_sendable(batch, budget, max_bytes)
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
