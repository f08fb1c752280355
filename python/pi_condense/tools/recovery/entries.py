"""Reading raw session entries defensively: which are usable, and what text they hold.

An entry counts only if it is an object with a non-empty string ``id`` and ``type``; every
other field is checked before use, so partially shaped entries degrade to less text rather
than errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from .text import compact_json

__all__ = [
    "Entry",
    "ToolCall",
    "display_text",
    "is_entry",
    "message_of",
    "role_of",
    "search_text",
    "summary_of",
    "text_from_content",
    "tool_calls_of",
    "tool_result_of",
    "usable_entries",
]

Entry = Mapping[str, Any]
"""A raw session entry that passed :func:`is_entry`."""


@dataclass(frozen=True)
class ToolCall:
    """A ``toolCall`` block of an assistant message, with the entry that holds it."""

    id: str
    name: str
    arguments: Any
    entry_id: str


def is_entry(value: Any) -> bool:
    """An object with a non-empty string ``id`` and a non-empty string ``type``."""
    if not isinstance(value, Mapping):
        return False
    entry_id, kind = value.get("id"), value.get("type")
    return isinstance(entry_id, str) and bool(entry_id) and isinstance(kind, str) and bool(kind)


def usable_entries(values: Any) -> list[Entry]:
    """The entries of a list that pass :func:`is_entry`, in order."""
    return [v for v in values if is_entry(v)] if isinstance(values, list) else []


def message_of(entry: Entry) -> Optional[Mapping[str, Any]]:
    """The message of a ``message`` entry, or None."""
    message = entry.get("message")
    return message if entry.get("type") == "message" and isinstance(message, Mapping) else None


def role_of(entry: Entry) -> Optional[str]:
    """The message role of a ``message`` entry, or None."""
    message = message_of(entry)
    role = message.get("role") if message is not None else None
    return role if isinstance(role, str) else None


def text_from_content(content: Any) -> str:
    """A string content as is; else the ``text`` blocks' texts joined with newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        part["text"]
        for part in content
        if isinstance(part, Mapping)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    )


def tool_calls_of(entry: Entry) -> list[ToolCall]:
    """The tool calls of an assistant message entry (blocks with string ``id`` and ``name``)."""
    message = message_of(entry)
    content = message.get("content") if message is not None else None
    if not isinstance(content, list):
        return []
    return [
        ToolCall(part["id"], part["name"], part.get("arguments"), str(entry["id"]))
        for part in content
        if isinstance(part, Mapping)
        and part.get("type") == "toolCall"
        and isinstance(part.get("id"), str)
        and isinstance(part.get("name"), str)
    ]


def tool_result_of(entry: Entry) -> Optional[Mapping[str, Any]]:
    """The message of a ``toolResult`` message entry, or None."""
    message = message_of(entry)
    return message if message is not None and message.get("role") == "toolResult" else None


def summary_of(entry: Entry) -> str:
    """The ``summary`` of a ``compaction`` / ``branch_summary`` entry, else ``""``."""
    summary = entry.get("summary")
    if entry.get("type") in ("compaction", "branch_summary") and isinstance(summary, str):
        return summary
    return ""


def _bash_text(message: Mapping[str, Any]) -> list[str]:
    """Command and output of a user-run ``bashExecution`` message."""
    return [
        value
        for value in (message.get("command"), message.get("output"))
        if isinstance(value, str) and value
    ]


def search_text(entry: Entry) -> str:
    """What search looks in: message text, tool names and compact JSON arguments, a tool
    result's call id, a ``bashExecution``'s command and output, custom-message text and
    compaction / branch summaries. ``custom`` entries (extension state) hold none."""
    chunks: list[str] = []
    message = message_of(entry)
    if message is not None:
        text = text_from_content(message.get("content"))
        if text:
            chunks.append(text)
        for call in tool_calls_of(entry):
            chunks += [call.name, compact_json(call.arguments)]
        if message.get("role") == "toolResult" and isinstance(message.get("toolCallId"), str):
            chunks.append(message["toolCallId"])
        if message.get("role") == "bashExecution":
            chunks += _bash_text(message)
    elif entry.get("type") == "custom_message":
        text = text_from_content(entry.get("content"))
        if text:
            chunks.append(text)
    summary = summary_of(entry)
    if summary:
        chunks.append(summary)
    return "\n".join(chunks)


def display_text(entry: Entry) -> str:
    """The entry's own words for previews: message, custom-message or summary text."""
    message = message_of(entry)
    if message is not None:
        text = text_from_content(message.get("content"))
        if not text and message.get("role") == "bashExecution":
            text = "\n".join(_bash_text(message))
        if text:
            return text
    elif entry.get("type") == "custom_message":
        text = text_from_content(entry.get("content"))
        if text:
            return text
    return summary_of(entry)
