"""The SQL text of a parsed node, for error messages: ``sql_text`` now, ``LazySqlText`` only if a
message uses it."""

from __future__ import annotations

from sqlglot import exp

from common.sql.statement import DIALECT


def sql_text(node: exp.Expression) -> str:
    """The call as the user wrote it when the parser kept its text (function calls: sqlglot renders
    aliases under its own names, ARRAY_LENGTH as ARRAY_SIZE), else sqlglot's rendering."""
    meta = node._meta
    written = meta.get("written") if meta else None
    return written if written is not None else node.sql(dialect=DIALECT)


def written_name(node: exp.Expression | None, default: str) -> str:
    """The function name the user wrote for ``node`` (upper-cased), else ``default``: messages
    name LEN, CEILING or ARRAY_LENGTH as written, not the canonical name they translate to."""
    meta = node._meta if node is not None else None
    written = meta.get("written_name") if meta else None
    return written.upper() if written is not None else default


class LazySqlText:
    """A node's SQL text, generated only if an error message uses it: generating copies the
    whole subtree, so doing it for every argument of a 20,000-value IN list was quadratic."""

    __slots__ = ("_node", "_text")

    def __init__(self, node: exp.Expression) -> None:
        self._node = node
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            self._text = sql_text(self._node)
        return self._text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)
