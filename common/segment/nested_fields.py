"""Splitting JSON documents into the fields of a nested column.

Every path that leads to a literal (string, number, boolean) or to an array of literals is a
field; arrays holding objects or arrays are walked per element (``$.a[0].b``). A path whose
values change type keeps every type it saw. Booleans are stored as LONG 1/0, as Druid does;
integers beyond 64 bits as DOUBLE. The guard keeps at most ``max_fields`` fields (the most
often present, ties by first appearance); the rest stay only in the raw documents and are
reported. Walks are iterative, so nesting depth is bounded by the JSON parser, not the stack.
"""

from __future__ import annotations

import gc
import json
import re
from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa

from common.errors import ValidationError
from common.json.document_paths import _literal_array, literal_paths
from common.json.document_text import (MAX_DOCUMENT_DEPTH, depth_over, dumps_document, loads_document,
                                       lone_surrogate, surrogate_escape)
from common.json.path_steps import key_text

DEFAULT_MAX_FIELDS = 1000


# Column properties (catalog ``properties`` of a COMPLEX<json> column, or ingestion) that set these.
OPTION_KEYS = ("maxFields", "skipPaths", "typedPaths", "keepRaw", "elementIndex")
_TYPED = {"BIGINT": "LONG", "LONG": "LONG", "DOUBLE": "DOUBLE", "VARCHAR": "STRING", "STRING": "STRING"}


@dataclass(frozen=True)
class NestedOptions:
    max_fields: int = DEFAULT_MAX_FIELDS
    skip_paths: tuple[str, ...] = ()  # exact paths, as canonical JSONPath text
    skip_patterns: tuple[str, ...] = ()  # regular expressions matched against the path text
    keep_raw: bool | None = None  # None: drop the raw values when the fields rebuild them exactly
    typed_paths: tuple[tuple[str, str], ...] = ()  # (path, LONG | DOUBLE | STRING)
    element_index: bool = True  # a per-element index for each field of arrays (element_index.py)

    @staticmethod
    def from_properties(props: dict | None, column: str = "") -> NestedOptions:
        """Options from column properties: ``maxFields`` (int), ``skipPaths`` (paths; ``re:`` marks a
        regular expression), ``typedPaths`` ({path: BIGINT | DOUBLE | VARCHAR}), ``keepRaw`` (bool),
        ``elementIndex`` (bool, default true).
        A bad value is a user error naming the column and the property."""
        from common.json.path_steps import parse_path, path_text

        props = dict(props or {})
        where = f"JSON column '{column}'" if column else "JSON column"
        max_fields = props.get("maxFields", DEFAULT_MAX_FIELDS)
        if isinstance(max_fields, bool) or not isinstance(max_fields, int) or not 0 <= max_fields <= 100_000:
            raise ValidationError(f"{where}: maxFields must be a whole number from 0 to 100000, got {max_fields!r}")
        skip = props.get("skipPaths", [])
        if not isinstance(skip, list) or not all(isinstance(p, str) for p in skip):
            raise ValidationError(f"{where}: skipPaths must be a list of paths ('re:' for a regular expression)")
        exact, patterns = [], []
        for p in skip:
            if p.startswith("re:"):
                try:
                    re.compile(p[3:])
                except re.error as exc:
                    raise ValidationError(f"{where}: skipPaths regular expression {p[3:]!r}: {exc}") from None
                patterns.append(p[3:])
            else:
                exact.append(path_text(parse_path(p)))
        typed = props.get("typedPaths", {})
        if not isinstance(typed, dict):
            raise ValidationError(f"{where}: typedPaths must map paths to BIGINT, DOUBLE or VARCHAR")
        typed_out = []
        for p, t in typed.items():
            kind = _TYPED.get(str(t).upper())
            if kind is None:
                raise ValidationError(f"{where}: typedPaths type {t!r} for {p!r} is not BIGINT, DOUBLE or VARCHAR")
            typed_out.append((path_text(parse_path(p)), kind))
        keep_raw = props.get("keepRaw")
        if keep_raw is not None and not isinstance(keep_raw, bool):
            raise ValidationError(f"{where}: keepRaw must be true or false, got {keep_raw!r}")
        element_index = props.get("elementIndex", True)
        if not isinstance(element_index, bool):
            raise ValidationError(f"{where}: elementIndex must be true or false, got {element_index!r}")
        return NestedOptions(max_fields, tuple(exact), tuple(patterns), keep_raw, tuple(typed_out), element_index)


