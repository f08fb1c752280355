"""A session's pruning stats read from its entries: the conversation without the
pruner's messages, and the summarizer stats with one row per batch and per stats update."""

from __future__ import annotations

from typing import Any, Optional

from .js import json as jsjson
from .session import SessionFile
from .state import PrunerState

__all__ = ["raw_conversation", "stats_report"]

SUMMARY = "context-prune-summary"
STATS = "context-prune-stats"


def raw_conversation(messages: list[Any]) -> list[Any]:
    """The context without the pruner's own messages (its summaries): the conversation as it
    would be sent had nothing been condensed."""
    return [
        m
        for m in messages
        if not (
            isinstance(m, dict)
            and m.get("role") == "custom"
            and str(m.get("customType", "")).startswith("context-prune-")
        )
    ]


def _record_chars(record: Optional[dict[str, Any]]) -> int:
    if record is None:
        return 0
    text = record.get("resultText")
    if isinstance(text, str) and text:
        return jsjson.utf16_len(text)
    spilled = record.get("spillBytes")
    return spilled if isinstance(spilled, int) else 0


def stats_report(session: SessionFile) -> dict[str, Any]:
    """Cumulative stats (the branch's last ``context-prune-stats``), one row per summarized
    batch, and one row per stats entry with what it added (a flush, or a compression)."""
    branch = session.branch()
    state = PrunerState.from_branch(branch)
    batches: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    previous = {"callCount": 0, "totalInputTokens": 0, "totalOutputTokens": 0, "totalCost": 0}
    previous_chains = 0
    for entry in branch:
        kind = entry.get("customType")
        if kind == SUMMARY and entry.get("type") == "custom_message":
            details = entry.get("details") if isinstance(entry.get("details"), dict) else {}
            refs = details.get("toolCallRefs") if isinstance(details, dict) else None
            refs = [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []
            content = entry.get("content")
            keys = [state.resolve(str(r.get("shortId"))) for r in refs]
            records = [state.get_record(k) for k in keys if k is not None]
            batches.append(
                {
                    "flush": len(updates) + 1,
                    "turnIndex": details.get("turnIndex") if isinstance(details, dict) else None,
                    "timestamp": details.get("timestamp") if isinstance(details, dict) else None,
                    "refs": [r.get("shortId") for r in refs],
                    "toolCalls": len(refs),
                    "rawChars": sum(_record_chars(r) for r in records),
                    "summaryChars": jsjson.utf16_len(content) if isinstance(content, str) else 0,
                }
            )
        elif (
            kind == STATS and entry.get("type") == "custom" and isinstance(entry.get("data"), dict)
        ):
            data = entry["data"]
            chains = data.get("chainsCompressed", 0) or 0
            updates.append(
                {
                    "calls": (data.get("callCount", 0) or 0) - previous["callCount"],
                    "inputTokens": (data.get("totalInputTokens", 0) or 0)
                    - previous["totalInputTokens"],
                    "outputTokens": (data.get("totalOutputTokens", 0) or 0)
                    - previous["totalOutputTokens"],
                    "cost": (data.get("totalCost", 0) or 0) - previous["totalCost"],
                    "chainsCompressed": chains - previous_chains,
                    "timestamp": entry.get("timestamp"),
                }
            )
            previous = {k: data.get(k, 0) or 0 for k in previous}
            previous_chains = chains
    return {"stats": dict(state.stats), "batches": batches, "statsUpdates": updates}
