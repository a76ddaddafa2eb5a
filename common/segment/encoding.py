"""Column encodings: the registry that maps an encoding name to its spec, writer and reader.

A column's manifest entry names its encoding; the encoding parses the typed spec stored with
the column, opens a ``ColumnReader`` over its parts, and (on the build side) encodes Arrow
values into parts. New column kinds (nested JSON, compressed parts) register here instead of
adding branches to the segment reader or the builder. A reader that meets an encoding it does
not know refuses the segment instead of misreading it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import pyarrow as pa

from common.errors import SegmentCorruptError
from common.types.column_type import ColumnType


@dataclass(frozen=True)
class EncodingSpec:
    """Per-encoding settings stored with a column. ``extra`` keeps keys this version does not know,
    so rewriting a manifest never drops what a newer writer recorded."""

    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    # JSON key <-> field name; subclasses list their fields here.
    KEYS: ClassVar[tuple[tuple[str, str], ...]] = ()

    def to_json(self) -> dict:
        out = dict(self.extra)
        for key, attr in self.KEYS:
            value = getattr(self, attr)
            if value is not None:
                out[key] = value
        return out

    def features(self) -> tuple[str, ...]:
        """requiredFeatures entries this column's settings need beyond its encoding's."""
        return ()

    def roles(self, required: tuple[str, ...]) -> tuple[str, ...]:
        """The roles a column with these settings must have (its encoding's, by default)."""
        return required

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> EncodingSpec:
        obj = dict(obj or {})
        known = {attr: obj.pop(key) for key, attr in cls.KEYS if key in obj}
        names = {f.name for f in fields(cls)}
        return cls(extra=obj, **{k: v for k, v in known.items() if k in names})


@dataclass(frozen=True)
class StoredColumn:
    """What an encoding needs to open a column: its parts in the container and its manifest facts."""

    name: str
    container: Any  # common.segment.container.Container
    parts: Mapping[str, str]  # role -> part name (may name a shared part of the base table)
    num_rows: int
    stats: Mapping[str, Any]
    type: ColumnType
    spec: EncodingSpec


@dataclass(frozen=True)
class EncodedColumn:
    """Build output of one column: part bytes by role, stats, and the spec to store."""

    parts: dict[str, pa.Buffer]
    stats: dict
    spec: EncodingSpec


@dataclass(frozen=True)
class Encoding:
    name: str
    spec_type: type[EncodingSpec]
    open: Callable[[StoredColumn], Any]  # -> ColumnReader
    encode: Callable[..., EncodedColumn]  # (values, ctype, options: dict | None) -> EncodedColumn
    # Roles a column of this encoding must have (a shared part may stand in for one).
    required_roles: tuple[str, ...] = ()
    # The manifest's requiredFeatures entry a segment using this encoding carries, if any.
    feature: str | None = None


_REGISTRY: dict[str, Encoding] = {}
_SPEC_FEATURES: set[str] = set()


def register_feature(name: str) -> str:
    """A requiredFeatures entry that some encoding setting (not a whole encoding) may need."""
    _SPEC_FEATURES.add(name)
    return name


def register(encoding: Encoding) -> Encoding:
    if encoding.name in _REGISTRY and _REGISTRY[encoding.name] is not encoding:
        raise ValueError(f"encoding '{encoding.name}' is already registered")
    _REGISTRY[encoding.name] = encoding
    return encoding


def _builtins() -> None:
    # The built-in encodings register themselves when their modules load; import them lazily so
    # the registry has no import-time dependency on the column modules.
    import common.segment.multi_value_column  # noqa: F401
    import common.segment.nested_column  # noqa: F401
    import common.segment.string_column  # noqa: F401
    import common.segment.value_column  # noqa: F401


def known_encodings() -> tuple[str, ...]:
    _builtins()
    return tuple(sorted(_REGISTRY))


def lookup_encoding(name: str) -> Encoding | None:
    _builtins()
    return _REGISTRY.get(name)


def encoding_named(name: str, column: str, where: str) -> Encoding:
    enc = lookup_encoding(name)
    if enc is None:
        raise SegmentCorruptError(
            f"segment {where}: encoding check failed: column '{column}' uses encoding '{name}', "
            f"which this version cannot read (known: {', '.join(known_encodings())}); upgrade strata"
        )
    return enc


def encoding_for(ctype: ColumnType) -> Encoding:
    """The encoding the builder uses for a logical type."""
    _builtins()
    if ctype.multi_value:
        return _REGISTRY["multiValue"]
    if ctype.is_string:
        return _REGISTRY["dictionary"]
    if ctype.complex_name == "json":
        return _REGISTRY["nested"]
    return _REGISTRY["plain"]


def known_features() -> frozenset[str]:
    """The requiredFeatures entries this version can read: those of its encodings."""
    _builtins()
    return frozenset(e.feature for e in _REGISTRY.values() if e.feature) | frozenset(_SPEC_FEATURES)


def parse_spec(encoding: str, obj: Mapping[str, Any] | None) -> EncodingSpec:
    enc = lookup_encoding(encoding)
    return (enc.spec_type if enc is not None else EncodingSpec).from_json(obj)


__all__ = ["EncodedColumn", "Encoding", "EncodingSpec", "StoredColumn", "encoding_for", "encoding_named",
           "known_encodings", "lookup_encoding", "parse_spec", "register", "register_feature"]
