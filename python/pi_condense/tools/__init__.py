"""Tools a model can call: ``context_tree_query`` and the session recovery tools.

``condense_tools(session)`` bundles all five over one session, with OpenAI / Anthropic
definitions and a single ``execute(name, args)`` dispatch.
"""

from __future__ import annotations

from .base import ToolResult, ToolSpec
from .query import QUERY_TOOL, ContextTreeQuery
from .recovery import (
    OVERVIEW_TOOL,
    READ_SECTION_TOOL,
    RECOVERY_CONTEXT_TOOL,
    RECOVERY_TOOLS,
    SEARCH_TOOL,
    CursorError,
    SessionRecovery,
)
from .registry import Tool, ToolRegistry, condense_tools
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, TruncationResult, truncate_head

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "OVERVIEW_TOOL",
    "QUERY_TOOL",
    "READ_SECTION_TOOL",
    "RECOVERY_CONTEXT_TOOL",
    "RECOVERY_TOOLS",
    "SEARCH_TOOL",
    "ContextTreeQuery",
    "CursorError",
    "SessionRecovery",
    "Tool",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "TruncationResult",
    "condense_tools",
    "truncate_head",
]
