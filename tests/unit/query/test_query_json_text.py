"""A query's JSON text is made once, where the (immutable) query is made; nothing is written into
the query later."""

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


def test_the_text_is_made_with_the_query_and_nothing_is_added_later():
    query = query_from_json(DOC)
    before = dict(query.__dict__)
    query.json_text()
    assert query.__dict__ == before  # asking for the text writes nothing into the frozen query
    assert not hasattr(query, "memo")
    assert query == query_from_json(DOC)  # the text is no part of equality


def test_a_context_json_cannot_hold_fails_where_the_text_is_asked():
    query = dataclasses.replace(query_from_json(DOC), context={"x": object()})
    try:
        query.json_text()
    except TypeError as exc:
        assert "object" in str(exc)
    else:
        raise AssertionError("json_text of a query whose context JSON cannot hold must raise")


def test_cached_instant_formatting_takes_numpy_and_float_millis():
    import numpy as np

    assert format_instant(np.int64(1442016000000)) == "2015-09-12T00:00:00.000Z"
    assert format_instant(1442016000000.0) == "2015-09-12T00:00:00.000Z"
    assert format_instant(-(2 ** 62)) == format_instant(-(2 ** 63))  # eternity's start, however far out
