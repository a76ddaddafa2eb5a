"""What ``engine.execute`` keeps per query text between runs: the parsed query, and each
segment's row source for it (the projection chosen, or base rows).

A dashboard or a benchmark runs the same native query again and again. Parsing it, and matching
every projection of every segment against it (grouping columns, virtual columns by expression,
aggregators, granularity, filter implication), gave the same answer each time and was about a
quarter of an in-process query over projection rows. Both depend only on the query's JSON text
and on the segment (its manifest never changes), so they are kept by that text (``json.dumps``
with sorted keys, which tells 1 from 1.0 and true, unlike equality of the parsed query), and a
source by the very segment object it was chosen for: a segment opened again is a new object and
chooses again. Keeping the same query and source objects also lets the selection and keying
kept on them (``selection.select_projection_rows``, ``projection_batch``) serve the next run, as
they do on a historical. Bounded, least recently used first.

Nothing here keeps a segment alive: a source is kept on its segment object (it reads that
segment's files, and goes with it), and a preparation refers to its segments and sources weakly.
A caller that lets go of a segment (an evicted one, whose unlinked file frees its space only once
nothing maps it) gets its memory and disk back as if nothing had been kept.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

from common.query.model import Query, query_from_json


class _Lru:
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
            return hit

    def put(self, key, value) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_QUERIES = _Lru(256)  # query text -> Query
_PREPARED = _Lru(256)  # (query text, ids of segments) -> (weak segments, schema, weak sources)
_SOURCES_ATTR = "_kept_sources"  # on a segment object: query text -> its source
MAX_SOURCES_PER_SEGMENT = 64


def query_text(obj: dict) -> str | None:
    """The key of a native query given as JSON, or None when it is not plain JSON (then nothing
    is kept for it)."""
    try:
        return json.dumps(obj, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError):
        return None


def text_of(query: Query) -> str | None:
    """The key of a parsed query: its JSON text (made once per query object)."""
    try:
        return "parsed:" + query.json_text()
    except (TypeError, ValueError):
        return None


def parsed(obj: dict, text: str | None) -> Query:
    """``query_from_json(obj)``, the same object for every run of the same text."""
    if text is None:
        return query_from_json(obj)
    query = _QUERIES.get(text)
    if query is None:
        query = query_from_json(obj)  # a bad query raises here every time: errors are not kept
        _QUERIES.put(text, query)
    return query


def kept(text: str | None, query: Query) -> Query:
    """The query object kept for ``text`` (an equal query: the same JSON), else ``query``, kept."""
    if text is None:
        return query
    hit = _QUERIES.get(text)
    if hit is not None:
        return hit
    _QUERIES.put(text, query)
    return query


def source(text: str | None, segment, make: Callable):
    """``make()``'s source for ``segment``, kept on the segment for the query ``text``."""
    if text is None:
        return make()
    kept_sources = getattr(segment, _SOURCES_ATTR, None)
    if kept_sources is None:
        kept_sources = OrderedDict()
        try:
            setattr(segment, _SOURCES_ATTR, kept_sources)
        except AttributeError:  # an object that takes no attributes: nothing is kept for it
            return make()
    hit = kept_sources.get(text)
    if hit is not None:
        return hit
    made = kept_sources[text] = make()
    while len(kept_sources) > MAX_SOURCES_PER_SEGMENT:
        kept_sources.popitem(last=False)
    return made


def _weak(obj):
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


def prepared(text: str | None, segments, make: Callable):
    """``make()``'s preparation of the query ``text`` over exactly these segment objects (the
    schema, the sources), kept while they all live; a bad query raises from ``make()`` every time."""
    if text is None:
        return make()
    key = (text, *map(id, segments))
    hit = _PREPARED.get(key)
    if hit is not None:
        weak_segments, schema, weak_sources = hit
        if len(weak_segments) == len(segments) and all(r() is s for r, s in zip(weak_segments, segments)):
            sources = [r() for r in weak_sources]
            if all(src is not None for src in sources):
                return schema, sources
    schema, sources = make()
    weak_segments = tuple(_weak(s) for s in segments)
    weak_sources = tuple(_weak(src) for src in sources)
    if all(r is not None for r in weak_segments + weak_sources):
        _PREPARED.put(key, (weak_segments, schema, weak_sources))
    return schema, sources


def clear() -> None:
    """Forget the kept queries and preparations (sources kept on segments go with them)."""
    _QUERIES.clear()
    _PREPARED.clear()


__all__ = ["clear", "kept", "parsed", "prepared", "query_text", "source", "text_of"]
