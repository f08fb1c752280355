"""Text helpers of the recovery tools: JS lengths, pair-safe cuts, previews, compact JSON.

Lengths and offsets are JavaScript ``.length`` units (UTF-16 code units), like every bound
in the reference. A cut never splits a surrogate pair: it stops one unit short instead.
"""

from __future__ import annotations

import re
from typing import Any

from ...js import json as jsjson

__all__ = [
    "collapse",
    "compact_json",
    "js_head",
    "js_len",
    "js_trim",
    "js_window",
    "preview",
    "truncate",
]

_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"  # JS \s
_SPACE_RUN = re.compile(f"[{_JS_SPACE}]+")
_STRIP = "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)


def js_len(text: str) -> int:
    """JS ``text.length`` (an astral character counts 2)."""
    return len(text) if text.isascii() else jsjson.utf16_len(text)


def _index_at(text: str, units: int) -> int:
    """Index of the code point where ``units`` UTF-16 units end (backing off a split pair)."""
    if units <= 0:
        return 0
    count = 0
    for index, char in enumerate(text):
        width = 2 if ord(char) > 0xFFFF else 1
        if count + width > units:
            return index
        count += width
    return len(text)


def js_head(text: str, units: int) -> str:
    """The first ``units`` UTF-16 units of ``text`` (one fewer rather than half a pair)."""
    if len(text) == js_len(text):
        return text[: max(0, units)]
    return text[: _index_at(text, units)]


def js_window(text: str, start: int, units: int) -> tuple[str, int]:
    """``units`` UTF-16 units of ``text`` from unit offset ``start``; returns the piece and
    the unit offset where it ends."""
    if len(text) == js_len(text):
        end = min(len(text), start + max(0, units))
        return text[start:end], end
    first = _index_at(text, start)
    piece = js_head(text[first:], units)
    return piece, js_len(text[:first]) + js_len(piece)


def js_trim(text: str) -> str:
    """JS ``text.trim()``."""
    return text.strip(_STRIP)


def collapse(text: str) -> str:
    """JS ``text.replace(/\\s+/g, " ").trim()``."""
    return js_trim(_SPACE_RUN.sub(" ", text))


def preview(text: str, maximum: int = 120) -> str:
    """One line: whitespace runs collapsed, trimmed, cut to ``maximum`` units with ``…``."""
    line = collapse(text)
    if js_len(line) <= maximum:
        return line
    return js_head(line, max(0, maximum - 1)) + "\u2026"


def truncate(text: str, maximum: int) -> str:
    """``text`` if it fits ``maximum`` units, else its head and ``\\n…[truncated]``."""
    if js_len(text) <= maximum:
        return text
    return js_head(text, max(0, maximum - 20)) + "\n\u2026[truncated]"


def compact_json(value: Any) -> str:
    """``JSON.stringify(value)`` (``[unserializable]`` for what JSON cannot hold)."""
    try:
        return jsjson.dumps(value)
    except (TypeError, ValueError):
        return "[unserializable]"
