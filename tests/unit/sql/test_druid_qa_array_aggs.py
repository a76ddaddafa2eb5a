"""Druid's published results for aggregations over its qaArray arrays: COUNT(*) and
COUNT(DISTINCT) grouped by or filtered on whole arrays, the numeric and sketch aggregations Druid
rejects on arrays (SUM, MIN, MAX, AVG, APPROX_COUNT_DISTINCT, APPROX_COUNT_DISTINCT_BUILTIN, BIT_AND,
BIT_OR, BIT_XOR), EARLIEST / LATEST (_BY) and ANY_VALUE of arrays, GROUPING() beside a grouped
array and ARRAY_CONCAT_AGG (DISTINCT too), each query with the cells Druid prints (see qa_array_data.py).

The cases are Druid's quidem files (apache/druid
``quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/qaArray/``)
``ops_funcs_agg_funcs.01.all.iq`` .. ``.10.all.iq``. Each function (A1_B<n>) runs over the seven
array kinds in three forms: the column filtered by ``<> ARRAY[..]`` of its 2022-01 value (C1, C4,
..), and the same array read from a_nested, grouped by (C2, C5, ..) and also with a HAVING
(C3, C6, ..); C22 compares the COMPLEX<json> column with an array (an error), C23/C24 group by
paths holding arrays of arrays (NULL on every row).

Deliberate differences, checked rather than skipped:
- Druid rejects a query; strata must fail too, with its own message (only the failure compared).
- EARLIEST / LATEST (_BY) and ANY_VALUE of the NULL arrays of C24 with ``HAVING .. IS NOT NULL``:
  Druid prints one row holding NULL, a row its own HAVING should have removed (its ARRAY_CONCAT_AGG
  cases, B29/B30 C24, remove it); strata removes it (no rows).
"""

from __future__ import annotations

import pytest

from tests.unit.sql.qa_array_data import HAVE_DATA, KINDS, LITERALS, NOT_ARRAYS, check, qa_array_runner, variants
from tests.unit.sql.quidem_cells import Error, rows

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="shared test data not found")


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    return qa_array_runner(tmp_path_factory.mktemp("qa-array-aggs"))


CASES: list = []


def _aggregation(b: int, agg: str, per_kind: dict, skip: tuple = (), not_arrays=(None, None), having=None,
                 select: str = "{agg} AS col") -> None:
    """Druid's cases A1_B<b>_C1..C24 of one aggregation ``agg`` ({} for its argument). ``per_kind``:
    a kind's cells for its three forms (a tuple), or one answer for all three; ``skip``: the C
    numbers the file leaves out; ``not_arrays``: the cells of C23 and C24; ``having``: the C24
    HAVING condition where it is not ``<agg> IS NOT NULL``; ``select``: the select list ({agg}
    the aggregation, {arg} its argument)."""
    def sel(arg: str) -> str:
        return select.format(agg=agg.format(arg), arg=arg)

    forms = {}
    for kind in KINDS:
        (c1, col), (c2, jv2), (c3, jv3) = variants(kind)
        forms[kind] = [(c1, f"SELECT {sel(col)} FROM test_array WHERE {col}<>{LITERALS[kind]}"),
                       (c2, f"SELECT {sel(jv2)} FROM test_array GROUP BY {jv2}"),
                       (c3, f"SELECT {sel(jv3)} FROM test_array GROUP BY {jv3} HAVING {agg.format(jv3)} IS NOT NULL")]
    for kind, want in per_kind.items():
        wants = want if isinstance(want, tuple) else (want,) * 3
        CASES.extend((f"A1_B{b}_C{c}_D1", sql, w) for (c, sql), w in zip(forms[kind], wants) if c not in skip)
    if 22 not in skip:
        CASES.append((f"A1_B{b}_C22_D1", f"SELECT {sel('a_nested')} FROM test_array WHERE a_nested<>ARRAY['FILLER']",
                      Error("Cannot apply '<>'")))
    (_, p23), (_, p24) = NOT_ARRAYS
    sqls = [f"SELECT {sel(p23)} FROM test_array GROUP BY {p23}",
            f"SELECT {sel(p24)} FROM test_array GROUP BY {p24} "
            f"HAVING {having or agg.format(p24) + ' IS NOT NULL'}"]
    CASES.extend((f"A1_B{b}_C{c}_D1", sql, w) for c, sql, w in zip((23, 24), sqls, not_arrays) if w is not None)


