"""Vectorized time parsing (ingestion's 'auto' format) must agree with parse_instant, the scalar
parser queries use, so a time that ingests is a time a query can name."""

import pyarrow as pa
import pytest

from common.types import parse_instant
from common.types.time_parsing import parse_timestamps

AGREE = [
    "2015-09-12", "2015-09-12T08:30:00Z", "2015-09-12T08:30:00.123Z", "2015-09-12T08:30:00", "2015-09-12 08:30:00",
    "2015-09-12T08:30:00+02:00", "2015-09-12T08:30:00-0530", "2015-09-12T08:30Z", "2015-09-12T08",
    "2015-09-12T08:30:00.5+01:00", "2022-6-14T10:32:08Z", "2022-6-4", "2022-06-4T01:02:03z", " 2015-09-12 ",
    "1442016000000", "-1442016000000", "1969-12-31T23:59:59.999Z",
]


def test_agrees_with_parse_instant():
    got = parse_timestamps(pa.array(AGREE)).to_pylist()
    assert got == [parse_instant(v) for v in AGREE]


def test_unparseable_values_become_null_in_place():
    values = ["2015-09-12", "garbage", None, "123", "2015-02-30", "2015-09-13T00:00:00Z"]
    assert parse_timestamps(pa.array(values)).to_pylist() == [
        parse_instant("2015-09-12"), None, None, None, None, parse_instant("2015-09-13")]


@pytest.mark.parametrize("values,expected", [
    (pa.array([1, -2], pa.int32()), [1, -2]),
    (pa.array([1.9, -2.5]), [1, -2]),
    (pa.array([0, 86_400_000], pa.int64()).cast(pa.timestamp("ms", tz="Asia/Tokyo")), [0, 86_400_000]),
    (pa.array([1], pa.int32()).cast(pa.date32()), [86_400_000]),
    (pa.array(["2015-09-12", "2015-09-12"]).dictionary_encode(), [1442016000000] * 2),
    (pa.chunked_array([["2015-09-12"], ["1442016000001"]]), [1442016000000, 1442016000001]),
])
def test_non_string_inputs(values, expected):
    assert parse_timestamps(values).to_pylist() == expected


@pytest.mark.parametrize("text", ["2015-09-12T08:30:00.123456Z", "2015-09-12T08:30:00.123456789", "2015-09-12 08:30:00.1234"])
def test_sub_millisecond_fractions_truncate(text):
    assert parse_timestamps(pa.array([text])).to_pylist() == [1442046600123]
