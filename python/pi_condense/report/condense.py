"""What a condense run did, as the figures `pi-condense condense --json` prints.

Shared by the ``condense`` command and the corpus batch (``corpus condense``), so one
session condensed either way reports the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..config import Config
from ..js import json as jsjson
from ..render import render
from ..replay import ReplayResult
from ..session import SessionFile
from ..state import PrunerState

__all__ = ["chars_change", "cold_chars", "condense_report", "per_call_chars", "problems"]

_INDEX = "context-prune-index"


def cold_chars(session: SessionFile, config: Config) -> tuple[int, int]:
    """(context chars, rendered chars) of a session's current branch, as a fresh load sees it."""
    messages = session.build_context().messages
    before = jsjson.length(messages)
    # one entry at a time: a session written through to its file reads each back from there
    state = PrunerState.from_branch(_without_result_texts(session.iter_custom_entries()))
    result = render(messages, state, config)
    return before, result.after_chars if result.pruned else before


def _without_result_texts(entries: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """``entries`` with the records of their index entries lacking ``resultText``: a render
    never reads a record's result text (only the flush's dedup lookups, by its hash, do), and
    read back from a written-through session each is a copy of the tool result's text."""
    for entry in entries:
        data = entry.get("data")
        if entry.get("customType") == _INDEX and isinstance(data, dict):
            calls = data.get("toolCalls")
            if isinstance(calls, list):
                calls = [
                    {k: v for k, v in call.items() if k != "resultText"}
                    if isinstance(call, dict)
                    else call
                    for call in calls
                ]
                entry = {**entry, "data": {**data, "toolCalls": calls}}
        yield entry


def per_call_chars(sizes: Sequence[tuple[int, int]]) -> dict[str, int]:
    """Context chars per model call, before and after pruning, from each call's (before, after):
    the rounded means and the last call's pair. `condense` and the HTML report both show these."""
    count = len(sizes)
    return {
        "beforeChars": round(sum(b for b, _ in sizes) / count) if count else 0,
        "afterChars": round(sum(a for _, a in sizes) / count) if count else 0,
        "lastBeforeChars": sizes[-1][0] if count else 0,
        "lastAfterChars": sizes[-1][1] if count else 0,
    }


def chars_change(before: int, after: int) -> str:
    """``522,379 -> 141,244 (73.0% smaller)`` (no share when ``before`` is 0)."""
    smaller = f" ({(before - after) / before * 100:.1f}% smaller)" if before > 0 else ""
    return f"{before:,} -> {after:,}{smaller}"


def problems(result: ReplayResult) -> list[dict[str, Any]]:
    """The condenser's warning and error notifications (e.g. failed summarizer calls), each
    once with its count, in order of first appearance."""
    counts: dict[tuple[str, str], int] = {}
    for message, level in result.notifications:
        if level in ("warning", "error"):
            counts[(level, message)] = counts.get((level, message), 0) + 1
    return [{"level": k[0], "message": k[1], "count": n} for k, n in counts.items()]


def _entry_facts(session: SessionFile) -> dict[str, Any]:
    facts: dict[str, Any] = {"summaries": 0, "chains": 0, "aliases": 0, "spilled": 0}
    stats: dict[str, Any] = {}
    for entry in session.iter_entries():
        kind = entry.get("customType")
        data = entry.get("data")
        if kind == "context-prune-summary":
            facts["summaries"] += 1
        elif kind == "context-prune-chain":
            facts["chains"] += 1
        elif kind == "context-prune-dedup-alias":
            facts["aliases"] += 1
        elif kind == "context-prune-index" and isinstance(data, dict):
            calls = data.get("toolCalls")
            facts["spilled"] += (
                sum(1 for r in calls if isinstance(r, dict) and r.get("spillPath"))
                if isinstance(calls, list)
                else 0
            )
        elif kind == "context-prune-stats" and isinstance(data, dict):
            stats = data
    facts["stats"] = stats
    return facts


def condense_report(result: ReplayResult, raw_chars: int, condensed_chars: int) -> dict[str, Any]:
    """The figures `condense` prints: calls, batch outcomes, chains, sizes, summarizer cost."""
    facts = _entry_facts(result.session)
    skipped = result.batch_notices
    sizes = result.contexts.sizes
    stats = facts["stats"]
    return {
        "llmCalls": len(sizes),
        "summarizerCalls": len(result.summarizer.calls),
        "batches": {
            "summarized": facts["summaries"],
            "deduped": skipped.get("deduped", 0),
            "trivial": skipped.get("trivial", 0),
            "oversized": skipped.get("oversized", 0),
        },
        "dedupedToolCalls": facts["aliases"],
        "spilled": facts["spilled"],
        "chains": facts["chains"],
        "perCall": per_call_chars([(s.before, s.after) for s in sizes]),
        "context": {"rawChars": raw_chars, "condensedChars": condensed_chars},
        "summarizer": {
            "inputTokens": stats.get("totalInputTokens", 0),
            "outputTokens": stats.get("totalOutputTokens", 0),
            "cost": stats.get("totalCost", 0),
        },
        "handlerErrors": [{"event": e, "error": m} for e, m in result.handler_errors],
        "warnings": list(dict.fromkeys(result.warnings)),
        "problems": problems(result),
    }