# ---- ops_funcs_agg_funcs.01.all.iq: COUNT(*), COUNT(DISTINCT) --------------------------------
_TWO_GROUPS = (rows("2"), rows("2", "2"), rows("2", "2"))
_aggregation(1, "count(*)", {"bool": _TWO_GROUPS, "int": _TWO_GROUPS, "float": _TWO_GROUPS, "str": _TWO_GROUPS,
                             "null": (rows("0"), rows("4"), rows("4")), "empty": rows("4"), "mixed": _TWO_GROUPS},
             not_arrays=(rows("4"), rows("4")), having="count(*) IN (4)")
_ONE_EACH = (rows("1"), rows("1", "1"), rows("1", "1"))
_aggregation(2, "count(DISTINCT {})", {"bool": _ONE_EACH, "int": _ONE_EACH, "float": _ONE_EACH, "str": _ONE_EACH,
                                       "null": (rows("0"), rows("1"), rows("1")), "empty": rows("1"),
                                       "mixed": _ONE_EACH}, not_arrays=(rows("0"), rows("0")))

# ---- .01-.04: what Druid rejects on arrays (min/max/approx leave out a_null and a_empty) -------
_aggregation(3, "sum({})", {k: Error("Cannot apply 'SUM'") for k in KINDS},
             not_arrays=(Error("Cannot apply 'SUM'"),) * 2)
for _b, _fn in ((4, "min"), (5, "max")):
    _aggregation(_b, _fn + "({})", {k: Error("does not support") for k in KINDS}, skip=(13, 16),
                 not_arrays=(Error("does not support"),) * 2)
_aggregation(6, "avg({})", {k: Error("Cannot apply 'AVG'") for k in KINDS}, not_arrays=(Error("Cannot apply 'AVG'"),) * 2)
for _b, _fn in ((7, "approx_count_distinct"), (8, "approx_count_distinct_builtin")):
    _aggregation(_b, _fn + "({})", {k: Error("Cannot apply") for k in KINDS}, skip=(13, 16),
                 not_arrays=(Error("Cannot apply"),) * 2)

# ---- .04/.05: EARLIEST, EARLIEST_BY of the arrays read from a_nested (the columns left out) -----
_COLUMNS = tuple(c for k in KINDS for c, _ in variants(k)[:1])
_EARLIEST = {"bool": rows("[1, 0, null]", "[null, 0, 1]"), "int": rows("[1, 2, null]", "[null, 2, 1]"),
             "float": rows("[0.1, 0.2, null]", "[null, 0.2, 0.1]"), "str": rows("[S1, S2, null]", "[null, S2, S1]"),
             "null": rows("[null, null, null]"), "empty": rows("[]"),
             "mixed": rows("[null, S1, 0.1, 1, true]", "[true, 1, 0.1, S1, null]")}
for _b, _agg, _c22 in ((17, "earliest({})", True), (18, "earliest({}, 1000)", True),
                       (19, "earliest_by({}, time_floor(__time, 'P1D'))", True),
                       (20, "earliest_by({}, time_floor(__time, 'P1D'), 1000)", False)):
    _aggregation(_b, _agg, _EARLIEST, skip=_COLUMNS + (() if _c22 else (22,)),
                 not_arrays=(rows(""), rows() if _c22 else None))  # C24: see the module's docstring


