"""The error hierarchy every layer raises, so edges can map errors to status codes in one place.

Messages name the thing that is wrong (column, file, segment, position) and what would be valid.
"""


class StrataError(Exception):
    """Base of every error strata raises on purpose."""


class ValidationError(StrataError, ValueError):
    """The request is malformed: unknown column, wrong type, bad granularity or expression."""


class SegmentCorruptError(StrataError):
    """A segment file failed an integrity check; it names the segment and the check. ``segment_id``
    is the SegmentId when it is known (after the manifest was read), so callers match it exactly
    instead of searching the message."""

    def __init__(self, message: str, segment_id=None) -> None:
        super().__init__(message)
        self.segment_id = segment_id


class UnsupportedError(StrataError):
    """A valid construct that strata does not implement; the message names it exactly."""


class QueryTimeoutError(StrataError):
    """A query ran past its timeout."""


def closest_names(name: str, candidates, limit: int = 3) -> list[str]:
    """Candidate names nearest to ``name``, for 'did you mean' hints in errors."""
    import difflib

    pool = list(candidates)
    hits = difflib.get_close_matches(name, pool, n=limit, cutoff=0.5)
    if not hits:
        lowered = {c.lower(): c for c in pool}
        hits = [lowered[h] for h in difflib.get_close_matches(name.lower(), list(lowered), n=limit, cutoff=0.5)]
    return hits


def unknown_name_message(kind: str, name: str, candidates) -> str:
    hints = closest_names(name, candidates)
    msg = f"unknown {kind} '{name}'"
    if hints:
        msg += "; did you mean " + ", ".join(f"'{h}'" for h in hints) + "?"
    else:
        pool = sorted(candidates)
        if pool:
            shown = ", ".join(pool[:20]) + (" ..." if len(pool) > 20 else "")
            msg += f"; available: {shown}"
    return msg