def _coerced(value, kind: str):
    """A literal as a declared path type; None when it does not convert (counted by the caller)."""
    if kind == "STRING":
        return value if isinstance(value, str) else json.dumps(value)
    try:
        number = float(value) if not isinstance(value, (int, float)) else value
    except (TypeError, ValueError):
        return None
    if kind == "LONG":
        if isinstance(number, float) and not (number == number and abs(number) < 2**63):
            return None
        return int(number)
    return float(number)


@dataclass
class SplitField:
    path: str
    types: list[str]
    rows: list[int]  # the rows holding a value, ascending
    values: list  # the value of each of those rows (never None)
    num_rows: int = 0
    booleans: int = 0  # how many of the LONG values were JSON true/false
    index: int = 0  # order of first appearance

    @property
    def long_count(self) -> int:
        return sum(1 for v in self.values if type(v) is int)

    def column(self) -> list:
        """One value per row, None where the path is missing or null."""
        out: list = [None] * self.num_rows
        for row, v in zip(self.rows, self.values):
            out[row] = v
        return out


@dataclass
class Split:
    fields: list[SplitField]
    canonical: list  # each row's document as compact JSON text (None for a null row)
    dropped_paths: list[str] = field(default_factory=list)
    uncoercible: list[tuple[int, str]] = field(default_factory=list)  # (row, path) that missed its declared type
    # Whether the fields alone give back every document's text: no JSON nulls or empty objects
    # (they are not fields), literal arrays stored as written, each document's keys in field order.
    rebuildable: bool = False

    def null_rows(self) -> np.ndarray:
        return np.flatnonzero(np.array([t is None for t in self.canonical], dtype=bool))

    def raw_texts(self) -> pa.Array:
        return pa.array(self.canonical, pa.string())


def parse_document(text: str | None, row: int):
    if text is None:
        return None
    # The limit is explicit, not the interpreter's recursion limit (which strata raises for deep
    # expressions); the scan runs only for texts with that many brackets at all.
    try:
        if depth_over(text):
            raise RecursionError
        doc = loads_document(text)
    except RecursionError:
        raise ValidationError(f"row {row}: the JSON document nests too deeply to parse (over {MAX_DOCUMENT_DEPTH} "
                              "levels); flatten it or store it as VARCHAR") from None
    except ValueError as exc:
        raise ValidationError(f"row {row}: malformed JSON: {exc}") from None
    if "\\u" in text:
        char = lone_surrogate(_canonical(doc))
        if char is not None:
            raise ValidationError(f"row {row}: the JSON document holds a lone UTF-16 surrogate "
                                  f"({surrogate_escape(char)}), which is no character and cannot be stored as "
                                  "text; remove it or pair it with its other half")
    return doc


_SHAPES: dict[tuple, tuple[str, ...]] = {}  # (path, keys of an object there) -> the keys' paths


def _child_paths(path: str, keys: tuple) -> tuple[str, ...]:
    """The paths of an object's keys, cached by the object's shape: documents of one shape reuse
    the same path strings (hashed once) instead of building them per document."""
    shape = (path, keys)
    out = _SHAPES.get(shape)
    if out is None:
        out = tuple(path + key_text(k) for k in keys)
        if len(_SHAPES) < 50_000:
            _SHAPES[shape] = out
    return out


class _NeedsJson(Exception):
    """The document holds what orjson reads or prints otherwise than json: take the exact path."""


# Objects nested deeper than this are walked by literal_paths (iterative) instead of recursion.
_MAX_RECURSION = 100


def _fast_paths(doc, bools: list) -> tuple[list, bool] | None:
    """``literal_paths`` of a document orjson parsed, as a list of (path, kind, stored) in the same
    order, and whether the fields can rebuild the document (see Split.rebuildable); the paths of
    booleans go to ``bools``. None when the document holds a number whose JSON text Python's json
    module would print or parse differently (integers beyond 64 bits, which orjson reads as
    doubles; doubles Python prints in exponent form), or nests deeply: the caller then takes the
    exact path."""
    out: list = []
    state = [True]
    try:
        _walk_value("$", doc, out.append, bools, state, 0)
    except _NeedsJson:
        return None
    return out, state[0]


