"""Random groupBy and timeseries queries over random two-segment tables, against DuckDB.

Covers granularities all/day/hour, numeric and string dimensions (one missing from a segment),
every simple aggregator kind, filtered aggregators, query filters and limitSpecs."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.query import execute
from tests.conftest import duck_connect
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.query.strategies import DAY, INTERVAL, build_case, filters, leaf_filters, tables

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HOUR = 3_600_000
STEP = {"day": DAY, "hour": HOUR}

# name -> (native aggregator without its name, SQL)
AGGS = {
    "count": ({"type": "count"}, "count(*)"),
    "lsum": ({"type": "longSum", "fieldName": "i"}, "sum(i)"),
    "lmin": ({"type": "longMin", "fieldName": "i"}, "min(i)"),
    "lmax": ({"type": "longMax", "fieldName": "i"}, "max(i)"),
    "dsum": ({"type": "doubleSum", "fieldName": "d"}, "sum(d)"),
    "dmin": ({"type": "doubleMin", "fieldName": "d"}, "min(d)"),
    "dmax": ({"type": "doubleMax", "fieldName": "d"}, "max(d)"),
    "lfirst": ({"type": "longFirst", "fieldName": "i"}, "arg_min(i, t) FILTER (WHERE i IS NOT NULL)"),
    "dlast": ({"type": "doubleLast", "fieldName": "d"}, "arg_max(d, t) FILTER (WHERE d IS NOT NULL)"),
    "sfirst": ({"type": "stringFirst", "fieldName": "s"}, "arg_min(s, t) FILTER (WHERE s IS NOT NULL)"),
    "slast": ({"type": "stringLast", "fieldName": "s2"}, "arg_max(s2, t) FILTER (WHERE s2 IS NOT NULL)"),
}


@st.composite
def aggregations(draw):
    names = draw(st.lists(st.sampled_from(sorted(AGGS)), min_size=1, max_size=4, unique=True))
    natives, sqls = [], []
    for n in ["count", *[n for n in names if n != "count"]]:  # count first: it marks empty buckets
        natives.append(dict(AGGS[n][0], name=n))
        sqls.append(AGGS[n][1])
    if draw(st.booleans()):
        f = draw(leaf_filters)
        inner = draw(st.sampled_from(["count", "lsum", "dmax"]))
        natives.append({"type": "filtered", "name": "filt", "filter": f.native,
                        "aggregator": dict(AGGS[inner][0], name="filt")})
        base = AGGS[inner][1]
        sqls.append(base.replace(")", f") FILTER (WHERE {f.sql})", 1))
    return natives, sqls


def _bucket_sql(gran: str) -> str | None:
    return None if gran == "all" else f"t // {STEP[gran]} * {STEP[gran]}"


@pytest.fixture(scope="module")
def con():
    c = duck_connect()
    yield c
    c.close()


def _with_case(con, table, drop_s2, body):
    case = build_case(table, drop_s2, sort_by_s=True)
    try:
        con.register("a", case.table)
        con.execute("CREATE OR REPLACE TEMP VIEW t AS SELECT *, epoch_ms(__time) AS t FROM a")
        body(case)
    finally:
        con.execute("DROP VIEW IF EXISTS t")
        con.unregister("a")
        case.close()


@SETTINGS
@given(table=tables(), drop_s2=st.booleans(), gran=st.sampled_from(["all", "day", "hour"]),
       dims=st.lists(st.sampled_from(["s", "s2", "i", "d"]), max_size=2, unique=True), aggs=aggregations(),
       flt=st.one_of(st.none(), filters), limit=st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(1, 5))))
def test_groupby_matches_duckdb(con, table, drop_s2, gran, dims, aggs, flt, limit):
    natives, sqls = aggs

    def body(case):
        q = {"queryType": "groupBy", "dataSource": "t", "intervals": [INTERVAL], "granularity": gran,
             "dimensions": dims, "aggregations": natives}
        bucket = _bucket_sql(gran)
        keys = ([bucket] if bucket else []) + dims
        order = [f"{k} NULLS FIRST" for k in keys]
        if flt is not None:
            q["filter"] = flt.native
        if limit is not None:
            offset, count = limit
            # Ordered by count, then every key, so the page is deterministic.
            q["limitSpec"] = {"columns": [{"dimension": "count", "direction": "descending"}] +
                              (["__time"] if bucket else []) + dims, "offset": offset, "limit": count}
            order = ["count(*) DESC"] + order
        select = ", ".join(keys + sqls)
        sql = (f"SELECT {select} FROM t {'WHERE ' + flt.sql if flt else ''} "
               f"{'GROUP BY ' + ', '.join(keys) if keys else ''} HAVING count(*) > 0 ORDER BY "
               + (", ".join(order) if order else "1"))
        if limit is not None:
            sql += f" LIMIT {limit[1]} OFFSET {limit[0]}"
        got = engine_rows(execute(q, case.segments).table, (["__time"] if bucket else []) + dims +
                          [a["name"] for a in natives])
        assert_rows_equal(got, duck_rows(con, sql))

    _with_case(con, table, drop_s2, body)


@SETTINGS
@given(table=tables(), drop_s2=st.booleans(), gran=st.sampled_from(["all", "day", "hour"]), aggs=aggregations(),
       flt=st.one_of(st.none(), filters), descending=st.booleans())
def test_timeseries_matches_duckdb(con, table, drop_s2, gran, aggs, flt, descending):
    natives, sqls = aggs

    def body(case):
        q = {"queryType": "timeseries", "dataSource": "t", "intervals": [INTERVAL], "granularity": gran,
             "aggregations": natives, "descending": descending}
        if flt is not None:
            q["filter"] = flt.native
        where = f"WHERE {flt.sql}" if flt else ""
        got = engine_rows(execute(q, case.segments).table, ["__time"] + [a["name"] for a in natives])
        cov_lo = min(s.interval.start for s in case.segments)
        cov_hi = max(s.interval.end for s in case.segments)
        if gran == "all":
            # One row, even when nothing matched, stamped where the data starts.
            want = duck_rows(con, f"SELECT {', '.join(sqls)} FROM t {where}")
            assert [r[0] for r in got] == [cov_lo]
            assert_rows_equal([r[1:] for r in got], want)
            return
        bucket = _bucket_sql(gran)
        want = duck_rows(con, f"SELECT {bucket} AS b, {', '.join(sqls)} FROM t {where} GROUP BY b ORDER BY b "
                              f"{'DESC' if descending else 'ASC'}")
        # Every bucket of the covered days is there; the empty ones count 0 and have null values.
        buckets = list(range(cov_lo, cov_hi, STEP[gran]))
        assert [r[0] for r in got] == (buckets[::-1] if descending else buckets)
        assert_rows_equal([r for r in got if r[1] > 0], want)
        empty = tuple(0 if a["type"] == "filtered" and a["aggregator"]["type"] == "count" else None
                      for a in natives[1:])
        assert all(r[2:] == empty for r in got if r[1] == 0)

    _with_case(con, table, drop_s2, body)



@SETTINGS
@given(table=tables(), drop_s2=st.booleans(), gran=st.sampled_from(["all", "day"]),
       dim=st.sampled_from(["s", "s2", "i", "d"]), metric=st.sampled_from(["count", "lsum", "dmin"]),
       inverted=st.booleans(), threshold=st.integers(1, 4), flt=st.one_of(st.none(), filters))
def test_topn_matches_duckdb(con, table, drop_s2, gran, dim, metric, inverted, threshold, flt):
    def body(case):
        q = {"queryType": "topN", "dataSource": "t", "intervals": [INTERVAL], "granularity": gran,
             "dimension": dim, "threshold": threshold,
             "metric": {"type": "inverted", "metric": metric} if inverted else metric,
             "aggregations": [dict(AGGS[metric][0], name=metric)]}
        if flt is not None:
            q["filter"] = flt.native
        got = engine_rows(execute(q, case.segments).table, (["__time"] if gran != "all" else []) + [dim, metric])
        # Null metrics go last either way; ties break on the dimension, nulls first.
        order = f"m {'ASC' if inverted else 'DESC'} NULLS LAST, {dim} ASC NULLS FIRST"
        bucket = _bucket_sql(gran) or "0"
        want = duck_rows(con, f"""
            SELECT {'b, ' if gran != 'all' else ''}{dim}, m FROM (
              SELECT b, {dim}, m, row_number() OVER (PARTITION BY b ORDER BY {order}) AS rn
              FROM (SELECT {bucket} AS b, {dim}, {AGGS[metric][1]} AS m FROM t
                    {'WHERE ' + flt.sql if flt else ''} GROUP BY ALL))
            WHERE rn <= {threshold} ORDER BY b, rn""")
        assert_rows_equal(got, want)

    _with_case(con, table, drop_s2, body)
