"""The oracles' unordered row comparison is deterministic: it does not depend on the order rows
come in (NaN, floats that differ in their last bits, ties in the sort key), and it still fails on
a real difference."""

from __future__ import annotations

import itertools

import pytest

from tests.sql_differential.compare import assert_same
from tests.unit.query.oracle import assert_rows_equal

NEAR = 0.1 + 0.2  # 0.30000000000000004: a sum added in another order
ROWS = [("a", 0.3, 1), ("b", NEAR, 2), ("a", float("nan"), 3), (None, 0.3000004, 4), ("c", -0.0, None)]
SWAPPED = [("a", NEAR, 1), ("b", 0.3, 2), ("a", float("nan"), 3), (None, 0.3000004, 4), ("c", 0.0, None)]


def test_a_float_on_a_rounding_edge_does_not_reorder_rows():
    # The sort key rounds floats to 6 places: one engine's 0.12345650000000001 rounds up, the
    # other's 0.12345649999999998 down, so sorting alone puts the two rows in opposite orders.
    up, down = 0.12345650000000001, 0.12345649999999998
    _both([(up, "b"), (0.123456, "c")], [(down, "b"), (0.123456, "c")])
    _both([(0.123456, "c"), (up, "b")], [(0.123456, "c"), (down, "b")])


def _both(actual, expected):
    assert_rows_equal(actual, expected, ordered=False)
    assert_same(actual, expected, ordered=False)


def test_every_input_order_compares_equal():
    for order in itertools.permutations(range(len(ROWS))):
        _both([ROWS[i] for i in order], ROWS)
        _both([SWAPPED[i] for i in order], ROWS)  # the last float bits differ between engines


@pytest.mark.parametrize("wrong", [
    [("a", 0.3, 1), ("b", NEAR, 2), ("a", 1.0, 3), (None, 0.3000004, 4), ("c", -0.0, None)],  # NaN lost
    [("a", 0.3, 1), ("b", NEAR, 2), ("a", float("nan"), 3), (None, 0.3000009, 4), ("c", -0.0, None)],
    [("a", 0.3, 1), ("b", NEAR, 2), ("a", float("nan"), 3), (None, 0.3000004, 4)],  # a row missing
    [("a", 0.3, 2), ("b", NEAR, 1), ("a", float("nan"), 3), (None, 0.3000004, 4), ("c", -0.0, None)],
])
def test_a_real_difference_fails(wrong):
    with pytest.raises(AssertionError):
        assert_rows_equal(wrong, ROWS, ordered=False)
    with pytest.raises(AssertionError):
        assert_same(wrong, ROWS, ordered=False)