def _walk_object(path: str, obj: dict, add, bools: list, state: list, depth: int) -> None:
    if depth > _MAX_RECURSION:
        raise _NeedsJson
    keys = tuple(obj)
    paths = _SHAPES.get((path, keys)) or _child_paths(path, keys)
    # The scalar cases repeat _walk_value's on purpose: this loop runs once per value of every
    # document, and a call per value was a measurable part of the split.
    for p, v in zip(paths, obj.values()):
        t = type(v)
        if t is str:
            add((p, "STRING", v))
        elif t is int:
            if not -_I64 <= v < _I64:
                raise _NeedsJson
            add((p, "LONG", v))
        elif t is float:
            if v and not 1e-4 <= abs(v) < 1e16:
                raise _NeedsJson
            add((p, "DOUBLE", v))
        elif t is dict:
            if v:
                _walk_object(p, v, add, bools, state, depth + 1)
            else:
                state[0] = False  # an empty object is no field
        else:
            _walk_value(p, v, add, bools, state, depth + 1)


def _walk_value(path: str, value, add, bools: list, state: list, depth: int) -> None:
    t = type(value)
    if t is dict:
        if value:
            _walk_object(path, value, add, bools, state, depth)
        else:
            state[0] = False
    elif t is str:
        add((path, "STRING", value))
    elif t is int:
        if not -_I64 <= value < _I64:
            raise _NeedsJson
        add((path, "LONG", value))
    elif t is float:
        if value and not 1e-4 <= abs(value) < 1e16:
            raise _NeedsJson
        add((path, "DOUBLE", value))
    elif t is bool:
        add((path, "LONG", int(value)))
        bools.append(path)
    elif value is None:
        state[0] = False  # a JSON null is no field
    else:
        _walk_list(path, value, add, bools, state, depth)


def _walk_list(path: str, value: list, add, bools: list, state: list, depth: int) -> None:
    if depth > _MAX_RECURSION:
        raise _NeedsJson
    kinds = 0  # bit 1: string, 2: double, 4: container
    for v in value:
        tv = type(v)
        if tv is str:
            kinds |= 1
        elif tv is float:
            if v and not 1e-4 <= abs(v) < 1e16:
                raise _NeedsJson
            kinds |= 2
        elif tv is int:
            if not -_I64 <= v < _I64:
                raise _NeedsJson
        elif tv is dict or tv is list:
            kinds |= 4
            break
    if kinds & 4:  # arrays holding objects or arrays: each element is walked (``$.a[0].b``)
        for i, v in enumerate(value):
            _walk_value(f"{path}[{i}]", v, add, bools, state, depth + 1)
    elif kinds == 1 and None not in value and all(type(v) is str for v in value):
        add((path, "ARRAY<STRING>", value))
    elif not kinds and value and all(type(v) is int for v in value):
        add((path, "ARRAY<LONG>", value))
    else:
        # The same element widening as literal_paths (booleans are 1/0, or "true" among strings).
        kind, stored = _literal_array(value)
        add((path, kind, stored))
        if state[0]:
            types = {type(v) for v in value if v is not None}
            # Stored otherwise than written (1 as 1.0 or "1", true as 1)?
            state[0] = len(types) < 2 and bool not in types


_I64 = 1 << 63


def _canonical_fast(doc) -> str:
    """Compact JSON text of a document orjson parsed and _fast_paths accepted: orjson prints it as
    json.dumps(separators=(",", ":"), ensure_ascii=False) does (same escapes, key order and
    number text for the numbers _fast_paths lets through). orjson stops at 254 levels of nesting."""
    try:
        return orjson.dumps(doc).decode()
    except (TypeError, orjson.JSONEncodeError):
        return _canonical(doc)


def _canonical(doc) -> str:
    return dumps_document(doc)


def split_documents(texts: list, options: NestedOptions | None = None) -> Split:
    """Fields of the documents: each parsed once (orjson; Python's json for what orjson reads
    differently: NaN, integers beyond 64 bits, lone surrogates, and to word errors the same way),
    walked once, its values appended to its paths' row lists."""
    # The split keeps millions of parsed lists alive; the cyclic collector would rescan them over
    # and over (about a fifth of the time on 300k documents) though the walk makes no cycles.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _split(texts, options)
    finally:
        if collecting:
            gc.enable()


