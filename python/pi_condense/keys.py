"""Identity of tool-call occurrences and of tool-result content.

Occurrence keys
    A provider tool-call id is unique only within one model response, so one
    occurrence of a tool call is named ``f"{tool_call_id}@{timestamp}"``, where
    ``timestamp`` is the toolResult message's own timestamp printed as
    JavaScript's ``String(n)`` does (``1150``, not ``1150.0``). Without a
    numeric timestamp the key is the bare id (the legacy shape).
    :func:`parse_occ_key` splits on the *last* ``@`` (not at index 0) and accepts
    only one or more ASCII digits after it, up to the end of the key; anything
    else is a bare id. It returns ``(tool_call_id, timestamp)`` with the
    timestamp an ``int`` (``float('inf')`` if the digits overflow a double) or
    ``None``. Only non-empty ids with non-negative integer timestamps below
    ``1e21`` round-trip; a key like ``"a@1.5"`` or ``"a@-5"`` parses as a bare id.
    The id returned is cut from the given key code point for code point, never
    re-encoded: a surrogate pair passed as two code points (``"\\ud800\\udc00"``)
    comes back as those two, not as the astral character JavaScript would read
    them as (the same JS string, a different Python one), so the round trip
    holds for every non-empty ``str`` id, lone and split surrogates included.

Content hash
    :func:`hash_tool_result` is the lowercase hex SHA-1 of
    ``tool_name + "\\0" + normalize_result_text(text)`` in UTF-8 (lone
    surrogates as U+FFFD); the normalization folds CRLF to LF, drops trailing
    spaces and tabs of every line and trims JavaScript whitespace.

Protection
    :class:`ProtectedMatcher` compiles ``protectedTools`` and ``protectedPaths``
    once. The caller passes the args object the spec names for its site, e.g.
    ``input ?? arguments`` of a toolCall block: the first of those entries that
    is present and not None (an empty dict counts as present, unlike ``or``).
    Only the ``"path"`` entry of that object is read.
"""

from __future__ import annotations

from ._core import (
    ProtectedMatcher,
    bare_tool_call_id,
    hash_tool_result,
    normalize_result_text,
    occ_key,
    parse_occ_key,
)

__all__ = [
    "ProtectedMatcher",
    "bare_tool_call_id",
    "hash_tool_result",
    "normalize_result_text",
    "occ_key",
    "parse_occ_key",
    "result_timestamp_of",
]


def result_timestamp_of(value: object) -> float | None:
    """Return ``value`` if it is a JSON number (int or float, NaN included, not bool), else None.

    This is the single gate every reader of a toolResult ``timestamp`` goes through.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None
