"""The array functions over list arrays Arrow allows but SQL rows rarely give: a null row that spans
elements (they belong to no array), a sliced array (offsets not starting at 0), and -0.0 / NaN /
null elements in the set-like functions. Each answer is checked against the same function on a
clean copy of the rows (``pa.array(rows)``), so only the layout differs."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from common.expr import evaluate, parse

EXPRESSIONS = [
    "array_overlap(a, b)", "array_contains(a, b)", "array_contains(a, array_offset(b, 0))",
    "array_offset_of(a, array_offset(b, 0))", "array_ordinal(a, 2)", "array_slice(a, 1)", "array_slice(a, 0, 2)",
    "array_to_string(a, '|')", "array_concat(a, b)", "array_append(a, array_offset(b, 0))",
    "array_prepend(array_offset(b, 0), a)", "array_length(a)",
]


def _odd_layout() -> tuple[pa.ListArray, list]:
    """A list<double> whose null row spans two elements, sliced so its offsets start past 0."""
    values = pa.array([9.0, 1.0, -0.0, None, 5.0, 6.0, 0.0, float("nan"), 2.0, 3.0])
    offsets = pa.array([0, 1, 3, 5, 6, 8, 10], pa.int32())
    mask = pa.array([False, False, True, False, False, False])  # row 2 is null but spans [None, 5.0]
    whole = pa.ListArray.from_arrays(offsets, values, mask=mask)
    sliced = whole.slice(1)
    return sliced, sliced.to_pylist()


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_odd_layouts_answer_as_clean_rows(text):
    a, rows = _odd_layout()
    b = pa.array([[0.0], [1.0, None], [6.0], [float("nan")], [3.0, -0.0]], pa.list_(pa.float64()))
    clean = pa.array(rows, pa.list_(pa.float64()))
    got = evaluate(parse(text), {"a": a, "b": b}, len(a))
    want = evaluate(parse(text), {"a": clean, "b": b}, len(a))
    assert _same(got.to_pylist(), want.to_pylist()), (text, got.to_pylist(), want.to_pylist())


def _same(x, y) -> bool:
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y))
    if isinstance(x, float) and isinstance(y, float) and np.isnan(x) and np.isnan(y):
        return True
    return x == y


def test_set_functions_on_zero_nan_and_null_elements():
    a = pa.array([[-0.0], [float("nan")], [None, 1.0], [1.0], None, []], pa.list_(pa.float64()))
    b = pa.array([[0.0], [float("nan")], [None], [None], [1.0], [1.0]], pa.list_(pa.float64()))
    env = {"a": a, "b": b}
    # -0.0 equals 0.0; NaN equals nothing; a null element is found by a null one (Druid); null arrays give null
    assert evaluate(parse("array_overlap(a, b)"), env, 6).to_pylist() == [True, False, True, False, None, False]
    assert evaluate(parse("array_contains(a, b)"), env, 6).to_pylist() == [True, False, True, False, None, False]
    assert evaluate(parse("array_offset_of(a, 1.0)"), env, 6).to_pylist() == [None, None, 1, 0, None, None]
