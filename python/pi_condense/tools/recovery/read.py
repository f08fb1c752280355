"""``session_read_section``: one section, or one exact entry, a bounded page at a time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ..base import ToolResult
from .common import (
    BODY_CHARS,
    PAGE_BUDGET,
    SECTION_ENTRIES,
    SessionView,
    clamp_int,
    empty_result,
    error_result,
    payload_result,
    scope_of,
)
from .cursors import Cursor, CursorError, decode_cursor
from .entries import Entry
from .render import entry_body, render_page
from .sections import Section, build_sections, section_ids_by_entry
from .text import js_len

__all__ = ["session_read_section"]

_ID_CHARS = 200


class _BadArgument(ValueError):
    """An id argument that is not a usable string."""


def _id_arg(args: Mapping[str, Any], key: str) -> Optional[str]:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or js_len(value) > _ID_CHARS:
        raise _BadArgument(f"{key} must be a non-empty string of at most {_ID_CHARS} characters.")
    return value


def _stale(message: str, scope: str) -> ToolResult:
    return error_result(f"Stale cursor: {message}", {"scope": scope})


def session_read_section(view: SessionView, args: Mapping[str, Any]) -> ToolResult:
    """Render a section (``section_id``) or an entry (``entry_id``), or continue a cursor."""
    scope = scope_of(args)
    try:
        section_id = _id_arg(args, "section_id")
        entry_id = _id_arg(args, "entry_id")
    except _BadArgument as exc:
        return error_result(str(exc), {"scope": scope})
    token = args.get("cursor")
    if token is None and (section_id is None) == (entry_id is None):
        return error_result(
            "Pass exactly one of section_id or entry_id (or the cursor of a previous "
            "session_read_section call).",
            {"scope": scope},
        )
    entries = view.entries(scope)
    if not entries:
        return empty_result(scope)
    body_chars = clamp_int(args.get("max_body_chars"), BODY_CHARS)
    max_entries = clamp_int(args.get("max_entries"), SECTION_ENTRIES)
    sections = build_sections(entries)
    if token is None:
        if section_id is not None:
            return _read_section(view, scope, sections, section_id, 0, 0, body_chars, max_entries)
        assert entry_id is not None
        return _read_entry(view, scope, sections, entries, entry_id, 0, body_chars)
    try:
        cursor = decode_cursor(token, kind="read", scope=scope, session_id=view.session_id)
    except CursorError as exc:
        return error_result(str(exc), {"scope": scope})
    if cursor.section:
        if entry_id is not None or section_id not in (None, cursor.section):
            return error_result(
                f"Cursor mismatch: this cursor continues section {cursor.section}; pass it "
                "alone or with that section_id.",
                {"scope": scope},
            )
        section = next((s for s in sections if s.id == cursor.section), None)
        if section is None:
            return _stale(
                f"section {cursor.section} no longer exists in scope {scope}. Run "
                "session_overview with the same scope to refresh section IDs.",
                scope,
            )
        index = next((i for i, e in enumerate(section.entries) if e["id"] == cursor.anchor), -1)
        if index < 0:
            return _stale(f"entry {cursor.anchor} is no longer in {section.id}.", scope)
        return _read_section(
            view, scope, sections, section.id, index, cursor.offset, body_chars, max_entries
        )
    if section_id is not None or entry_id not in (None, cursor.anchor):
        return error_result(
            f"Cursor mismatch: this cursor continues entry {cursor.anchor}; pass it alone or "
            "with that entry_id.",
            {"scope": scope},
        )
    return _read_entry(view, scope, sections, entries, cursor.anchor, cursor.offset, body_chars)


def _cursor(view: SessionView, scope: str, anchor: str, section: str, offset: int) -> str:
    return Cursor("read", scope, view.session_id, "", anchor, section, offset).encode()


def _read_section(
    view: SessionView,
    scope: str,
    sections: list[Section],
    section_id: str,
    index: int,
    offset: int,
    body_chars: int,
    max_entries: int,
) -> ToolResult:
    section = next((s for s in sections if s.id == section_id), None)
    if section is None:
        return payload_result(
            f"Section {section_id} was not found in scope {scope}. Run session_overview with "
            "the same scope to refresh section IDs.",
            {"scope": scope, "sectionId": section_id, "found": False, "sourceAvailable": False},
        )
    title = f"Section {section.id}: {section.label}"
    parts = [title]
    used = js_len(title)
    resume: Optional[tuple[str, int]] = None
    rendered = 0
    position = index
    while position < len(section.entries):
        entry = section.entries[position]
        if rendered == max_entries:
            resume = (str(entry["id"]), 0)
            break
        if offset > 0 and rendered == 0 and _past_end(entry, offset):
            return _stale(f"entry {entry['id']} changed since the cursor was issued.", scope)
        page = render_page(entry, offset if rendered == 0 else 0, body_chars)
        if rendered > 0 and used + js_len(page.text) + 2 > PAGE_BUDGET:
            resume = (str(entry["id"]), 0)
            break
        parts.append(page.text)
        used += js_len(page.text) + 2
        rendered += 1
        position += 1
        if page.next_offset is not None:
            resume = (str(entry["id"]), page.next_offset)
            break
    later = len(section.entries) - position
    if later > 0:
        parts.append(
            f"\u2026 {later} more {'entry' if later == 1 else 'entries'} in this section; "
            "pass nextCursor to continue."
        )
    details: dict[str, Any] = {
        "scope": scope,
        "sectionId": section.id,
        "entryCount": len(section.entries),
        "startEntryIndex": index,
        "renderedCount": rendered,
        "truncated": resume is not None,
        "hasMore": resume is not None,
        "sourceAvailable": True,
    }
    if resume is not None:
        details["nextCursor"] = _cursor(view, scope, resume[0], section.id, resume[1])
    return payload_result("\n\n".join(parts), details)


def _past_end(entry: Entry, offset: int) -> bool:
    return offset > js_len(entry_body(entry))


def _read_entry(
    view: SessionView,
    scope: str,
    sections: list[Section],
    entries: list[Entry],
    entry_id: str,
    offset: int,
    body_chars: int,
) -> ToolResult:
    entry = next((e for e in entries if e["id"] == entry_id), None)
    if entry is None:
        if offset:
            return _stale(f"entry {entry_id} is no longer in scope {scope}.", scope)
        return payload_result(
            f"Entry {entry_id} was not found in scope {scope}. Use session_search or "
            "session_overview with the same scope to find entry IDs.",
            {"scope": scope, "entryId": entry_id, "found": False, "sourceAvailable": False},
        )
    if _past_end(entry, offset):
        return _stale(f"entry {entry_id} changed since the cursor was issued.", scope)
    page = render_page(entry, offset, body_chars)
    details: dict[str, Any] = {
        "scope": scope,
        "entryId": entry_id,
        "sectionId": section_ids_by_entry(sections).get(entry_id),
        "sourceAvailable": True,
        "truncated": page.next_offset is not None,
        "hasMore": page.next_offset is not None,
    }
    if page.next_offset is not None:
        details["nextCursor"] = _cursor(view, scope, entry_id, "", page.next_offset)
    return payload_result(page.text, details)
