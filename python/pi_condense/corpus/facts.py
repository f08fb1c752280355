"""What a session holds (one :class:`ScanRow`) and the corpus tables built from the rows.

Re-query event and gap (seed 000): walking the branch in order, every ``context_tree_query``
tool call is placed in the user-turn group (UTG) it was issued in (the number of user-role
messages before it). For each ref string it names (``toolCallIds``, each distinct ref once
per call), a call that names a ref an earlier call on the branch already named is a
re-query event; its gap is its UTG minus the UTG of the latest earlier call naming that ref.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ..config import Config
from ..js import json as jsjson
from ..render import render
from ..session import SessionFile
from ..state import PrunerState
from ..usage import estimate_tokens
from .models import (
    GAP_THRESHOLDS,
    GapTable,
    LengthBucket,
    LengthTable,
    Problem,
    ScanAggregate,
    ScanRow,
    TaskFailure,
)

__all__ = ["LENGTH_BUCKETS", "aggregate", "query_refs", "requery_gaps", "scan_session"]

QUERY_TOOL_NAME = "context_tree_query"
_PRUNER_PREFIX = "context-prune-"

LENGTH_BUCKETS: tuple[tuple[int, Optional[int]], ...] = (
    (0, 0),
    (1, 1),
    (2, 2),
    (3, 3),
    (4, 5),
    (6, 10),
    (11, 20),
    (21, None),
)
"""The session-length table's buckets (user-turn groups, inclusive)."""


