"""Parts are parsed by reading the record batch after a schema message seen before (container
._stream_schema), which must give the same array as opening the stream, for every part type,
and fall back to opening the stream when the schema has dictionary fields."""

import numpy as np
import pyarrow as pa
import pytest

from common.segment.container import _stream_schema, ipc_bytes

ARRAYS = [
    pa.array(np.arange(8192)),
    pa.array(["a", None, "é", "", "\U0001F600"] * 7),
    pa.array([], pa.int8()),
    pa.array([-0.0, float("nan"), None, 1e-310]),
    pa.array([[1, 2], None, []]),
    pa.array([b"x", None], pa.large_binary()),
    pa.array(np.arange(5, dtype=np.uint32)),
    pa.array([1, None], pa.timestamp("ms", tz="UTC")),
]


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: str(a.type))
def test_batch_after_a_known_schema_equals_the_stream(arr):
    buf = ipc_bytes(arr)
    for _ in range(2):  # the second read takes the schema from the memo
        schema, at = _stream_schema(buf)
        assert schema is not None
        got = pa.ipc.read_record_batch(buf.slice(at), schema).column(0)
        want = pa.ipc.open_stream(pa.BufferReader(buf)).read_next_batch().column(0)
        assert got.type == want.type and repr(got.to_pylist()) == repr(want.to_pylist())


def test_dictionary_fields_and_foreign_bytes_open_the_stream():
    assert _stream_schema(ipc_bytes(pa.array(["a", "b", "a"]).dictionary_encode())) == (None, 0)
    assert _stream_schema(pa.py_buffer(b"\x00" * 16)) == (None, 0)
    assert _stream_schema(pa.py_buffer(b"\xff\xff\xff\xff\x10\x00")) == (None, 0)
    assert _stream_schema(pa.py_buffer(b"\xff\xff\xff\xff\xff\xff\x00\x00")) == (None, 0)  # length past the end
