"""What the four recovery tools share: limits, argument parsing, the session view, results."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Optional

from ...js import json as jsjson
from ...session import SessionFile
from ..base import ToolResult
from .entries import Entry, usable_entries
from .text import truncate

__all__ = [
    "BODY_CHARS",
    "MAX_OUTPUT_CHARS",
    "OVERVIEW_SECTIONS",
    "PAGE_BUDGET",
    "QUERY_CHARS",
    "RECENT_ERRORS",
    "RECOVERY_FILES",
    "RECOVERY_PENDING",
    "SEARCH_RESULTS",
    "SECTION_ENTRIES",
    "SessionView",
    "clamp_int",
    "empty_result",
    "error_result",
    "payload_result",
    "scope_of",
]

MAX_OUTPUT_CHARS = 30_000
"""Hard cap on a result's text (UTF-16 units)."""
PAGE_BUDGET = MAX_OUTPUT_CHARS - 500
"""A paged result stops adding items before its text would pass this."""
BODY_CHARS = (2000, 100, 8000)
"""Per-entry body chars: default, minimum, maximum."""
SECTION_ENTRIES = (20, 1, 50)
"""Entries per section read: default, minimum, maximum."""
SEARCH_RESULTS = (20, 1, 50)
"""Search matches per page: default, minimum, maximum."""
OVERVIEW_SECTIONS = (20, 1, 100)
"""Sections per overview page: default, minimum, maximum."""
RECENT_ERRORS = (5, 1, 20)
"""Recent errors in the recovery context: default, minimum, maximum."""
RECOVERY_FILES = 200
"""Read / modified paths listed by the recovery context (head and tail kept)."""
RECOVERY_PENDING = 50
"""Unmatched tool calls listed by the recovery context (head and tail kept)."""
QUERY_CHARS = 500
"""Search queries are cut to this many characters."""


def scope_of(args: Mapping[str, Any]) -> str:
    """``"all"`` when asked for, else ``"active"`` (any other value means the active branch)."""
    return "all" if args.get("scope") == "all" else "active"


def clamp_int(value: Any, limits: tuple[int, int, int]) -> int:
    """``clamp(floor(value), min, max)``; the default for a non-number or non-finite value."""
    default, low, high = limits
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return default
    return min(high, max(low, math.floor(value)))


class SessionView:
    """The raw entries the tools read: the active branch or every entry of a session.

    ``leaf`` picks the active branch's leaf (default: the session's current leaf). A view
    without a session (``None``) has no entries, like a host without a session manager.
    """

    def __init__(self, session: Optional[SessionFile], leaf: Optional[str] = None) -> None:
        self.session = session
        self.leaf = leaf

    def entries(self, scope: str) -> list[Entry]:
        """Usable entries of the scope: the branch root to leaf, or all in file order."""
        if self.session is None:
            return []
        if scope == "all":
            return usable_entries(self.session.entries)
        return usable_entries(self.session.branch(self.leaf))

    @property
    def session_id(self) -> str:
        """The header id (``""`` without a session); cursors are bound to it."""
        return self.session.session_id if self.session is not None else ""

    def info(self) -> dict[str, Any]:
        """``{id, name, persisted, hasParentSession}`` of the session."""
        session = self.session
        if session is None:
            return {"id": None, "name": None, "persisted": False, "hasParentSession": False}
        header = session.header
        names = [
            e.get("name")
            for e in session.entries
            if e.get("type") == "session_info" and isinstance(e.get("name"), str)
        ]
        return {
            "id": header.get("id") if isinstance(header.get("id"), str) else None,
            "name": names[-1] if names and names[-1] else None,
            "persisted": session.path is not None,
            "hasParentSession": header.get("parentSession") is not None,
        }


def payload_result(payload: Any, details: dict[str, Any]) -> ToolResult:
    """A result whose text is ``payload`` (a string as is, else pretty JSON), capped."""
    text = payload if isinstance(payload, str) else jsjson.dumps(payload, 2)
    return ToolResult(truncate(text, MAX_OUTPUT_CHARS), details)


def empty_result(scope: str) -> ToolResult:
    """The normal answer for a session without entries in ``scope``."""
    return payload_result(
        f"No raw session entries are available for scope {scope}. The session may be new, "
        "ephemeral, or unavailable in this context.",
        {"scope": scope, "entryCount": 0},
    )


def error_result(message: str, details: dict[str, Any]) -> ToolResult:
    """A refused call (bad arguments, rejected cursor)."""
    return ToolResult(message, {**details, "error": True}, is_error=True)
