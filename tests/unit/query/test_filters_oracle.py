"""Every filter type against DuckDB: each case is a native filter and the SQL WHERE clause that
means the same thing; both must select exactly the same rows (compared by row id). The data has
nulls in strings and numbers and a column missing from one segment, so SQL's three-valued logic
is exercised, notably under NOT."""

import pytest

from tests.unit.query.oracle import run_events


def eq(col, value, vtype=None):
    out = {"type": "equals", "column": col, "matchValue": value}
    if vtype:
        out["matchValueType"] = vtype
    return out


def rng(col, lower=None, upper=None, lo_open=False, up_open=False, vtype=None):
    out = {"type": "range", "column": col, "lowerOpen": lo_open, "upperOpen": up_open}
    if lower is not None:
        out["lower"] = lower
    if upper is not None:
        out["upper"] = upper
    if vtype:
        out["matchValueType"] = vtype
    return out


def bound(col, lower=None, upper=None, lo_strict=False, up_strict=False, ordering=None):
    out = {"type": "bound", "dimension": col, "lowerStrict": lo_strict, "upperStrict": up_strict}
    if lower is not None:
        out["lower"] = lower
    if upper is not None:
        out["upper"] = upper
    if ordering:
        out["ordering"] = ordering
    return out


def like(col, pattern, escape=None):
    out = {"type": "like", "dimension": col, "pattern": pattern}
    if escape:
        out["escape"] = escape
    return out


def not_(f):
    return {"type": "not", "field": f}


def and_(*fs):
    return {"type": "and", "fields": list(fs)}


def or_(*fs):
    return {"type": "or", "fields": list(fs)}


def null(col):
    return {"type": "null", "column": col}


def in_(col, values):
    return {"type": "in", "dimension": col, "values": values}


T_DAY2 = 1577923200000  # 2020-01-02T00:00:00Z

