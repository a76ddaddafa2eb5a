"""ParkedPartials: a partial kept for its RunQuery is taken once, expires, and few are kept."""

from __future__ import annotations

from services.historical.parked_partials import ParkedPartials


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_kept_partial_is_taken_once_by_its_key():
    parked = ParkedPartials()
    assert not parked.holds("q1")
    parked.put(b"k1", "partial-1", "q1")
    assert parked.holds("q1") and not parked.holds("q2")
    assert parked.take(b"other") is None
    assert parked.take(b"k1") == "partial-1"
    assert parked.take(b"k1") is None and not parked.holds("q1") and len(parked) == 0


def test_kept_partials_expire():
    clock = Clock()
    parked = ParkedPartials(ttl_s=10.0, clock=clock)
    parked.put(b"k1", "partial-1", "q1")
    clock.now += 5
    parked.put(b"k2", "partial-2", "q2")
    clock.now += 6  # k1 is 11 s old, k2 6 s
    assert not parked.holds("q1") and parked.holds("q2")
    assert parked.take(b"k1") is None and parked.take(b"k2") == "partial-2"


def test_only_the_newest_few_are_kept():
    parked = ParkedPartials(max_entries=2)
    for i in range(4):
        parked.put(f"k{i}".encode(), f"partial-{i}", f"q{i}")
    assert len(parked) == 2
    assert parked.take(b"k0") is None and parked.take(b"k1") is None
    assert parked.take(b"k3") == "partial-3" and parked.take(b"k2") == "partial-2"
