"""The keying of a batch of projection sources, prepared once per query and kept between runs.

``grouped_engine.run_together`` answers one query over several segments' projection rows in one
pass: select each source's rows, build the group keys (time buckets, dimensions) over all of
them, group, then combine the stored intermediates per group. Everything before the combine
depends only on the query and on the stored rows of the sources, which never change: a
historical keeps the same source objects for every run of the same query JSON
(services/historical/source_cache.py) and ``engine.execute`` keeps them per query text. Over
projection rows that part was most of a query's time (seven reads of the time column, bucketing,
encoding the keys of seven dictionaries together, grouping), so it is kept here as a
``BatchPlan`` for the (query object, source objects) it was made for. A run that finds its plan
still reads every aggregator's stored column and combines it, counts the same bytes read, and
checks each segment file is unchanged.

The plan also depends on the declared types of the columns the keys and the filter read (a
declared type that differs from the stored one means values are cast before they are compared
or grouped); they are compared on every use. Plans are bounded in number and in bytes, least
recently used first, and hold the objects they were made for, so an id is not reused while kept.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

from common.query.grouping import Groups

# A batch with more rows than this is not kept: past it the query's own work dwarfs the keying.
MAX_ROWS = 200_000
MAX_PLANS = 1024
MAX_BYTES = 64 << 20


class _Strong:
    """A reference to an object that takes no weak reference (a test's stand-in)."""

    def __init__(self, obj) -> None:
        self.obj = obj

    def __call__(self):
        return self.obj


def _ref(source):
    if isinstance(source, (weakref.ref, _Strong)):
        return source
    try:
        return weakref.ref(source)
    except TypeError:
        return _Strong(source)


@dataclass
class BatchPlan:
    query: object
    # The sources, held weakly (see __post_init__): a kept plan must not keep a segment's files
    # open or mapped after its holder let go of it.
    sources: tuple
    checked: tuple[str, ...]  # the columns whose declared types the keys and selections depend on
    types: tuple  # their declared types when the plan was made
    rows: tuple  # per source: the selected row ids, or None for all rows
    touched: tuple  # per source: the (column, roles) a run reads (selection, keys, intermediates)
    key_bytes: tuple  # per source: the bytes those reads count
    names: list[str]  # the key columns of the partial
    groups: Groups
    in_segments: int
    after_prefilter: int
    matched: int
    take: object = None  # pa.Array: the rows' positions in the sources' whole columns end to end
    direct: bool = False  # intermediates read as stored: whole columns, then one ``take``
    # pa.Array: the order of the selected rows that ``groups`` follows, when not as read
    # (``groups.gid`` sorted, so sums reduce runs); ``take`` already follows it.
    reorder: object = None
    kept: bool = False  # prepared for the runs that find it (``take``, ``reorder``)
    # Each source's slice of the group ids (Aggregator.combine_parts).
    gids: list = field(default_factory=list)
    source_ids: tuple = ()  # the sources' ids when the plan was made: its key in ``BatchPlans``

    def __post_init__(self) -> None:
        if not self.source_ids:
            self.source_ids = tuple(map(id, self.sources))
        self.sources = tuple(_ref(s) for s in self.sources)

    def live_sources(self) -> tuple:
        """The sources, or None in place of one that is gone."""
        return tuple(r() for r in self.sources)

    @property
    def nbytes(self) -> int:
        out = self.groups.gid.nbytes + sum(k.nbytes for k in self.groups.keys)
        if self.groups.run_starts is not None:
            out += self.groups.run_starts.nbytes
        out += 0 if self.take is None else self.take.nbytes
        out += 0 if self.reorder is None else self.reorder.nbytes
        return out + sum(r.nbytes for r in self.rows if r is not None)

    def fits(self, query, sources, schema) -> bool:
        return (self.query is query and len(self.sources) == len(sources)
                and all(r() is b for r, b in zip(self.sources, sources))
                and self.types == tuple(schema.get(n) for n in self.checked))


class BatchPlans:
    def __init__(self, max_plans: int = MAX_PLANS, max_bytes: int = MAX_BYTES) -> None:
        self.max_plans = max_plans
        self.max_bytes = max_bytes
        self._plans: OrderedDict = OrderedDict()  # (id(query), ids of sources) -> BatchPlan
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def _key(query, sources) -> tuple:
        return (id(query), *map(id, sources))

    def get(self, query, sources, schema) -> BatchPlan | None:
        key = self._key(query, sources)
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                return None
            self._plans.move_to_end(key)
        return plan if plan.fits(query, sources, schema) else None

    def put(self, plan: BatchPlan) -> None:
        if plan.matched > MAX_ROWS:
            return
        for arr in (plan.groups.gid, plan.groups.run_starts, *plan.rows):
            if arr is not None:
                arr.flags.writeable = False  # shared by every later run of the query
        size = plan.nbytes
        if size > self.max_bytes:
            return
        key = (id(plan.query), *plan.source_ids)
        with self._lock:
            old = self._plans.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._plans[key] = plan
            self._bytes += size
            while self._plans and (len(self._plans) > self.max_plans or self._bytes > self.max_bytes):
                _, dropped = self._plans.popitem(last=False)
                self._bytes -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._plans)


PLANS = BatchPlans()

__all__ = ["PLANS", "BatchPlan", "BatchPlans"]
