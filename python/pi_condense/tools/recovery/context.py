"""``session_recovery_context``: deterministic signals for picking a task back up.

Evidence only, nothing inferred: the first and the latest user message, the latest error
tool results (``recentErrors``: they may have been fixed since), tool calls without a
result (except the call running this tool), read and modified files from recognized tools,
the last meaningful action and the number of compactions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, TypeVar

from ..base import ToolResult
from .common import (
    BODY_CHARS,
    RECENT_ERRORS,
    RECOVERY_FILES,
    RECOVERY_PENDING,
    SessionView,
    clamp_int,
    empty_result,
    payload_result,
    scope_of,
)
from .entries import (
    Entry,
    ToolCall,
    display_text,
    role_of,
    search_text,
    text_from_content,
    tool_calls_of,
    tool_result_of,
)
from .files import file_evidence
from .sections import build_sections, section_ids_by_entry
from .text import js_trim, preview, truncate

__all__ = ["session_recovery_context"]

_T = TypeVar("_T")


def _head_and_tail(values: Sequence[_T], maximum: int) -> tuple[list[_T], int]:
    """At most ``maximum`` values, keeping the first and last ones; and how many were left out."""
    if len(values) <= maximum:
        return list(values), 0
    head = (maximum + 1) // 2
    tail = maximum // 2
    return [*values[:head], *values[len(values) - tail :]], len(values) - maximum


def _meaningful(entry: Entry, current_call: Optional[str]) -> Optional[dict[str, Any]]:
    calls = [c for c in tool_calls_of(entry) if c.id != current_call]
    text = display_text(entry)
    kind = entry.get("type")
    if not text and not calls and kind not in ("compaction", "branch_summary"):
        return None
    action: dict[str, Any] = {"entryId": entry["id"], "type": kind}
    role = role_of(entry)
    if role is not None:
        action["role"] = role
    if text:
        action["preview"] = preview(text, 300)
    if calls:
        action["toolCalls"] = [{"id": c.id, "name": c.name} for c in calls]
    return action


def session_recovery_context(
    view: SessionView, args: Mapping[str, Any], current_call: Optional[str] = None
) -> ToolResult:
    """The recovery signals of the scope; ``current_call`` is the id of the running call."""
    scope = scope_of(args)
    entries = view.entries(scope)
    if not entries:
        return empty_result(scope)
    sections = build_sections(entries)
    section_of = section_ids_by_entry(sections)

    def user_request(entry: Optional[Entry]) -> Optional[dict[str, Any]]:
        if entry is None:
            return None
        text = truncate(search_text(entry), BODY_CHARS[0])
        return {"entryId": entry["id"], "sectionId": section_of.get(entry["id"]), "text": text}

    users = [e for e in entries if role_of(e) == "user" and js_trim(search_text(e))]
    pending: dict[str, ToolCall] = {}
    errors: list[dict[str, Any]] = []
    for entry in entries:
        for call in tool_calls_of(entry):
            pending.pop(call.id, None)
            pending[call.id] = call
        result = tool_result_of(entry)
        if result is None:
            continue
        call_id = result.get("toolCallId")
        if isinstance(call_id, str):
            pending.pop(call_id, None)
        if result.get("isError") is True:
            name = result.get("toolName")
            errors.append(
                {
                    "entryId": entry["id"],
                    "sectionId": section_of.get(entry["id"]),
                    "toolCallId": call_id if isinstance(call_id, str) else None,
                    "toolName": name if isinstance(name, str) else None,
                    "message": preview(text_from_content(result.get("content")), 500),
                }
            )
    if current_call is not None:
        pending.pop(current_call, None)

    files = file_evidence(entries)
    read_files, omitted_read = _head_and_tail(files.read_files, RECOVERY_FILES)
    modified_files, omitted_modified = _head_and_tail(files.modified_files, RECOVERY_FILES)
    calls, omitted_calls = _head_and_tail(list(pending.values()), RECOVERY_PENDING)
    error_limit = clamp_int(args.get("recent_error_limit"), RECENT_ERRORS)
    last_action = next(
        (a for a in (_meaningful(e, current_call) for e in reversed(entries)) if a is not None),
        None,
    )
    recent_errors = errors[-error_limit:]
    payload = {
        "scope": scope,
        "originalUserRequest": user_request(users[0] if users else None),
        "latestUserInstruction": user_request(users[-1] if users else None),
        "readFiles": read_files,
        "modifiedFiles": modified_files,
        "omittedReadFiles": omitted_read,
        "omittedModifiedFiles": omitted_modified,
        "recentErrors": recent_errors,
        "pendingToolCalls": [
            {
                "id": c.id,
                "name": c.name,
                "entryId": c.entry_id,
                "sectionId": section_of.get(c.entry_id),
            }
            for c in calls
        ],
        "omittedPendingToolCalls": omitted_calls,
        "lastMeaningfulAction": last_action,
        "compactionCount": sum(1 for e in entries if e.get("type") == "compaction"),
        "entryCount": len(entries),
        "sectionCount": len(sections),
    }
    details = {
        "scope": scope,
        "entryCount": len(entries),
        "sectionCount": len(sections),
        "recentErrorCount": len(recent_errors),
        "pendingToolCallCount": len(calls),
    }
    return payload_result(payload, details)
