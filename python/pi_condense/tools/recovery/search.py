"""``session_search``: bounded literal substring search over raw entries, paged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...js import json as jsjson
from ..base import ToolResult
from .common import (
    PAGE_BUDGET,
    QUERY_CHARS,
    SEARCH_RESULTS,
    SessionView,
    clamp_int,
    empty_result,
    error_result,
    payload_result,
    scope_of,
)
from .cursors import Cursor, CursorError, decode_cursor, fingerprint
from .entries import role_of, search_text
from .sections import build_sections, section_ids_by_entry
from .text import collapse, js_head, js_len, js_trim, preview

__all__ = ["session_search"]

_SNIPPET_CHARS = 360


def _snippet(text: str, query: str, case_sensitive: bool) -> str:
    """About 360 characters of ``text`` centred on the first hit, on one line."""
    haystack = text if case_sensitive else text.lower()
    needle = query if case_sensitive else query.lower()
    index = haystack.find(needle)
    if index < 0:
        return preview(text, _SNIPPET_CHARS)
    start = max(0, index - (_SNIPPET_CHARS - len(needle)) // 2)
    end = min(len(text), start + _SNIPPET_CHARS)
    piece = collapse(text[start:end])
    return ("\u2026" if start > 0 else "") + piece + ("\u2026" if end < len(text) else "")


def session_search(view: SessionView, args: Mapping[str, Any]) -> ToolResult:
    """Entries whose text holds ``query`` (case-insensitive unless ``case_sensitive``)."""
    scope = scope_of(args)
    raw_query = args.get("query")
    if not isinstance(raw_query, str):
        return error_result("query must be a string.", {"scope": scope})
    entries = view.entries(scope)
    if not entries:
        return empty_result(scope)
    query = js_head(js_trim(raw_query), QUERY_CHARS)
    if not query:
        return payload_result(
            "Search query must not be empty.", {"scope": scope, "query": query, "matchCount": 0}
        )
    case_sensitive = args.get("case_sensitive") is True
    request = fingerprint(query, case_sensitive)
    start = 0
    if args.get("cursor") is not None:
        try:
            cursor = decode_cursor(
                args["cursor"],
                kind="search",
                scope=scope,
                session_id=view.session_id,
                fingerprint=request,
            )
        except CursorError as exc:
            return error_result(str(exc), {"scope": scope, "query": query})
        start = next((i + 1 for i, e in enumerate(entries) if e["id"] == cursor.anchor), -1)
        if start < 0:
            return error_result(
                f"Stale cursor: entry {cursor.anchor} is no longer in scope {scope}. "
                "Search again without a cursor.",
                {"scope": scope, "query": query},
            )
    needle = query if case_sensitive else query.lower()
    limit = clamp_int(args.get("limit"), SEARCH_RESULTS)
    section_of = section_ids_by_entry(build_sections(entries))
    matches: list[dict[str, Any]] = []
    total = before = 0
    last_index = -1
    used = 0
    for index, entry in enumerate(entries):
        text = search_text(entry)
        if not text or needle not in (text if case_sensitive else text.lower()):
            continue
        total += 1
        if index < start:
            before += 1
            continue
        if len(matches) >= limit or used > PAGE_BUDGET - 2000:
            continue
        match: dict[str, Any] = {
            "entryId": entry["id"],
            "sectionId": section_of.get(entry["id"]),
            "type": entry["type"],
        }
        role = role_of(entry)
        if role is not None:
            match["role"] = role
        timestamp = entry.get("timestamp")
        match["timestamp"] = timestamp if isinstance(timestamp, str) else None
        match["snippet"] = _snippet(text, query, case_sensitive)
        matches.append(match)
        used += js_len(jsjson.dumps(match, 2)) + 6
        last_index = index
    remaining = total - before - len(matches)
    payload: dict[str, Any] = {
        "scope": scope,
        "query": query,
        "caseSensitive": case_sensitive,
        "totalMatches": total,
        "skippedMatches": before,
        "returnedMatches": len(matches),
        "matches": matches,
        "hasMore": remaining > 0,
    }
    details: dict[str, Any] = {
        "scope": scope,
        "query": query,
        "caseSensitive": case_sensitive,
        "matchCount": total,
        "returnedCount": len(matches),
        "truncated": remaining > 0,
        "hasMore": remaining > 0,
    }
    if remaining > 0:
        anchor = str(entries[last_index]["id"]) if last_index >= 0 else ""
        token = Cursor("search", scope, view.session_id, request, anchor).encode()
        payload["nextCursor"] = details["nextCursor"] = token
    return payload_result(payload, details)