def _split(texts: list, options: NestedOptions | None) -> Split:
    options = options or NestedOptions()
    skip = set(options.skip_paths)
    patterns = [re.compile(p) for p in options.skip_patterns]
    typed = dict(options.typed_paths)
    filtered = bool(skip or patterns or typed)
    uncoercible: list[tuple[int, str]] = []
    n = len(texts)
    found: dict[str, SplitField] = {}
    canonical: list = [None] * n
    row = 0

    def emit(path, kind, stored):
        if filtered:
            if skip and path in skip or patterns and any(p.search(path) for p in patterns):
                return
            if path in typed and not kind.startswith("ARRAY"):
                kind, stored = typed[path], _coerced(stored, typed[path])
                if stored is None:
                    uncoercible.append((row, path))
                    return
        f = found.get(path)
        if f is None:
            f = found[path] = SplitField(path, [kind], [], [], n, index=len(found))
        elif kind not in f.types:
            f.types.append(kind)
        f.rows.append(row)
        f.values.append(stored)

    loads = orjson.loads
    get = found.get
    rebuildable = not filtered
    bools: list[str] = []
    for row, text in enumerate(texts):
        if text is None:
            continue
        if type(text) is str:
            doc = _NOT_PARSED
            if len(text) < 2 * MAX_DOCUMENT_DEPTH or text.count("[") + text.count("{") <= MAX_DOCUMENT_DEPTH:
                try:
                    doc = loads(text)
                except orjson.JSONDecodeError:
                    pass
            if doc is not _NOT_PARSED:
                if doc is None:
                    continue
                walked = _fast_paths(doc, bools)
                if walked is not None:
                    out, exact = walked
                    canonical[row] = _canonical_fast(doc)
                    if filtered:
                        for path, kind, stored in out:
                            emit(path, kind, stored)
                        bools.clear()
                        continue
                    rebuildable = rebuildable and exact
                    last = -1
                    for path, kind, stored in out:  # emit(), inlined: this loop runs per value
                        f = get(path)
                        if f is None:
                            f = found[path] = SplitField(path, [kind], [], [], n, index=len(found))
                        elif kind not in f.types:
                            f.types.append(kind)
                        f.rows.append(row)
                        f.values.append(stored)
                        if f.index < last:
                            rebuildable = False  # its keys come in another order than the fields'
                        last = f.index
                    if bools:
                        for path in bools:
                            found[path].booleans += 1
                        bools.clear()
                    continue
                bools.clear()
            doc = parse_document(text, row)
        else:
            doc = text
        if doc is None:
            continue
        rebuildable = False
        canonical[row] = _canonical(doc)
        for path, kind, stored in literal_paths(doc):
            emit(path, kind, stored)
    fields = list(found.values())
    dropped: list[str] = []
    if len(fields) > options.max_fields:
        order = {f.path: i for i, f in enumerate(fields)}
        ranked = sorted(fields, key=lambda f: (-len(f.rows), order[f.path]))
        kept = {f.path for f in ranked[:options.max_fields]}
        dropped = [f.path for f in fields if f.path not in kept]
        fields = [f for f in fields if f.path in kept]
    return Split(fields, canonical, dropped, uncoercible, rebuildable and not dropped)


_NOT_PARSED = object()


def row_paths(text: str, row: int):
    """One document split as ``_split`` splits it without column options: None for a JSON null,
    else (its (path, kind, stored) list, its compact text, whether the fields rebuild it (None when
    it took the json path, which never rebuilds), the paths of its booleans). The compiled split
    hands the documents it cannot read exactly to this."""
    bools: list[str] = []
    doc = _NOT_PARSED
    if len(text) < 2 * MAX_DOCUMENT_DEPTH or text.count("[") + text.count("{") <= MAX_DOCUMENT_DEPTH:
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    if doc is not _NOT_PARSED:
        if doc is None:
            return None
        walked = _fast_paths(doc, bools)
        if walked is not None:
            return walked[0], _canonical_fast(doc), walked[1], bools
    doc = parse_document(text, row)
    if doc is None:
        return None
    return list(literal_paths(doc)), _canonical(doc), None, ()


__all__ = ["DEFAULT_MAX_FIELDS", "OPTION_KEYS", "NestedOptions", "Split", "SplitField", "parse_document",
           "row_paths", "split_documents"]
