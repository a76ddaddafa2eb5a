"""A query's JSON text and other per-query values are made once per (immutable) query object."""

import dataclasses
import json

from common.query.model import query_from_json
from common.types.interval import Interval, format_instant

DOC = {"queryType": "timeseries", "dataSource": "wiki", "granularity": "all",
       "intervals": ["2015-09-12T00:00:00Z/2015-09-12T00:01:00Z"],
       "aggregations": [{"type": "count", "name": "c"}], "context": {"timeout": 5000}}


def test_json_text_is_the_json_of_the_query_and_made_once():
    query = query_from_json(DOC)
    text = query.json_text()
    assert text == json.dumps(query.to_json())
    assert query_from_json(json.loads(text)) == query
    assert query.json_text() is text  # the same string: not rebuilt


def test_a_replaced_query_gets_its_own_text():
    query = query_from_json(DOC)
    query.json_text()
    other = dataclasses.replace(query, intervals=(Interval.parse("2015-09-13/2015-09-14"),),
                                context={"timeout": 1})
    assert json.loads(other.json_text())["intervals"] == ["2015-09-13T00:00:00.000Z/2015-09-14T00:00:00.000Z"]
    assert json.loads(other.json_text())["context"] == {"timeout": 1}
    assert json.loads(query.json_text())["context"] == {"timeout": 5000}


def test_memo_runs_its_maker_once_per_key():
    query = query_from_json(DOC)
    calls = []
    assert query.memo("k", lambda: calls.append(1) or "v") == "v"
    assert query.memo("k", lambda: calls.append(1) or "w") == "v"
    assert query.memo("other", lambda: 3) == 3
    assert calls == [1]
    assert query == query_from_json(DOC)  # the memo is no part of equality


def test_cached_instant_formatting_takes_numpy_and_float_millis():
    import numpy as np

    assert format_instant(np.int64(1442016000000)) == "2015-09-12T00:00:00.000Z"
    assert format_instant(1442016000000.0) == "2015-09-12T00:00:00.000Z"
    assert format_instant(-(2 ** 62)) == format_instant(-(2 ** 63))  # eternity's start, however far out
