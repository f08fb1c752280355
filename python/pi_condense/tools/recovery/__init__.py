"""Session recovery tools: find and reread raw session history after compaction.

Four read-only tools over the raw entries of the session the host owns (never an arbitrary
path, never the compacted context): ``session_overview``, ``session_read_section``,
``session_search`` and ``session_recovery_context``. Each reads the active branch by default
and every branch with ``scope: "all"``; long answers page with opaque, validated cursors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ...session import SessionFile
from ..base import ToolResult, ToolSpec
from .common import SessionView
from .context import session_recovery_context
from .cursors import CursorError
from .overview import session_overview
from .read import session_read_section
from .search import session_search
from .specs import OVERVIEW_TOOL, READ_SECTION_TOOL, RECOVERY_CONTEXT_TOOL, SEARCH_TOOL

__all__ = [
    "OVERVIEW_TOOL",
    "READ_SECTION_TOOL",
    "RECOVERY_CONTEXT_TOOL",
    "RECOVERY_TOOLS",
    "SEARCH_TOOL",
    "CursorError",
    "SessionRecovery",
    "SessionView",
]

RECOVERY_TOOLS: tuple[ToolSpec, ...] = (
    OVERVIEW_TOOL,
    READ_SECTION_TOOL,
    SEARCH_TOOL,
    RECOVERY_CONTEXT_TOOL,
)
"""The four registrations, in the order they are offered to a model."""


class SessionRecovery:
    """The recovery tools over one session (``None``: no session, every call says so).

    ``leaf`` fixes the active branch's leaf; by default it is the session's current leaf
    at call time. The session is read at every call, so entries appended meanwhile count.
    """

    def __init__(self, session: Optional[SessionFile], leaf: Optional[str] = None) -> None:
        self.view = SessionView(session, leaf)

    def overview(self, args: Mapping[str, Any]) -> ToolResult:
        """``session_overview``: ``scope``, ``max_sections``, ``cursor``."""
        return session_overview(self.view, args)

    def read_section(self, args: Mapping[str, Any]) -> ToolResult:
        """``session_read_section``: ``section_id`` | ``entry_id`` | ``cursor``, ``scope``,
        ``max_entries``, ``max_body_chars``."""
        return session_read_section(self.view, args)

    def search(self, args: Mapping[str, Any]) -> ToolResult:
        """``session_search``: ``query``, ``scope``, ``case_sensitive``, ``limit``, ``cursor``."""
        return session_search(self.view, args)

    def recovery_context(
        self, args: Mapping[str, Any], tool_call_id: Optional[str] = None
    ) -> ToolResult:
        """``session_recovery_context``: ``scope``, ``recent_error_limit``; ``tool_call_id``
        is the id of the call running this tool (left out of the unmatched calls)."""
        return session_recovery_context(self.view, args, tool_call_id)
