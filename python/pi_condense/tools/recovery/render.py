"""Rendering one raw entry as text, a page of its body at a time.

An entry renders as a heading ``[<id>] <timestamp> <type> <role>`` (absent parts skipped)
and a body: the message text, one ``tool_call <name>#<id> <JSON args>`` line per tool call,
``tool_result <tool>#<call id>`` (plus `` error``) for a tool result, command and output of
a user-run bash execution, the summary and ``firstKeptEntryId`` / ``tokensBefore`` of a
compaction, the summary and ``fromId`` of a branch summary, the text of a custom message,
and the compact JSON of the remaining fields for any other entry. A tool result that
Context Gateway compacted (``details.contextGateway.representation ==
"web-recoverable-compact"``) also shows its structured ``details`` under
``recoverable_raw_details:``, so the original web result can be recovered.

The body is paged: :func:`render_page` shows at most ``max_chars`` UTF-16 units from an
offset and says how much more is available; the pages of a body, concatenated, are the body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ...js import json as jsjson
from ...js.values import to_string
from .entries import Entry, message_of, role_of, text_from_content, tool_calls_of
from .text import compact_json, js_len, js_window

__all__ = ["Page", "entry_body", "entry_heading", "render_page"]

_BASE_KEYS = ("id", "parentId", "timestamp", "type")
_WEB_COMPACT = "web-recoverable-compact"


@dataclass(frozen=True)
class Page:
    """One rendered page of an entry; ``next_offset`` is None when the body is complete."""

    text: str
    next_offset: Optional[int]
    body_chars: int


def entry_heading(entry: Entry) -> str:
    """``[<id>] <timestamp> <type> <role>``, skipping absent parts."""
    parts = [f"[{entry['id']}]"]
    timestamp = entry.get("timestamp")
    if isinstance(timestamp, str) and timestamp:
        parts.append(timestamp)
    parts.append(str(entry["type"]))
    role = role_of(entry)
    if role:
        parts.append(role)
    return " ".join(parts)


def _is_web_compact(message: Mapping[str, Any]) -> bool:
    details = message.get("details")
    gateway = details.get("contextGateway") if isinstance(details, Mapping) else None
    return isinstance(gateway, Mapping) and gateway.get("representation") == _WEB_COMPACT


def _message_lines(message: Mapping[str, Any], entry: Entry) -> list[str]:
    lines: list[str] = []
    role = message.get("role")
    if role == "toolResult":
        name = message.get("toolName")
        call_id = message.get("toolCallId")
        line = (
            f"tool_result {name if isinstance(name, str) else 'unknown'}"
            f"#{call_id if isinstance(call_id, str) else 'unknown'}"
        )
        lines.append(line + (" error" if message.get("isError") is True else ""))
    if role == "bashExecution":
        command = message.get("command")
        lines.append(f"bash_execution $ {command if isinstance(command, str) else ''}".rstrip())
        if isinstance(message.get("exitCode"), (int, float)):
            lines.append(f"exitCode: {to_string(message['exitCode'])}")
        if isinstance(message.get("output"), str) and message["output"]:
            lines.append(message["output"])
    text = text_from_content(message.get("content"))
    if text:
        lines.append(text)
    for call in tool_calls_of(entry):
        lines.append(f"tool_call {call.name}#{call.id} {compact_json(call.arguments)}")
    if role == "toolResult" and _is_web_compact(message):
        lines.append("recoverable_raw_details:\n" + jsjson.dumps(message["details"], 2))
    return lines


def entry_body(entry: Entry) -> str:
    """The full body of ``entry`` (see the module docstring)."""
    kind = entry.get("type")
    message = message_of(entry)
    lines: list[str]
    if message is not None:
        lines = _message_lines(message, entry)
    elif kind in ("compaction", "branch_summary"):
        summary = entry.get("summary")
        lines = [summary] if isinstance(summary, str) and summary else []
        if kind == "compaction":
            if isinstance(entry.get("firstKeptEntryId"), str):
                lines.append(f"firstKeptEntryId: {entry['firstKeptEntryId']}")
            tokens = entry.get("tokensBefore")
            if isinstance(tokens, (int, float)) and not isinstance(tokens, bool):
                lines.append(f"tokensBefore: {to_string(tokens)}")
        elif isinstance(entry.get("fromId"), str):
            lines.append(f"fromId: {entry['fromId']}")
    elif kind == "custom_message":
        text = text_from_content(entry.get("content"))
        lines = [text] if text else []
    else:
        fields = {k: v for k, v in entry.items() if k not in _BASE_KEYS}
        lines = [compact_json(fields)] if fields else []
    return "\n".join(lines)


def render_page(entry: Entry, offset: int, max_chars: int) -> Page:
    """The heading and ``max_chars`` units of the body from ``offset``, with a note when
    more of the body remains."""
    body = entry_body(entry)
    total = js_len(body)
    piece, end = js_window(body, offset, max_chars)
    heading = entry_heading(entry)
    if offset:
        heading += f" (continued from char {offset})"
    text = heading + ("\n" + piece if piece else "")
    if end < total:
        text += (
            f"\n\u2026[more available: {total - end} of {total} chars remain; "
            "pass nextCursor to continue]"
        )
        return Page(text, end, total)
    return Page(text, None, total)
