"""Druid's quidem results as its ``mysql`` output format prints them, for golden tests that hold
Druid's published cells: NULL is an empty cell (``null`` inside an array), an array is
``[a, b, null]`` (text unquoted), a double as Java's Double.toString, a BOOLEAN true/false."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import pytest

from common.errors import StrataError


def _java_double(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == int(x) and abs(x) < 1e7:
        return f"{x:.1f}"
    return repr(x)


def cell(v, top: bool = True) -> str:
    """A value as Druid's quidem mysql output prints it."""
    if v is None:
        return "" if top else "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _java_double(v)
    if isinstance(v, list):
        return "[" + ", ".join(cell(e, False) for e in v) + "]"
    return str(v)


class Error:
    """Druid answers the query with an error (its message kept for the record)."""

    def __init__(self, druid_message: str) -> None:
        self.druid_message = druid_message


def rows(*cells) -> list[list[str]]:
    """One single-cell row per argument (a list is a row of several cells)."""
    return [c if isinstance(c, list) else [c] for c in cells]


def same(*cells, n: int = 4) -> list[list[str]]:
    """The same row ``n`` times (Druid's qa tables have 4 rows)."""
    return [list(cells)] * n


def assert_cells(run: Callable, sql: str, want, value: Callable[[str], object] = str) -> None:
    """``run(sql)`` answers Druid's cells ``want`` as a multiset (rows of a query without ORDER BY
    come in any order), each cell compared through ``value``; or it fails where Druid answers
    with an error (``want`` an ``Error``)."""
    if isinstance(want, Error):
        with pytest.raises(StrataError):
            run(sql)
        return
    got = Counter(tuple(value(cell(v)) for v in r.values()) for r in run(sql).to_pylist())
    assert got == Counter(tuple(value(c) for c in r) for r in want)
