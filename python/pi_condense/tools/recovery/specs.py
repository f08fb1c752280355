"""Registration of the four session recovery tools: names, descriptions, JSON schemas."""

from __future__ import annotations

from typing import Any

from ..base import ToolSpec
from .common import (
    BODY_CHARS,
    OVERVIEW_SECTIONS,
    QUERY_CHARS,
    RECENT_ERRORS,
    SEARCH_RESULTS,
    SECTION_ENTRIES,
)
from .cursors import MAX_CURSOR_CHARS

__all__ = ["OVERVIEW_TOOL", "READ_SECTION_TOOL", "RECOVERY_CONTEXT_TOOL", "SEARCH_TOOL"]

_SCOPE = {
    "type": "string",
    "enum": ["active", "all"],
    "description": (
        "Which raw entries to read: active (default) is the current root-to-leaf branch; "
        "all also includes abandoned branches."
    ),
}


def _number(description: str, limits: tuple[int, int, int]) -> dict[str, Any]:
    default, low, high = limits
    return {
        "type": "number",
        "description": f"{description} Default {default}.",
        "minimum": low,
        "maximum": high,
    }


def _cursor(tool: str) -> dict[str, Any]:
    return {
        "type": "string",
        "description": f"nextCursor from the previous {tool} result, to continue where it ended.",
        "maxLength": MAX_CURSOR_CHARS,
    }


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


OVERVIEW_TOOL = ToolSpec(
    name="session_overview",
    label="Session Overview",
    description=(
        "List the raw, persisted history of this session as stable sections (one "
        "per user message, compaction or branch summary) with entry ranges and counts of "
        "roles, tool calls, errors and touched files. Reads the raw entries, so history that "
        "compaction removed from your context is included. Pages with nextCursor."
    ),
    parameters=_object(
        {
            "scope": _SCOPE,
            "max_sections": _number("Sections per page.", OVERVIEW_SECTIONS),
            "cursor": _cursor("session_overview"),
        }
    ),
    prompt_snippet="Map the raw session history into sections after context was compacted",
    prompt_guidelines=(
        "When earlier task context was lost to compaction and you have no exact phrase to "
        "search for, call session_overview first, then read the relevant sections.",
    ),
)
"""Registration of ``session_overview``."""

READ_SECTION_TOOL = ToolSpec(
    name="session_read_section",
    label="Session Read Section",
    description=(
        "Read raw session history: one section by the id session_overview or session_search "
        "gave (section_id), or one exact entry (entry_id). Output is bounded per entry and "
        "in total; when more remains, pass the returned nextCursor (with the same scope) to "
        "continue exactly where it stopped."
    ),
    parameters=_object(
        {
            "section_id": {
                "type": "string",
                "description": "A section id such as section:1a2b3c4d. Pass this or entry_id.",
                "maxLength": 200,
            },
            "entry_id": {
                "type": "string",
                "description": "An exact entry id. Pass this or section_id.",
                "maxLength": 200,
            },
            "cursor": _cursor("session_read_section"),
            "scope": _SCOPE,
            "max_entries": _number("Entries per page.", SECTION_ENTRIES),
            "max_body_chars": _number("Characters of each entry body per page.", BODY_CHARS),
        }
    ),
    prompt_snippet="Read a raw session section or exact entry; continue with nextCursor",
    prompt_guidelines=(
        "Pass exactly one of section_id or entry_id, with the scope you got the id from; to "
        "continue a long section or entry, pass nextCursor instead of starting over.",
    ),
)
"""Registration of ``session_read_section``."""

SEARCH_TOOL = ToolSpec(
    name="session_search",
    label="Session Search",
    description=(
        "Find a literal phrase in the raw session history: message text, tool names and "
        "arguments, tool results (also by tool call id), custom messages, compaction and "
        "branch summaries. Case-insensitive unless case_sensitive is true; no regex, no "
        "semantic matching. Returns entry and section ids with short snippets; pages with "
        "nextCursor."
    ),
    parameters=_object(
        {
            "query": {
                "type": "string",
                "description": "The literal text to find.",
                "minLength": 1,
                "maxLength": QUERY_CHARS,
            },
            "scope": _SCOPE,
            "case_sensitive": {
                "type": "boolean",
                "description": "Match case exactly. Default false.",
            },
            "limit": _number("Matches per page.", SEARCH_RESULTS),
            "cursor": _cursor("session_search (same query, scope and case_sensitive)"),
        },
        ("query",),
    ),
    prompt_snippet="Search the raw session history for a known phrase, path, tool or error",
    prompt_guidelines=(
        "Use session_search when you know a concrete phrase, file path, symbol or error "
        "text; it matches literally, and nextCursor continues the same query.",
    ),
)
"""Registration of ``session_search``."""

RECOVERY_CONTEXT_TOOL = ToolSpec(
    name="session_recovery_context",
    label="Session Recovery Context",
    description=(
        "Summarize deterministic facts for resuming work: the first and the latest user "
        "request, files read and modified by known tools, recent error results (they may "
        "have been fixed since), tool calls still without a result, the last action and the "
        "number of compactions. Verify details with session_read_section."
    ),
    parameters=_object(
        {
            "scope": _SCOPE,
            "recent_error_limit": _number("Recent error results to list.", RECENT_ERRORS),
        }
    ),
    prompt_snippet="Collect first/latest requests, files, recent errors and pending calls",
    prompt_guidelines=(
        "Use session_recovery_context after session_overview; treat recentErrors as history, "
        "not as open problems, and check anything unclear with session_read_section.",
    ),
)
"""Registration of ``session_recovery_context``."""