def _messages(branch: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    for entry in branch:
        if entry.get("type") == "message":
            message = entry.get("message")
            if isinstance(message, dict):
                yield message


def _tool_calls(message: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, dict) and block.get("type") == "toolCall":
            yield block


def query_refs(call: Mapping[str, Any]) -> list[str]:
    """The distinct ref strings a ``context_tree_query`` call names, in order."""
    arguments = call.get("arguments")
    ids = arguments.get("toolCallIds") if isinstance(arguments, dict) else None
    if not isinstance(ids, list):
        return []
    return list(dict.fromkeys(i for i in ids if isinstance(i, str)))


def requery_gaps(branch: Sequence[Mapping[str, Any]]) -> list[int]:
    """The gap of every re-query event on the branch (module docstring), in branch order."""
    last_seen: dict[str, int] = {}
    gaps: list[int] = []
    utg = 0
    for message in _messages(branch):
        if message.get("role") == "user":
            utg += 1
            continue
        for call in _tool_calls(message):
            if call.get("name") != QUERY_TOOL_NAME:
                continue
            for ref in query_refs(call):
                if ref in last_seen:
                    gaps.append(utg - last_seen[ref])
                last_seen[ref] = utg
    return gaps


def scan_session(
    session: SessionFile,
    *,
    path: str,
    size: int,
    content_hash: str,
    config: Config,
    problems: Sequence[Problem] = (),
) -> ScanRow:
    """The facts of one session's current branch."""
    branch = session.branch()
    roles: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    query_calls = empty_calls = 0
    pruner_entries = 0
    for entry in branch:
        kind = entry.get("type")
        if kind in ("custom", "custom_message"):
            custom = entry.get("customType")
            if isinstance(custom, str) and custom.startswith(_PRUNER_PREFIX):
                pruner_entries += 1
            if kind == "custom_message":
                roles["custom"] += 1
    for message in _messages(branch):
        roles[str(message.get("role"))] += 1
        for call in _tool_calls(message):
            name = str(call.get("name"))
            tools[name] += 1
            if name == QUERY_TOOL_NAME:
                query_calls += 1
                empty_calls += not query_refs(call)
    messages = session.build_context().messages
    chars = jsjson.length(messages)
    tokens = sum(estimate_tokens(m) for m in messages if isinstance(m, dict))
    rendered: Optional[int] = None
    if pruner_entries:
        result = render(messages, PrunerState.from_session(session), config)
        rendered = result.after_chars if result.pruned else chars
    return ScanRow(
        path=path,
        content_hash=content_hash,
        bytes=size,
        entries=len(session.entries),
        branch_length=len(branch),
        user_turn_groups=roles["user"],
        messages_by_role=dict(sorted(roles.items())),
        tool_calls_by_tool=dict(sorted(tools.items())),
        context_chars=chars,
        context_tokens=tokens,
        pruner_entries=pruner_entries,
        rendered_chars=rendered,
        query_calls=query_calls,
        empty_query_calls=empty_calls,
        requery_gaps=requery_gaps(branch),
        problems=list(problems),
    )


# ------------------------------------------------------------------------------- tables


def _median(values: Sequence[int]) -> Optional[float]:
    return float(statistics.median(values)) if values else None


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def gap_table(rows: Sequence[ScanRow]) -> GapTable:
    """Seed 000's re-query gap table."""
    gaps = [g for row in rows for g in row.requery_gaps]
    return GapTable(
        sessions=len(rows),
        query_sessions=sum(1 for r in rows if r.query_calls),
        requery_sessions=sum(1 for r in rows if r.requery_gaps),
        query_calls=sum(r.query_calls for r in rows),
        empty_query_calls=sum(r.empty_query_calls for r in rows),
        events=len(gaps),
        median=_median(gaps),
        within={str(n): _share(sum(1 for g in gaps if g <= n), len(gaps)) for n in GAP_THRESHOLDS},
        counts={str(g): n for g, n in sorted(Counter(gaps).items())},
    )


def length_table(rows: Sequence[ScanRow]) -> LengthTable:
    """Session lengths in user-turn groups: all sessions and those with pruner entries."""
    lengths = [r.user_turn_groups for r in rows]
    pruned = [r.user_turn_groups for r in rows if r.pruner_entries]
    buckets = []
    for low, high in LENGTH_BUCKETS:

        def inside(n: int, low: int = low, high: Optional[int] = high) -> bool:
            return n >= low and (high is None or n <= high)

        count = sum(1 for n in lengths if inside(n))
        pruned_count = sum(1 for n in pruned if inside(n))
        buckets.append(
            LengthBucket(
                low=low,
                high=high,
                sessions=count,
                share=_share(count, len(lengths)),
                pruner_sessions=pruned_count,
                pruner_share=_share(pruned_count, len(pruned)),
            )
        )
    return LengthTable(
        sessions=len(lengths),
        pruner_sessions=len(pruned),
        median=_median(lengths),
        pruner_median=_median(pruned),
        at_most_3=_share(sum(1 for n in lengths if n <= 3), len(lengths)),
        pruner_at_most_3=_share(sum(1 for n in pruned if n <= 3), len(pruned)),
        buckets=buckets,
    )


def _sum_counts(maps: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for counts in maps:
        total.update(counts)
    return dict(sorted(total.items()))


def aggregate(rows: Sequence[ScanRow], failures: Sequence[TaskFailure] = ()) -> ScanAggregate:
    """The corpus totals and tables of a scan's rows."""
    pruned = [r for r in rows if r.rendered_chars is not None]
    return ScanAggregate(
        sessions=len(rows),
        failed=len(failures),
        bytes=sum(r.bytes for r in rows),
        entries=sum(r.entries for r in rows),
        messages_by_role=_sum_counts(r.messages_by_role for r in rows),
        tool_calls_by_tool=_sum_counts(r.tool_calls_by_tool for r in rows),
        context_chars=sum(r.context_chars for r in rows),
        context_tokens=sum(r.context_tokens for r in rows),
        pruner_sessions=sum(1 for r in rows if r.pruner_entries),
        rendered_chars=sum(r.rendered_chars or 0 for r in pruned),
        pruner_context_chars=sum(r.context_chars for r in pruned),
        gaps=gap_table(rows),
        lengths=length_table(rows),
    )
