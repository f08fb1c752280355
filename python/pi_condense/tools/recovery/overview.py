"""``session_overview``: the session as pages of stable sections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...js import json as jsjson
from ...js.values import map_key
from ..base import ToolResult
from .common import (
    OVERVIEW_SECTIONS,
    PAGE_BUDGET,
    SessionView,
    clamp_int,
    empty_result,
    error_result,
    payload_result,
    scope_of,
)
from .cursors import Cursor, CursorError, decode_cursor
from .entries import Entry
from .sections import build_sections, section_summary
from .text import js_len

__all__ = ["session_overview"]


def _leaf_count(entries: list[Entry]) -> int:
    """Entries that are no other entry's parent."""
    # A parentId may be any JSON value (an object or array links to nothing, as in Pi's Map).
    ids = {map_key(e["id"]) for e in entries}
    parents = {key for e in entries if (key := map_key(e.get("parentId"))) in ids}
    return sum(1 for e in entries if map_key(e["id"]) not in parents)


def session_overview(view: SessionView, args: Mapping[str, Any]) -> ToolResult:
    """Counts and a page of section summaries; ``nextCursor`` continues after the page."""
    scope = scope_of(args)
    entries = view.entries(scope)
    if not entries:
        return empty_result(scope)
    sections = build_sections(entries)
    start = 0
    if args.get("cursor") is not None:
        try:
            cursor = decode_cursor(
                args["cursor"], kind="overview", scope=scope, session_id=view.session_id
            )
        except CursorError as exc:
            return error_result(str(exc), {"scope": scope})
        positions = {s.id: i for i, s in enumerate(sections)}
        if cursor.anchor not in positions:
            return error_result(
                f"Stale cursor: section {cursor.anchor} no longer exists in scope {scope}. "
                "Run session_overview again without a cursor.",
                {"scope": scope},
            )
        start = positions[cursor.anchor] + 1

    active = entries if scope == "active" else view.entries("active")
    every = entries if scope == "all" else view.entries("all")
    leaves = _leaf_count(every)
    limit = clamp_int(args.get("max_sections"), OVERVIEW_SECTIONS)
    page = sections[start : start + limit]
    payload: dict[str, Any] = {
        "scope": scope,
        "session": view.info(),
        "counts": {
            "selectedEntries": len(entries),
            "activeEntries": len(active),
            "allEntries": len(every),
            "sections": len(sections),
            "compactions": sum(1 for e in entries if e.get("type") == "compaction"),
            "leaves": leaves,
            "otherBranches": max(0, leaves - (1 if active else 0)),
        },
        "firstSection": start + 1 if page else None,
        "sections": [section_summary(s) for s in page],
    }
    # Drop trailing summaries until the page fits the output budget (at least one stays).
    while len(payload["sections"]) > 1 and js_len(jsjson.dumps(payload, 2)) > PAGE_BUDGET:
        payload["sections"].pop()
    shown = len(payload["sections"])
    remaining = len(sections) - start - shown
    payload["remainingSections"] = remaining
    payload["hasMore"] = remaining > 0
    details: dict[str, Any] = {
        "scope": scope,
        "entryCount": len(entries),
        "sectionCount": len(sections),
        "returnedSections": shown,
        "remainingSections": remaining,
        "hasMore": remaining > 0,
    }
    if remaining > 0:
        last = sections[start + shown - 1].id
        token = Cursor("overview", scope, view.session_id, "", last).encode()
        payload["nextCursor"] = details["nextCursor"] = token
    return payload_result(payload, details)