# ---- .06-.07: LATEST, LATEST_BY and ANY_VALUE likewise ---------------------------------------
for _b, _agg in ((21, "latest({})"), (22, "latest({}, 1000)"), (23, "latest_by({}, time_floor(__time, 'P1D'))"),
                 (24, "latest_by({}, time_floor(__time, 'P1D'), 1000)"), (25, "any_value({})")):
    _aggregation(_b, _agg, _EARLIEST, skip=_COLUMNS, not_arrays=(rows(""), rows()))

# ---- .07/.08: GROUPING() beside the grouped array (the columns, not grouped, are an error) ------
_aggregation(26, "grouping({})", {k: (Error("may only occur in an aggregate query"),
                                      *[[[c, "0"] for c, in w] for w in (_EARLIEST[k],) * 2]) for k in KINDS},
             skip=(2, 3), not_arrays=([["", "0"]], [["", "0"]]), select="{arg} AS col1, {agg} AS col")

# ---- .08/.09: ARRAY_CONCAT_AGG, with DISTINCT (its values sorted, null first) -----------------
_aggregation(29, "array_concat_agg({})", {
    "bool": (rows("[null, 0, 1, null, 0, 1]"),) * 3,  # C2/C3 left out
    "int": (rows("[null, 2, 1, null, 2, 1]"),) + (rows("[1, 2, null, 1, 2, null]", "[null, 2, 1, null, 2, 1]"),) * 2,
    "float": (rows("[null, 0.2, 0.1, null, 0.2, 0.1]"),)
    + (rows("[0.1, 0.2, null, 0.1, 0.2, null]", "[null, 0.2, 0.1, null, 0.2, 0.1]"),) * 2,
    "str": (rows("[null, S2, S1, null, S2, S1]"),)
    + (rows("[S1, S2, null, S1, S2, null]", "[null, S2, S1, null, S2, S1]"),) * 2,
    "null": (rows(""),) + (rows("[" + ", ".join(["null"] * 12) + "]"),) * 2, "empty": rows("[]"),
    "mixed": (rows("[null, S1, 0.1, 1, true, null, S1, 0.1, 1, true]"),)
    + (rows("[null, S1, 0.1, 1, true, null, S1, 0.1, 1, true]", "[true, 1, 0.1, S1, null, true, 1, 0.1, S1, null]"),) * 2},
    skip=(2, 3), not_arrays=(rows(""), rows()))
_aggregation(30, "array_concat_agg(DISTINCT {})", {
    "bool": rows("[null, 0, 1]"),
    "int": (rows("[null, 1, 2]"),) + (rows("[null, 1, 2]", "[null, 1, 2]"),) * 2,
    "float": (rows("[null, 0.1, 0.2]"),) + (rows("[null, 0.1, 0.2]", "[null, 0.1, 0.2]"),) * 2,
    "str": (rows("[null, S1, S2]"),) + (rows("[null, S1, S2]", "[null, S1, S2]"),) * 2,
    "null": (rows(""), rows("[null]"), rows("[null]")), "empty": rows("[]"),
    "mixed": (rows("[null, 0.1, 1, S1, true]"),) + (rows("[null, 0.1, 1, S1, true]", "[null, 0.1, 1, S1, true]"),) * 2},
    skip=(2, 3), not_arrays=(rows(""), rows()))

# ---- .09/.10: BIT_AND, BIT_OR, BIT_XOR, which Druid rejects on arrays -------------------------
for _b, _fn in ((33, "bit_and"), (34, "bit_or"), (35, "bit_xor")):
    _aggregation(_b, _fn + "({})", {k: Error(f"Cannot apply '{_fn.upper()}'") for k in KINDS},
                 not_arrays=(Error(f"Cannot apply '{_fn.upper()}'"),) * 2)


@pytest.mark.parametrize("test_id, sql, want", CASES, ids=[c[0] for c in CASES])
def test_druid_qa_array_aggregation_result(druid, test_id, sql, want):
    check(druid, sql, want)
