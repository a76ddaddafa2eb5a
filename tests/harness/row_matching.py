"""same_multiset: whether two lists of rows hold the same rows, each matched once, under a
closeness test per value. The oracle suites sort unordered results before comparing them, and the
sort key rounds floats, so rows that differ only in a float's last bits (a sum added in another
order) can sort apart; matching row by row does not depend on that order."""

from __future__ import annotations

from collections.abc import Callable


def same_multiset(actual: list[tuple], expected: list[tuple], close: Callable[[object, object], bool]) -> bool:
    left = list(expected)
    for row in actual:
        for i, candidate in enumerate(left):
            if len(row) == len(candidate) and all(close(x, y) for x, y in zip(row, candidate)):
                del left[i]
                break
        else:
            return False
    return not left
