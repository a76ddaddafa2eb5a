"""A partial copy of a segment: only the named projections' parts (and the shared dictionaries
their columns use), read by ranges from the whole segment file, so a historical holding a
segment for a partial load rule downloads and keeps only those bytes.

The copy is a container like any other; its manifest is the segment's with ``files`` and
``dictionaries`` cut to what it holds and ``partialProjections`` naming the projections it
serves (feature ``partialCopy``, so a reader that does not know it refuses the file).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable

from common.errors import SegmentCorruptError, ValidationError
from common.segment.container import _FOOTER, CONTAINER_VERSION, MAGIC, TAIL_MAGIC, crc32, write_stored_parts
from common.segment.manifest import PARTIAL_COPY, PartEntry, SegmentManifest


def read_manifest(read_at: Callable[[int, int], bytes], size: int, label: str) -> SegmentManifest:
    """The manifest of the container ``read_at(offset, length)`` reads (``size`` bytes long)."""
    if size < len(MAGIC) + _FOOTER.size:
        raise SegmentCorruptError(f"segment {label}: footer check failed: {size} bytes is too short for a segment")
    offset, length, check, version, tail = _FOOTER.unpack(bytes(read_at(size - _FOOTER.size, _FOOTER.size)))
    if tail != TAIL_MAGIC or version != CONTAINER_VERSION or offset + length > size - _FOOTER.size:
        raise SegmentCorruptError(f"segment {label}: footer check failed: not a strata segment container")
    text = bytes(read_at(offset, length))
    if crc32(text) != check:
        raise SegmentCorruptError(f"segment {label}: manifest check failed: checksum mismatch")
    try:
        return SegmentManifest.from_json(json.loads(text), label)
    except (ValueError, KeyError, TypeError) as exc:
        raise SegmentCorruptError(f"segment {label}: manifest check failed: {exc}") from None


def parts_of_projections(manifest: SegmentManifest, names: Iterable[str]) -> tuple[set[str], set[str]]:
    """(the parts the named projections' columns read, the shared dictionaries they use)."""
    wanted = set(names)
    parts: set[str] = set()
    dictionaries: set[str] = set()
    for proj in manifest.projections:
        if proj.name not in wanted:
            continue
        for col in proj.columns:
            parts.update(col.parts.values())
            shared = getattr(col.spec, "shared_dictionary", None)
            if shared is not None:
                entry = manifest.dictionaries.get(shared)
                if entry is None:
                    raise SegmentCorruptError(f"segment {manifest.segment_id}: part check failed: column "
                                              f"'{col.name}' names shared dictionary '{shared}', which the manifest "
                                              f"does not list", manifest.segment_id)
                dictionaries.add(shared)
                parts.add(entry.part)
    return parts, dictionaries


def write_partial_copy(read_at: Callable[[int, int], bytes], size: int, names: Iterable[str], path: str,
                       label: str) -> SegmentManifest:
    """Reads only the manifest and the named projections' parts of a segment and writes them to
    ``path`` as a partial copy; returns its manifest. Each part's checksum is checked as read."""
    manifest = read_manifest(read_at, size, label)
    if manifest.partial_projections is not None:
        raise ValidationError(f"segment {label} is itself a partial copy; copy from the whole segment")
    have = {p.name for p in manifest.projections}
    kept = tuple(sorted(set(names) & have))
    if not kept:
        raise ValidationError(f"segment {label} has none of the projections {sorted(set(names))} to load "
                              f"(it has: {', '.join(sorted(have)) or 'none'})")
    part_names, dictionaries = parts_of_projections(manifest, kept)
    stored: dict[str, tuple[bytes, str | None, int | None]] = {}
    for name in sorted(part_names):
        entry = manifest.files.get(name)
        if entry is None:
            raise SegmentCorruptError(f"segment {label}: part check failed: part '{name}' is not in the manifest",
                                      manifest.segment_id)
        data = bytes(read_at(entry.offset, entry.length))
        if len(data) != entry.length or crc32(data) != entry.crc32:
            raise SegmentCorruptError(f"segment {label}: checksum check failed for part '{name}' (the deep storage "
                                      f"object is damaged or was replaced)", manifest.segment_id)
        stored[name] = (data, entry.codec, entry.raw_length)
    copy: dict[str, SegmentManifest] = {}

    def make_manifest(entries: dict) -> bytes:
        copy["manifest"] = dataclasses.replace(
            manifest, files={k: PartEntry(*v) for k, v in entries.items()},
            dictionaries={k: v for k, v in manifest.dictionaries.items() if k in dictionaries},
            partial_projections=kept,
            required_features=tuple(dict.fromkeys((*manifest.required_features, PARTIAL_COPY))))
        return copy["manifest"].to_bytes()

    write_stored_parts(path, stored, make_manifest)
    return copy["manifest"]


__all__ = ["parts_of_projections", "read_manifest", "write_partial_copy"]
