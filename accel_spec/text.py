"""Text taken from the user or a file, made safe to print, and integers parsed strictly (stdlib only).

:func:`shown` is the one helper every name or message read from a file goes through before it
is stored or printed: control characters (newlines, escape sequences, ...) are escaped as
``\\n`` / ``\\x1b`` / ``\\u2028`` and the text is cut to :data:`NAME_LIMIT` characters.
:func:`parse_int` reads an integer written with ASCII digits only: Python's ``int()`` would also
take full-width digits (``８``) and underscores (``1_000``).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["NAME_LIMIT", "shown", "parse_int", "INT_RULE"]

#: Longest name or message taken from a file that is kept (longer ones are cut, ending in ``...``).
NAME_LIMIT = 120

#: How :func:`parse_int` wants an integer written (for error messages).
INT_RULE = "written with ASCII digits 0-9 and an optional sign"

_MAX_DIGITS = 1000  # Python refuses to convert more than 4300 digits; no option needs this many
_INT = re.compile(r"[+-]?[0-9]+")


def _escape(char: str) -> str:
    if char in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _unsafe(char: str) -> bool:
    """Control, format, surrogate, unassigned and line/paragraph separator characters."""
    return unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def shown(text: object, limit: int = NAME_LIMIT) -> str:
    """``text`` as one printable line of at most about ``limit`` characters.

    Control and invisible characters are escaped (``"a\\nb"`` -> ``"a\\\\nb"``); a longer text is
    cut and ends in ``...``. Printable text (any script) is kept as it is.
    """
    raw = text if isinstance(text, str) else str(text)
    if len(raw) <= limit and raw.isprintable():
        return raw
    parts: list[str] = []
    size = 0
    for char in raw[:limit + 1]:
        piece = _escape(char) if _unsafe(char) else char
        if size + len(piece) > limit:
            return "".join(parts) + "..."
        parts.append(piece)
        size += len(piece)
    return "".join(parts)


def parse_int(text: str) -> int | None:
    """The integer ``text`` (surrounding spaces allowed) writes in ASCII digits, else ``None``.

    ``"８"`` (full-width), ``"1_000"``, ``"0x10"``, ``"1e3"``, ``""`` and more than 1,000 digits
    give ``None``.
    """
    stripped = text.strip(" \t")
    if len(stripped) > _MAX_DIGITS or not _INT.fullmatch(stripped):
        return None
    return int(stripped, 10)