CASES = {
    # equals / selector
    "eq-string": (eq("channel", "#en.wikipedia"), "channel = '#en.wikipedia'"),
    "eq-empty-string": (eq("channel", ""), "channel = ''"),
    "eq-unicode": (eq("channel", "é漢字"), "channel = 'é漢字'"),
    "eq-absent-value": (eq("channel", "#xx"), "channel = '#xx'"),
    "eq-long": (eq("added", 500, "LONG"), "added = 500"),
    "eq-long-inferred": (eq("small", 3), "small = 3"),
    "eq-long-as-string": (eq("small", "3"), "small = 3"),
    "eq-double": (eq("price", 98.31, "DOUBLE"), "price = 98.31"),
    "eq-float": (eq("score", 0.25, "DOUBLE"), "score = 0.25"),
    "eq-string-numeric-match": (eq("code", 10, "LONG"), "TRY_CAST(code AS DOUBLE) = 10"),
    "eq-string-numeric-match-decimal": (eq("code", -3.5, "DOUBLE"), "TRY_CAST(code AS DOUBLE) = -3.5"),
    "eq-time-iso": (eq("__time", "2020-01-02T00:00:51.284Z"), "t = 1577923251284"),
    "eq-time-millis": (eq("__time", 1577923253780, "LONG"), "t = 1577923253780"),
    "selector": ({"type": "selector", "dimension": "page", "value": "Main_Page"}, "page = 'Main_Page'"),
    "selector-null": ({"type": "selector", "dimension": "page", "value": None}, "page IS NULL"),
    "eq-missing-in-one-segment": (eq("country", "US"), "country = 'US'"),
    "eq-metro-missing-in-one-segment": (eq("metro", 510, "LONG"), "metro = 510"),
    # in
    "in-strings": (in_("channel", ["#en.wikipedia", "#fr.wikipedia", "nope"]),
                   "channel IN ('#en.wikipedia', '#fr.wikipedia', 'nope')"),
    "in-empty-list": (in_("channel", []), "FALSE"),
    "in-longs": (in_("small", [1, 3]), "small IN (1, 3)"),
    "in-longs-as-strings": (in_("small", ["1", "3"]), "small IN (1, 3)"),
    "in-longs-with-null": (in_("small", [1, None]), "small = 1 OR small IS NULL"),
    "in-doubles": (in_("price", [98.31, 61.66, 1.0]), "price IN (98.31, 61.66, 1.0)"),
    "in-country": (in_("country", ["US", "FR"]), "country IN ('US', 'FR')"),
    # range / bound, strings
    "range-str-closed": (rng("channel", "#de.wikipedia", "#fr.wikipedia"),
                         "channel >= '#de.wikipedia' AND channel <= '#fr.wikipedia'"),
    "range-str-open": (rng("channel", "#de.wikipedia", "#fr.wikipedia", True, True),
                       "channel > '#de.wikipedia' AND channel < '#fr.wikipedia'"),
    "range-str-lower-only": (rng("channel", "#fr", None, True), "channel > '#fr'"),
    "range-str-upper-only": (rng("channel", None, "#en.wikipedia", False, True), "channel < '#en.wikipedia'"),
    "range-str-empty-lower": (rng("channel", "", None), "channel >= ''"),
    "range-str-unbounded": (rng("channel"), "channel IS NOT NULL"),
    "bound-str": (bound("page", "Main", "Talk", False, True), "page >= 'Main' AND page < 'Talk'"),
    "bound-str-strict": (bound("page", "50 off", "Main_Page", True, False),
                         "page > '50 off' AND page <= 'Main_Page'"),
    # range / bound, numbers
    "range-long-closed": (rng("added", 100, 200, vtype="LONG"), "added BETWEEN 100 AND 200"),
    "range-long-open": (rng("added", 100, 200, True, True, "LONG"), "added > 100 AND added < 200"),
    "range-long-half": (rng("delta", None, 0, False, True, "LONG"), "delta < 0"),
    "range-long-fractional-bounds": (rng("added", 99.5, 200.5, vtype="DOUBLE"), "added >= 99.5 AND added <= 200.5"),
    "range-double": (rng("price", 10.25, 20.75, True, False, "DOUBLE"), "price > 10.25 AND price <= 20.75"),
    "range-float": (rng("score", 0.5, 1.5, vtype="DOUBLE"), "score BETWEEN 0.5 AND 1.5"),
    "range-time": (rng("__time", "2020-01-02T00:00:00Z", "2020-01-02T12:00:00Z", False, True),
                   f"t >= {T_DAY2} AND t < {T_DAY2 + 43_200_000}"),
    "bound-numeric-on-long": (bound("added", "100", "200", True, False, "numeric"), "added > 100 AND added <= 200"),
    "bound-numeric-on-string": (bound("code", "-4", "5", ordering="numeric"),
                                "TRY_CAST(code AS DOUBLE) BETWEEN -4 AND 5"),
    "bound-lexicographic-on-string": (bound("code", "-4", "5"), "code BETWEEN '-4' AND '5'"),
    "range-metro-missing": (rng("metro", 505, 510, vtype="LONG"), "metro BETWEEN 505 AND 510"),
    # Many matching dictionary ids: the index reads codes instead of unioning bitmaps.
    "range-many-ids": (rng("user", "user02000", "user05000", False, True), "\"user\" >= 'user02000' AND \"user\" < 'user05000'"),
    "not-range-many-ids": (not_(rng("user", "user02000", "user05000")), "NOT (\"user\" BETWEEN 'user02000' AND 'user05000')"),
    "like-prefix-many-ids": (like("user", "user01%"), "\"user\" LIKE 'user01%'"),
    "like-inner-many-ids": (like("user", "user%1_3"), "\"user\" LIKE 'user%1_3'"),
    "in-many-values": (in_("user", [f"user{k:05d}" for k in range(0, 10_000, 37)]),
                       "\"user\" IN (SELECT printf('user%05d', k) FROM range(0, 10000, 37) r(k))"),
    "regex-many-ids": ({"type": "regex", "dimension": "user", "pattern": "^user0[0-4]"},
                       "regexp_matches(\"user\", '^user0[0-4]')"),
    # like / regex
    "like-prefix": (like("page", "Main%"), "page LIKE 'Main%'"),
    "like-prefix-underscore-is-wildcard": (like("page", "Main_P%"), "page LIKE 'Main_P%'"),
    "like-inner": (like("page", "%a_b%"), "page LIKE '%a_b%'"),
    "like-suffix": (like("page", "%off"), "page LIKE '%off'"),
    "like-exact": (like("page", "ab"), "page LIKE 'ab'"),
    "like-everything": (like("page", "%"), "page LIKE '%'"),
    "like-escape-percent": (like("page", "50!%%", "!"), "page LIKE '50!%%' ESCAPE '!'"),
    "like-escape-underscore": (like("page", "%!_%", "!"), "page LIKE '%!_%' ESCAPE '!'"),
    "like-backslash-escape": (like("page", "a\\_b", "\\"), "page LIKE 'a\\_b' ESCAPE '\\'"),
    "like-unicode": (like("channel", "é%"), "channel LIKE 'é%'"),
    "like-on-long": (like("added", "1%"), "CAST(added AS VARCHAR) LIKE '1%'"),
    "regex-anchored": ({"type": "regex", "dimension": "page", "pattern": "^Main"}, "regexp_matches(page, '^Main')"),
    "regex-unanchored": ({"type": "regex", "dimension": "page", "pattern": "a.b"}, "regexp_matches(page, 'a.b')"),
    "regex-class": ({"type": "regex", "dimension": "code", "pattern": "^-?[0-9]+$"},
                    "regexp_matches(code, '^-?[0-9]+$')"),
    # null
    "null-string": (null("channel"), "channel IS NULL"),
    "null-long": (null("added"), "added IS NULL"),
    "null-double": (null("price"), "price IS NULL"),
    "null-float": (null("score"), "score IS NULL"),
    "null-missing-column-in-a-segment": (null("country"), "country IS NULL"),
    "null-missing-long-in-a-segment": (null("metro"), "metro IS NULL"),
    "true": ({"type": "true"}, "TRUE"),
    "false": ({"type": "false"}, "FALSE"),
    # NOT and three-valued logic: NOT of an unknown comparison is still unknown.
    "not-eq-string": (not_(eq("channel", "#en.wikipedia")), "NOT (channel = '#en.wikipedia')"),
    "not-eq-long": (not_(eq("small", 1)), "NOT (small = 1)"),
    "not-eq-double": (not_(eq("price", 98.31, "DOUBLE")), "NOT (price = 98.31)"),
    "not-in-strings": (not_(in_("channel", ["#en.wikipedia", ""])), "NOT (channel IN ('#en.wikipedia', ''))"),
    "not-in-longs-with-null": (not_(in_("small", [1, None])), "NOT (small = 1 OR small IS NULL)"),
    "not-range-str": (not_(rng("channel", "#de", "#g")), "NOT (channel BETWEEN '#de' AND '#g')"),
    "not-range-long": (not_(rng("added", 100, 900, vtype="LONG")), "NOT (added BETWEEN 100 AND 900)"),
    "not-like": (not_(like("page", "Main%")), "NOT (page LIKE 'Main%')"),
    "not-regex": (not_({"type": "regex", "dimension": "page", "pattern": "off$"}),
                  "NOT regexp_matches(page, 'off$')"),
    "not-null": (not_(null("channel")), "channel IS NOT NULL"),
    "not-not": (not_(not_(eq("channel", "#fr.wikipedia"))), "channel = '#fr.wikipedia'"),
    "not-missing-column": (not_(eq("country", "US")), "NOT (country = 'US')"),
    "not-missing-long-column": (not_(eq("metro", 510)), "NOT (metro = 510)"),
    "not-true": (not_({"type": "true"}), "FALSE"),
    # and / or
    "and-strings": (and_(eq("channel", "#en.wikipedia"), like("page", "Main%")),
                    "channel = '#en.wikipedia' AND page LIKE 'Main%'"),
    "and-mixed": (and_(eq("channel", "#en.wikipedia"), rng("added", 500, None, vtype="LONG"), not_(null("price"))),
                  "channel = '#en.wikipedia' AND added >= 500 AND price IS NOT NULL"),
    "or-strings": (or_(eq("channel", "#en.wikipedia"), eq("page", "ab")), "channel = '#en.wikipedia' OR page = 'ab'"),
    "or-mixed": (or_(eq("channel", "#ja.wikipedia"), rng("added", None, 10, vtype="LONG"), null("code")),
                 "channel = '#ja.wikipedia' OR added <= 10 OR code IS NULL"),
    "not-or": (not_(or_(eq("channel", "#en.wikipedia"), eq("small", 2))),
               "NOT (channel = '#en.wikipedia' OR small = 2)"),
    "not-and": (not_(and_(eq("channel", "#en.wikipedia"), eq("small", 2))),
                "NOT (channel = '#en.wikipedia' AND small = 2)"),
    "not-and-strings": (not_(and_(eq("channel", "#en.wikipedia"), eq("page", "ab"))),
                        "NOT (channel = '#en.wikipedia' AND page = 'ab')"),
    "not-or-strings": (not_(or_(like("page", "Main%"), eq("user", "user00042"))),
                       "NOT (page LIKE 'Main%' OR \"user\" = 'user00042')"),
    "nested": (and_(or_(eq("channel", "#en.wikipedia"), null("channel")),
                    not_(or_(in_("small", [0, 1]), eq("page", "ab"))),
                    or_(not_(eq("country", "US")), rng("price", 90, None, vtype="DOUBLE"))),
               "(channel = '#en.wikipedia' OR channel IS NULL) AND NOT (small IN (0, 1) OR page = 'ab') "
               "AND (NOT (country = 'US') OR price >= 90)"),
    # numeric conditions (no index) ANDed: each next one reads only the rows still selected,
    # or, when most rows pass, all of them at once
    "and-numeric-selective-first": (and_(eq("delta", 7, "LONG"), in_("small", [1, 3]), rng("added", 100, None, vtype="LONG"),
                                         not_(null("price")), like("page", "Main%")),
                                    "delta = 7 AND small IN (1, 3) AND added >= 100 AND price IS NOT NULL "
                                    "AND page LIKE 'Main%'"),
    "and-numeric-broad-first": (and_(rng("delta", -500, None, vtype="LONG"), not_(eq("small", 2)), eq("added", 5, "LONG")),
                                "delta >= -500 AND NOT (small = 2) AND added = 5"),
    "and-numeric-none-pass": (and_(eq("delta", 100000, "LONG"), eq("small", 1)), "delta = 100000 AND small = 1"),
    # IN of a few integers on a column without nulls (numpy comparisons), with fractions and NOT
    "in-longs-no-nulls": (in_("delta", [-3, 7, 400]), "delta IN (-3, 7, 400)"),
    "in-longs-no-nulls-fraction": (in_("delta", [2.5, 7]), "delta IN (2.5, 7)"),
    "not-in-longs-no-nulls": (not_(in_("delta", [-3, 7, 400])), "NOT (delta IN (-3, 7, 400))"),
    # a string range holding every value: the non-null rows
    "range-str-every-value": (rng("channel", "", "\uffff"), "channel >= '' AND channel <= '\uffff'"),
    "not-range-str-every-value": (not_(rng("code", "", "\uffff")), "NOT (code >= '' AND code <= '\uffff')"),
    "and-with-time": (and_(rng("__time", T_DAY2, None, vtype="LONG"), eq("channel", "")),
                      f"t >= {T_DAY2} AND channel = ''"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_filter_matches_duckdb(events, events_duck, case):
    flt, where = CASES[case]
    got = run_events(events, {"queryType": "scan", "columns": ["rid"], "filter": flt}).table
    got_ids = sorted(got.column("rid").to_pylist())
    want = [r[0] for r in events_duck.execute(f"SELECT rid FROM events WHERE {where} ORDER BY rid").fetchall()]
    assert got_ids == want, f"{len(got_ids)} rows, want {len(want)}"


@pytest.mark.parametrize("case", ["eq-string", "not-eq-string", "in-strings", "and-mixed", "not-or", "nested"])
def test_filter_in_aggregating_queries(events, events_duck, case):
    # The same filters through the grouped engine: counts per channel must agree too.
    flt, where = CASES[case]
    got = run_events(events, {"queryType": "groupBy", "dimensions": ["channel"], "filter": flt,
                              "aggregations": [{"type": "count", "name": "c"}]}).table
    want = events_duck.execute(
        f"SELECT channel, count(*) FROM events WHERE {where} GROUP BY channel ORDER BY channel NULLS FIRST").fetchall()
    assert list(zip(got.column("channel").to_pylist(), got.column("c").to_pylist())) == want


@pytest.mark.parametrize("case", ["in-strings-with-null", "in-only-null"])
def test_in_with_null_on_string_column(events, events_duck, case):
    flt, where = {
        "in-strings-with-null": (in_("channel", ["#en.wikipedia", None]), "channel = '#en.wikipedia' OR channel IS NULL"),
        "in-only-null": (in_("page", [None]), "page IS NULL"),
    }[case]
    got = run_events(events, {"queryType": "scan", "columns": ["rid"], "filter": flt}).table
    want = [r[0] for r in events_duck.execute(f"SELECT rid FROM events WHERE {where} ORDER BY rid").fetchall()]
    assert sorted(got.column("rid").to_pylist()) == want


def test_not_in_with_null_on_string_column(events, events_duck):
    # NOT (x IN ('a') OR x IS NULL) happens to come out right even with the bug above.
    got = run_events(events, {"queryType": "scan", "columns": ["rid"],
                              "filter": not_(in_("channel", ["#en.wikipedia", None]))}).table
    want = [r[0] for r in events_duck.execute(
        "SELECT rid FROM events WHERE NOT (channel = '#en.wikipedia' OR channel IS NULL) ORDER BY rid").fetchall()]
    assert sorted(got.column("rid").to_pylist()) == want


def _has_expr() -> bool:
    try:
        from common.expr import parse  # noqa: F401
    except ImportError:
        return False
    return True


needs_expr = pytest.mark.skipif(not _has_expr(), reason="common.expr (the expression language) has not landed yet")

EXPR_CASES = {
    "arith-compare": ("added * 2 > 1000", "added * 2 > 1000"),
    "string-eq": ("channel == '#en.wikipedia'", "channel = '#en.wikipedia'"),
    "and-or": ("(small == 1 || small == 2) && delta < 0", "(small = 1 OR small = 2) AND delta < 0"),
    "isnull": ("isnull(price)", "price IS NULL"),
    "strlen-unicode": ("strlen(channel) == 3", "length(channel) = 3"),
    "like-function": ("like(page, 'Main%')", "page LIKE 'Main%'"),
    "null-comparison-is-not-true": ("added > 500 || small == 1", "added > 500 OR small = 1"),
}


@needs_expr
@pytest.mark.parametrize("case", list(EXPR_CASES))
def test_expression_filter(events, events_duck, case):
    expr, where = EXPR_CASES[case]
    got = run_events(events, {"queryType": "scan", "columns": ["rid"],
                              "filter": {"type": "expression", "expression": expr}}).table
    want = [r[0] for r in events_duck.execute(f"SELECT rid FROM events WHERE {where} ORDER BY rid").fetchall()]
    assert sorted(got.column("rid").to_pylist()) == want


@needs_expr
@pytest.mark.parametrize("expr,where", [
    ("channel == '#en.wikipedia'", "NOT (channel = '#en.wikipedia')"),
    ("added > 500", "NOT (added > 500)"),
    ("added > 500 && small == 1", "NOT (added > 500 AND small = 1)"),
])
def test_not_over_expression_filter_is_three_valued(events, events_duck, expr, where):
    got = run_events(events, {"queryType": "scan", "columns": ["rid"],
                              "filter": not_({"type": "expression", "expression": expr})}).table
    want = [r[0] for r in events_duck.execute(f"SELECT rid FROM events WHERE {where} ORDER BY rid").fetchall()]
    assert sorted(got.column("rid").to_pylist()) == want


@needs_expr
def test_virtual_column_dimension_and_filter(events, events_duck):
    q = {"queryType": "groupBy",
         "virtualColumns": [{"type": "expression", "name": "up", "expression": "upper(channel)"},
                            {"type": "expression", "name": "a2", "expression": "added * 2", "outputType": "LONG"}],
         "dimensions": ["up"], "filter": and_(eq("up", "#EN.WIKIPEDIA"), rng("a2", 1000, None, vtype="LONG")),
         "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "s", "fieldName": "a2"}]}
    got = run_events(events, q).table
    want = events_duck.execute("SELECT upper(channel), count(*), sum(added * 2) FROM events "
                               "WHERE upper(channel) = '#EN.WIKIPEDIA' AND added * 2 >= 1000 GROUP BY 1").fetchall()
    assert list(zip(*(got.column(n).to_pylist() for n in ("up", "c", "s")))) == want
