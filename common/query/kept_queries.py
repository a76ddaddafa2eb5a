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
"""

from __future__ import annotations

import json
import threading
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
_SOURCES = _Lru(4096)  # (query text, id(segment)) -> (segment, source)
_PREPARED = _Lru(256)  # (query text, ids of segments) -> (segments, (schema, sources))


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
    """``make()``'s source for ``segment``, kept for the query ``text``."""
    if text is None:
        return make()
    key = (text, id(segment))
    hit = _SOURCES.get(key)
    if hit is not None and hit[0] is segment:
        return hit[1]
    made = make()
    _SOURCES.put(key, (segment, made))
    return made


def prepared(text: str | None, segments, make: Callable):
    """``make()``'s preparation of the query ``text`` over exactly these segment objects (the
    schema, the sources), kept; a bad query raises from ``make()`` every time."""
    if text is None:
        return make()
    key = (text, *map(id, segments))
    hit = _PREPARED.get(key)
    if hit is not None and len(hit[0]) == len(segments) and all(a is b for a, b in zip(hit[0], segments)):
        return hit[1]
    made = make()
    _PREPARED.put(key, (tuple(segments), made))
    return made


def clear() -> None:
    _QUERIES.clear()
    _SOURCES.clear()
    _PREPARED.clear()


__all__ = ["clear", "kept", "parsed", "prepared", "query_text", "source", "text_of"]
