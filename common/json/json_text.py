"""loads_json: JSON text from a client (a native query, a catalog or ingestion spec) to Python
values, with every way the text can be bad reported as a ValidationError that says what and
where: not JSON, not UTF-8, nested deeper than MAX_JSON_DEPTH (Python's parser would otherwise
fail with a RecursionError, an internal error), or an integer longer than Python converts
(``ValueError: Exceeds the limit (4300 digits)``)."""

from __future__ import annotations

import json
import re

from common.errors import ValidationError

# Real specs nest a few levels (filters in filters, a few dozen at most); this is generous and
# well inside what the recursive parser and the code walking the result can take.
MAX_JSON_DEPTH = 200
_OPENERS = re.compile(rb"[\[{]")


def _depth_over(raw: bytes, limit: int) -> bool:
    """Whether brackets outside strings nest past ``limit`` (a linear scan, no recursion)."""
    if len(_OPENERS.findall(raw, 0, len(raw))) <= limit:
        return False
    depth, in_string, escaped = 0, False, False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def loads_json(text: str | bytes, what: str, max_depth: int = MAX_JSON_DEPTH):
    """``text`` parsed; ValidationError naming ``what`` when it cannot be."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if _depth_over(raw, max_depth):
        raise ValidationError(f"the {what} nests arrays/objects deeper than {max_depth} levels; "
                              "flatten it (no real spec needs that depth)")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"the {what} is not valid JSON: {exc.msg} at line {exc.lineno} "
                              f"column {exc.colno}") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(f"the {what} is not UTF-8 text (bad byte at offset {exc.start})") from None
    except RecursionError:
        raise ValidationError(f"the {what} nests arrays/objects too deeply to parse; flatten it") from None
    except ValueError as exc:  # an integer literal longer than Python converts
        raise ValidationError(f"the {what} has a number too long to read ({str(exc).split(';')[0]}); "
                              "numbers must fit in 64 bits") from None
