"""Opaque continuation cursors: what they carry, how they are encoded, how they are checked.

A cursor is ``rc1.`` followed by unpadded URL-safe base64 of a compact JSON object:

=====  =====================================================================================
``v``  format version (1)
``k``  the tool that issued it: ``overview``, ``read`` or ``search``
``s``  scope (``active`` / ``all``)
``id`` session id
``fp`` fingerprint of the request the cursor continues (for search: query + case flag)
``a``  anchor: the last delivered section / match entry, or the entry a read resumes at
``sec`` the section a section read continues (``""`` for an exact-entry read)
``o``  body offset (UTF-16 units) inside the anchor entry (reads only)
``h``  check: 12 hex digits of SHA-256 over the other fields
=====  =====================================================================================

The check only catches damaged or hand-edited cursors; a cursor grants nothing the caller
could not ask for directly, so it is not signed. Decoding rejects, with a message saying
what to do instead: anything malformed, a cursor from another tool, session or scope, and a
search cursor for another query or case setting. Whether the anchor still exists is checked
by the tool (a stale cursor).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any

from ...errors import CondenseError, JsonError
from ...js import json as jsjson

__all__ = ["MAX_CURSOR_CHARS", "Cursor", "CursorError", "decode_cursor", "fingerprint"]

MAX_CURSOR_CHARS = 4096
"""Longer strings are rejected before decoding."""

_PREFIX = "rc1."
_TOOLS = {
    "overview": "session_overview",
    "read": "session_read_section",
    "search": "session_search",
}
_FIELDS = {"v": int, "k": str, "s": str, "id": str, "fp": str, "a": str, "sec": str, "o": int}
_MAX_OFFSET = 1 << 40


class CursorError(CondenseError, ValueError):
    """A cursor that cannot be used for this call; the message says why and what to do."""


def fingerprint(*parts: Any) -> str:
    """16 hex digits identifying a request (e.g. ``fingerprint(query, case_sensitive)``)."""
    return hashlib.sha256(jsjson.dumps_bytes(list(parts))).hexdigest()[:16]


def _check(fields: dict[str, Any]) -> str:
    return hashlib.sha256(jsjson.dumps_bytes(fields)).hexdigest()[:12]


@dataclass(frozen=True)
class Cursor:
    """The position a cursor stands for (see the module docstring for the fields)."""

    kind: str
    scope: str
    session_id: str
    fingerprint: str
    anchor: str
    section: str = ""
    offset: int = 0

    def encode(self) -> str:
        """The opaque cursor string."""
        fields: dict[str, Any] = {
            "v": 1,
            "k": self.kind,
            "s": self.scope,
            "id": self.session_id,
            "fp": self.fingerprint,
            "a": self.anchor,
            "sec": self.section,
            "o": self.offset,
        }
        fields["h"] = _check(fields)
        data = base64.urlsafe_b64encode(jsjson.dumps_bytes(fields)).rstrip(b"=")
        return _PREFIX + data.decode("ascii")


def _invalid(tool: str, reason: str) -> CursorError:
    return CursorError(
        f"Invalid cursor: {reason}. Pass nextCursor exactly as {tool} returned it, "
        "or call it again without a cursor."
    )


def _fields(token: Any, tool: str) -> dict[str, Any]:
    if not isinstance(token, str) or not token.startswith(_PREFIX):
        raise _invalid(tool, "not a cursor issued by the session recovery tools")
    if len(token) > MAX_CURSOR_CHARS:
        raise _invalid(tool, "too long")
    body = token[len(_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != body:
            raise ValueError("non-canonical base64")
        fields = jsjson.loads(raw)
    except (binascii.Error, ValueError, JsonError):
        raise _invalid(tool, "it is damaged (cannot be decoded)") from None
    if not isinstance(fields, dict) or set(fields) != {*_FIELDS, "h"}:
        raise _invalid(tool, "it is damaged (unexpected fields)")
    check = fields.pop("h")
    for key, kind in _FIELDS.items():
        value = fields[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _invalid(tool, f"it is damaged (field {key!r} has the wrong type)")
    if check != _check(fields):
        raise _invalid(tool, "it is damaged or was edited (check mismatch)")
    if fields["v"] != 1:
        raise _invalid(tool, f"unsupported cursor version {fields['v']}")
    if fields["k"] not in _TOOLS or fields["s"] not in ("active", "all"):
        raise _invalid(tool, "it is damaged (unknown tool or scope)")
    if not 0 <= fields["o"] <= _MAX_OFFSET:
        raise _invalid(tool, "it is damaged (offset out of range)")
    return fields


def decode_cursor(
    token: Any, *, kind: str, scope: str, session_id: str, fingerprint: str = ""
) -> Cursor:
    """Decode ``token`` for a call of tool ``kind`` with this scope, session and fingerprint.

    Raises :class:`CursorError` with an actionable message when the cursor is malformed or
    belongs to another tool, session, scope or request.
    """
    tool = _TOOLS[kind]
    fields = _fields(token, tool)
    if fields["k"] != kind:
        raise CursorError(
            f"Cursor mismatch: this cursor continues {_TOOLS[fields['k']]}, not {tool}. "
            f"Pass it to {_TOOLS[fields['k']]}."
        )
    if fields["id"] != session_id:
        raise CursorError(
            f"Cursor mismatch: this cursor was issued for another session. "
            f"Call {tool} again without a cursor."
        )
    if fields["s"] != scope:
        raise CursorError(
            f"Cursor mismatch: this cursor was issued for scope {fields['s']}, but this call "
            f'uses scope {scope}. Repeat the call with scope: "{fields["s"]}".'
        )
    if fields["fp"] != fingerprint:
        raise CursorError(
            f"Cursor mismatch: this cursor belongs to a {tool} call with a different query "
            f"or case sensitivity. Repeat the same query and case_sensitive value, or search "
            f"again without a cursor."
            if kind == "search"
            else f"Cursor mismatch: this cursor belongs to a different {tool} request. "
            f"Call {tool} again without a cursor."
        )
    return Cursor(
        fields["k"],
        fields["s"],
        fields["id"],
        fields["fp"],
        fields["a"],
        fields["sec"],
        fields["o"],
    )
