"""A historical finds its parse of a request again by the request's bytes without the query id."""

from __future__ import annotations

import json

import pytest

from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType
from common.types.interval import Interval
from services.historical.query_request import RequestCache, content_key, query_id_field
from services.rpc.convert import schema_to_proto, segment_id_to_proto
from services.rpc.gen.strata.v1 import historical_pb2

QUERY = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
         "granularity": "hour", "aggregations": [{"type": "count", "name": "c"}]}
SEGMENTS = [SegmentId("wiki", Interval(d * 86_400_000, (d + 1) * 86_400_000), "v1", 0) for d in range(3)]
SCHEMA = {"__time": ColumnType.parse("TIMESTAMP"), "channel": ColumnType.parse("VARCHAR"),
          "added": ColumnType.parse("BIGINT")}


def _request(query_id: str, query=QUERY, segments=SEGMENTS) -> historical_pb2.RunQueryRequest:
    return historical_pb2.RunQueryRequest(query_json=json.dumps(query), query_id=query_id,
                                          segments=[segment_id_to_proto(s) for s in segments],
                                          schema=schema_to_proto(SCHEMA))


def test_the_query_id_field_is_what_protobuf_writes():
    for query_id in ("q", "é" * 100, "x" * 300):
        assert query_id_field(query_id) == historical_pb2.RunQueryRequest(query_id=query_id).SerializeToString()
    assert query_id_field("") == b""


def test_requests_differing_only_in_query_id_share_a_key():
    a, b = _request("q-1"), _request("q-22")
    assert content_key(a, a.SerializeToString()) == content_key(b, b.SerializeToString())
    # Without the bytes, or with the query id written first, the key is the request written again.
    first = query_id_field("q-3") + _request("").SerializeToString()
    third = historical_pb2.RunQueryRequest.FromString(first)
    assert content_key(third, first) == content_key(a) == content_key(b)


def test_other_segments_or_another_query_have_other_keys():
    base = _request("q")
    others = [_request("q", segments=SEGMENTS[:2]), _request("q", query={**QUERY, "granularity": "day"})]
    for other in others:
        assert content_key(other, other.SerializeToString()) != content_key(base, base.SerializeToString())


def test_the_cache_parses_once_and_keeps_the_request_parts():
    cache = RequestCache(max_entries=2)
    a, b = _request("q-1"), _request("q-2")
    first = cache.get(a, a.SerializeToString())
    assert cache.get(b, b.SerializeToString()) is first and len(cache) == 1
    assert first.wanted == SEGMENTS and first.schema == SCHEMA and first.query.query_type == "timeseries"
    for n in (1, 2):
        other = _request("q", segments=SEGMENTS[:n])
        assert cache.get(other, other.SerializeToString()).wanted == SEGMENTS[:n]
    assert len(cache) == 2  # the oldest went
    assert cache.get(a, a.SerializeToString()) is not first


def test_a_bad_query_raises_and_is_not_kept():
    cache = RequestCache()
    bad = historical_pb2.RunQueryRequest(query_json="{not json", query_id="q")
    with pytest.raises(ValueError):
        cache.get(bad, bad.SerializeToString())
    assert len(cache) == 0


def test_the_cache_is_bounded_in_bytes_and_does_not_keep_large_requests():
    requests = [_request("q", segments=SEGMENTS[:n]) for n in (1, 2, 3)]
    sizes = [len(content_key(r, r.SerializeToString())) for r in requests]
    cache = RequestCache(max_key_bytes=sizes[1], max_bytes=sizes[0] + sizes[1])
    for r in requests:
        assert cache.get(r, r.SerializeToString()).wanted == list(SEGMENTS[:len(r.segments)])
    assert len(cache) == 2  # the third was too large to keep
    big = requests[2]
    assert cache.get(big, big.SerializeToString()) is not cache.get(big, big.SerializeToString())
    cache = RequestCache(max_bytes=sizes[1] + sizes[2])
    for r in requests:
        cache.get(r, r.SerializeToString())
    assert len(cache) == 2  # the first went to keep the keys' bytes within the bound
