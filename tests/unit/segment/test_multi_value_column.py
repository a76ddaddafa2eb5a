"""Multi-value string columns (encoding ``multiValue``): each handling mode keeps a row's values
as Druid does, a row without values reads as null, the index matches a row by any of its values
(ids from the sorted dictionary, rows from the stored bitmaps), the manifest names the feature
and the type, and damaged parts or an unknown handling are refused with the column named."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap

from common.errors import SegmentCorruptError
from common.segment import Segment, SegmentId, build_segment
from common.segment.column_reader import ColumnIndex, ColumnReader, IdRun
from common.segment.encoding import encoding_for, lookup_encoding
from common.segment.multi_value_column import MultiValueColumn, apply_handling
from common.types import Interval, parse_instant
from common.types.column_type import MULTI_VALUE_STRING, STRING_ARRAY, ColumnType
from tests.unit.segment.test_corruption import rewrite_manifest

T0 = parse_instant("2020-01-01")
SID = SegmentId("ds", Interval.of("2020-01-01/2020-01-02"), "v1", 0)
ROWS = [["b", "a", "b"], [], None, ["c", None], ["a"], ["é", "", "ключ"], [None, None]]


def _build(tmp_path, values, options=None, name="mv.sseg", compression="default") -> Segment:
    table = pa.table({"__time": pa.array([T0] * len(values), pa.int64()),
                      "tags": pa.array(values, pa.list_(pa.string()))})
    path = str(tmp_path / name)
    kwargs = {} if compression == "default" else {"compression": None}
    build_segment(table, path, SID, column_types={"tags": MULTI_VALUE_STRING},
                  column_options={"tags": options or {}}, **kwargs)
    return Segment.open(path, verify=True)


def test_type_is_varchar_to_sql_and_an_array_of_strings_underneath():
    assert MULTI_VALUE_STRING.sql_name == "VARCHAR"
    assert MULTI_VALUE_STRING.to_arrow() == pa.list_(pa.string())
    assert ColumnType.parse(MULTI_VALUE_STRING.native_name) == MULTI_VALUE_STRING
    assert MULTI_VALUE_STRING != STRING_ARRAY and MULTI_VALUE_STRING.is_array
    assert encoding_for(MULTI_VALUE_STRING).name == "multiValue"
    assert lookup_encoding("multiValue").feature == "multiValueStrings"


@pytest.mark.parametrize("mode,want", [
    ("SORTED_ARRAY", [["a", "b", "b"], None, None, [None, "c"], ["a"], ["", "é", "ключ"], [None, None]]),
    ("SORTED_SET", [["a", "b"], None, None, [None, "c"], ["a"], ["", "é", "ключ"], [None]]),
    ("ARRAY", [["b", "a", "b"], None, None, ["c", None], ["a"], ["é", "", "ключ"], [None, None]]),
])
@pytest.mark.parametrize("compression", ["default", None])
def test_handling_modes_round_trip(tmp_path, mode, want, compression):
    seg = _build(tmp_path, ROWS, {"multiValueHandling": mode}, compression=compression)
    column = seg.column("tags")
    assert isinstance(column, MultiValueColumn) and isinstance(column, ColumnReader)
    assert column.values().to_pylist() == want
    assert column.take(np.array([5, 0, 5])).to_pylist() == [want[5], want[0], want[5]]
    assert seg.schema["tags"] == MULTI_VALUE_STRING
    manifest = json.loads(seg.manifest.to_bytes())
    assert "multiValueStrings" in manifest["requiredFeatures"]
    assert seg.manifest.column("tags").spec.to_json()["multiValueHandling"] == mode


def test_default_handling_is_sorted_array(tmp_path):
    seg = _build(tmp_path, [["z", "a"]])
    assert seg.column("tags").values().to_pylist() == [["a", "z"]]
    assert seg.manifest.column("tags").spec.to_json()["multiValueHandling"] == "SORTED_ARRAY"


def test_single_strings_are_one_value_rows():
    assert apply_handling(pa.array(["x", None, ""])).to_pylist() == [["x"], None, [""]]


def test_index_matches_a_row_by_any_value(tmp_path):
    seg = _build(tmp_path, ROWS)
    idx = seg.column("tags").index()
    assert isinstance(idx, ColumnIndex)
    assert idx.dictionary.to_pylist() == ["", "a", "b", "c", "é", "ключ"]
    assert idx.bitmap(idx.lookup("a")) == BitMap([0, 4])
    assert idx.bitmap(idx.lookup("b")) == BitMap([0])  # a repeated value names its row once
    assert len(idx.lookup("nope")) == 0 and idx.bitmap(idx.lookup("nope")) == BitMap()
    assert idx.bitmap(idx.range("b", None, False, False)) == BitMap([0, 3, 5])
    assert idx.bitmap(idx.range("a", "c", True, True)) == BitMap([0])
    assert idx.prefix("") == IdRun(0, 6) and idx.bitmap(idx.prefix("к")) == BitMap([5])
    # Null: rows without values (an empty list, a null) and rows holding a null value.
    assert idx.null_bitmap() == BitMap([1, 2, 3, 6])
    elements = seg.column("tags").element_index()
    assert elements.rows_with("c") == BitMap([3]) and elements.null_bitmap() == BitMap([1, 2])


def test_index_agrees_with_values_on_random_rows(tmp_path):
    rng = random.Random(7)
    words = [f"w{i}" for i in range(40)]
    rows = [None if rng.random() < 0.1 else [rng.choice(words + [None]) for _ in range(rng.randint(0, 8))]
            for _ in range(3000)]
    seg = _build(tmp_path, rows, {"multiValueHandling": "ARRAY"})
    idx = seg.column("tags").index()
    for w in words[:10]:
        want = BitMap(i for i, r in enumerate(rows) if r and w in r)
        assert idx.bitmap(idx.lookup(w)) == want
    want_null = BitMap(i for i, r in enumerate(rows) if not r or None in r)
    assert idx.null_bitmap() == want_null
    all_ids = np.arange(idx.cardinality)
    assert idx.bitmap(all_ids) == BitMap(i for i, r in enumerate(rows) if r and any(v is not None for v in r))


def test_unknown_handling_is_refused(tmp_path):
    with pytest.raises(ValueError, match="multiValueHandling must be one of SORTED_ARRAY, SORTED_SET, ARRAY"):
        _build(tmp_path, ROWS, {"multiValueHandling": "UNIQUE"})


def test_ids_past_the_dictionary_are_corrupt(tmp_path):
    _build(tmp_path, ROWS, compression=None).close()
    path = str(tmp_path / "mv.sseg")

    def shrink(obj):
        for c in obj["columns"]:
            if c["name"] == "tags":
                c["stats"]["cardinality"] = 2
    bad = Segment.open(rewrite_manifest(path, shrink))
    with pytest.raises(SegmentCorruptError, match="multi-value column 'tags'"):
        bad.column("tags").values()
