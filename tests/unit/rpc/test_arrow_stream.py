"""Partials as RunQueryOnce's one message and as chunks: every column kind comes back as sent."""

from __future__ import annotations

import pyarrow as pa
import pytest

from common.query.partial import RunStats
from services.rpc.arrow_stream import chunks_to_table, table_to_chunks, table_to_message

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
