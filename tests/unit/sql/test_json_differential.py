"""JSON functions in SQL against DuckDB's JSON functions, on generated documents that are mean on
purpose: mixed types per path, nulls and missing paths, arrays, unicode keys, keys with dots and
quotes, -0.0, big integers, deep nesting. Strata reads them from a nested column (field columns);
DuckDB parses the same text."""

from __future__ import annotations

import json
import math
import random

import pyarrow as pa
import pytest

from common.query import execute
from common.query.engine import union_schema
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql
from common.types.column_type import JSON
from common.types.interval import Interval
from tests.conftest import duck_connect
from tests.unit.sql.fake_catalog import FakeCatalog

KEYS = ["a", "b", "ключ", "x.y", "it's"]


def doc(rng: random.Random, depth: int = 0):
    if depth > 3 or rng.random() < 0.25:
        return rng.choice([None, 0, -0.0, 1, -7, 2.5, 1e300, 2**62, "", "s", "é", True, False])
    if rng.random() < 0.25:
        return [doc(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {k: doc(rng, depth + 1) for k in rng.sample(KEYS, rng.randint(0, 4))}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    rng = random.Random(11)
    docs = []
    for i in range(300):
        d = {"id": i, "a": doc(rng), "b": {"c": rng.choice([1, "1", 1.5, None, [1, 2]]), "d": doc(rng)},
             "deep": {"l1": {"l2": {"l3": rng.choice(["p", "q", None])}}}}
        if rng.random() < 0.1:
            d.pop("b")
        docs.append(None if rng.random() < 0.05 else d)
    texts = [None if d is None else json.dumps(d) for d in docs]
    table = pa.table({"__time": pa.array([1577836800000 + i for i in range(len(docs))], pa.int64()),
                      "j": pa.array(texts, pa.string())})
    path = str(tmp_path_factory.mktemp("jd") / "j.sseg")
    build_segment(table, path, SegmentId("t", Interval.of("2020-01-01/2020-01-02"), "v1", 0), column_types={"j": JSON})
    segments = [Segment.open(path)]
    catalog = FakeCatalog({"t": union_schema(segments)})
    con = duck_connect()
    con.execute("CREATE TABLE t (j JSON)")
    con.executemany("INSERT INTO t VALUES (?)", [[t] for t in texts])
    yield catalog, segments, con
    con.close()


def strata(env, sql):
    catalog, segments, _ = env
    return execute_sql(sql, catalog, lambda q: execute(q, segments).table).to_pylist()


def duck(env, sql):
    con = env[2]
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


@pytest.mark.parametrize("path", ["$.id", "$.b.c", "$.deep.l1.l2.l3", "$.a", "$.b.d"])
def test_group_by_a_path_as_text(env, path):
    got = strata(env, f"SELECT JSON_VALUE(j, '{path}') AS v, COUNT(*) AS n FROM t GROUP BY 1")
    # DuckDB's json_extract_string gives text for objects and arrays too; JSON_VALUE gives NULL.
    want = duck(env, f"SELECT CASE WHEN json_type(j, '{path}') IN ('OBJECT', 'ARRAY') THEN NULL "
                     f"ELSE json_extract_string(j, '{path}') END AS v, COUNT(*) AS n FROM t GROUP BY 1")

    def norm(rows):
        out = {}
        for r in rows:
            v = r["v"]
            if v is not None:
                try:
                    num = float(v)
                    v = "true" if v == "true" else v
                    v = ("num", num) if v not in ("true", "false") else ("bool", v)
                except ValueError:
                    v = ("str", v)
            out[v] = out.get(v, 0) + r["n"]
        return out

    assert norm(got) == norm(_bools_as_numbers(want))


def _bools_as_numbers(rows):
    # Nested columns store booleans as LONG 1/0, as Druid does.
    return [{**r, "v": {"true": "1", "false": "0"}.get(r["v"], r["v"])} for r in rows]


def test_numeric_sums_and_filters(env):
    got = strata(env, "SELECT SUM(JSON_VALUE(j, '$.id' RETURNING BIGINT)) AS s, "
                      "COUNT(*) AS n FROM t WHERE JSON_VALUE(j, '$.deep.l1.l2.l3') = 'p'")
    want = duck(env, "SELECT SUM(CAST(json_extract(j, '$.id') AS BIGINT)) AS s, COUNT(*) AS n FROM t "
                     "WHERE json_extract_string(j, '$.deep.l1.l2.l3') = 'p'")
    assert got == want


def test_json_query_and_keys(env):
    got = strata(env, "SELECT JSON_VALUE(j, '$.id' RETURNING BIGINT) AS id, JSON_QUERY(j, '$.b') AS b, "
                      "JSON_KEYS(j, '$.b') AS k FROM t")
    want = duck(env, "SELECT CAST(json_extract(j, '$.id') AS BIGINT) AS id, json_extract(j, '$.b') AS b, "
                     "json_keys(j, '$.b') AS k FROM t")
    by_id = {r["id"]: r for r in want}
    for r in got:
        if r["id"] is None:
            continue
        w = by_id[r["id"]]
        assert (None if r["b"] is None else json.loads(r["b"])) == _floats(None if w["b"] is None else json.loads(w["b"]))
        if r["k"] is not None:
            assert r["k"] == w["k"]


def _floats(v):
    if isinstance(v, dict):
        return {k: _floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_floats(x) for x in v]
    if isinstance(v, float) and math.isinf(v):
        return v
    return v


def test_paths_and_round_trips(env):
    got = strata(env, "SELECT TO_JSON_STRING(j) AS s, JSON_PATHS(j) AS p FROM t")
    texts = [r[0] for r in env[2].execute("SELECT j FROM t").fetchall()]
    def canon(text):
        return json.dumps(json.loads(text), sort_keys=True)

    assert sorted(canon(r["s"]) for r in got if r["s"]) == \
        sorted(canon(t) for t in texts if t is not None and json.loads(t) is not None)
    assert all("$.id" in r["p"] for r in got if r["s"] is not None)
    assert all(r["p"] == ["$"] for r in got if r["s"] is None)  # a null document is one literal, as in Druid
