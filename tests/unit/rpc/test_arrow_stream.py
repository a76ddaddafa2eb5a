"""Partials as RunQueryOnce's one message and as chunks: every column kind comes back as sent."""

from __future__ import annotations

import pyarrow as pa
import pytest

from common.errors import ErrorKind
from common.query.memory_budget import MemoryBudget, MemoryLimitError, table_bytes
from common.query.partial import RunStats
from services.rpc.arrow_stream import RowTooLargeError, chunks_to_table, table_to_chunks, table_to_message

STATS = RunStats(7, 1_000_000, 900, 8_000, 7_000, 5_000)

TABLES = {
    "flat": pa.table({"__time": pa.array([0, 3_600_000, None], pa.timestamp("ms", "UTC")),
                      "c": pa.array([1, 2, 3], pa.int64()), "s": pa.array([0.5, -0.0, 1e300]),
                      "u": pa.array([b"\x00\x01", b"", None], pa.binary())}),
    "dictionary": pa.table({"k": pa.array(["a", "b", "a", None]).dictionary_encode(), "n": [1, 2, 3, 4]}),
    "dictionary in a list": pa.table({"l": pa.array([["x", "y"], [], None, ["x"]], pa.list_(
        pa.dictionary(pa.int32(), pa.string())))}),
    "nested": pa.table({"l": pa.array([[1, None], [], None]), "st": pa.array([{"a": "x"}, None, {"a": None}])}),
    "empty": pa.table({"c": pa.array([], pa.int64()), "s": pa.array([], pa.string())}),
    "no columns": pa.table({}),
    "several batches": pa.concat_tables([pa.table({"c": [1, 2]}), pa.table({"c": [3]})]),
    "metadata": pa.table({"c": [1]}).replace_schema_metadata({"k": "v"}),
}


@pytest.mark.parametrize("name", TABLES)
def test_one_message_and_chunks_give_back_the_table_and_stats(name):
    table = TABLES[name]
    got, stats = chunks_to_table([table_to_message(table, STATS, 1 << 22)])
    assert got.equals(table) and got.schema.equals(table.schema, check_metadata=True)
    assert stats == STATS
    got, stats = chunks_to_table(list(table_to_chunks(table, STATS)))
    assert got.equals(table) and stats == STATS


def test_a_table_over_the_limit_is_not_one_message():
    assert table_to_message(TABLES["flat"], STATS, 8) is None


def test_a_stream_without_its_last_chunk_is_an_error():
    chunk = table_to_message(TABLES["flat"], STATS, 1 << 22)
    chunk.last = False
    with pytest.raises(ConnectionError, match="before its last chunk"):
        chunks_to_table([chunk])


def _skewed() -> pa.Table:
    """Many small rows and one of 3 MiB: sliced by the average row, a slice would hold it and more."""
    values = ["s"] * 5_000
    values[2_500] = "x" * (3 << 20)
    return pa.table({"id": pa.array(range(5_000), pa.int64()), "v": values})


def test_a_row_far_over_the_average_goes_alone_and_comes_back():
    table = _skewed()
    chunks = list(table_to_chunks(table, STATS))
    assert max(len(c.ipc_stream) for c in chunks) < (3 << 20) + (64 << 10)  # the big row's chunk: it alone
    got, _ = chunks_to_table(chunks)
    assert got.equals(table)


def test_a_row_larger_than_one_message_is_the_users_error_naming_its_size_and_column():
    with pytest.raises(RowTooLargeError) as caught:
        list(table_to_chunks(_skewed(), STATS, max_bytes=2 << 20))
    message = str(caught.value)
    assert "result row of 3,145,7" in message and "column 'v'" in message and "2,097,152 bytes" in message
    assert caught.value.kind is ErrorKind.USER  # never retried on another replica


def test_sending_a_slice_over_the_querys_memory_limit_is_refused_with_the_limit_and_query():
    table = _skewed()
    budget = MemoryBudget(4 << 20, "q-1", "historical h1", node_limit=8 << 20)
    budget.charge(table_bytes(table), "the scanned rows")  # as the scan charged them
    with pytest.raises(MemoryLimitError) as caught:
        list(table_to_chunks(table, STATS, budget))
    message = str(caught.value)
    assert "query q-1" in message and "historical h1" in message and "serializing 1 row" in message
    assert "column 'v'" in message and "maxBytesInMemory" in message
    # Within the limit the same table goes, and nothing stays charged for what was sent.
    roomy = MemoryBudget(64 << 20, "q-2", "historical h1")
    roomy.charge(table_bytes(table), "the scanned rows")
    assert chunks_to_table(list(table_to_chunks(table, STATS, roomy)))[0].equals(table)
    assert roomy.used == table_bytes(table)
