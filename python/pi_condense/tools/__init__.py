"""Tools a model can call: ``context_tree_query`` and the session recovery tools.

``condense_tools(session)`` bundles all five over one session, with OpenAI / Anthropic
definitions and a single ``execute(name, args)`` dispatch.

The names below (and the submodules) are imported on first use (PEP 562): the pruner imports
``tools.spill_access`` to read spill files, and that should not load every recovery tool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
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

_HOME = {
    "ToolResult": "base",
    "ToolSpec": "base",
    "QUERY_TOOL": "query",
    "ContextTreeQuery": "query",
    "OVERVIEW_TOOL": "recovery",
    "READ_SECTION_TOOL": "recovery",
    "RECOVERY_CONTEXT_TOOL": "recovery",
    "RECOVERY_TOOLS": "recovery",
    "SEARCH_TOOL": "recovery",
    "CursorError": "recovery",
    "SessionRecovery": "recovery",
    "Tool": "registry",
    "ToolRegistry": "registry",
    "condense_tools": "registry",
    "DEFAULT_MAX_BYTES": "truncate",
    "DEFAULT_MAX_LINES": "truncate",
    "TruncationResult": "truncate",
    "truncate_head": "truncate",
}

# The submodules the eager package bound as attributes (``pi_condense.tools.recovery`` after
# ``import pi_condense.tools``); still reachable that way.
_SUBMODULES = frozenset({*_HOME.values(), "spill_access"})

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


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOME, _SUBMODULES)
