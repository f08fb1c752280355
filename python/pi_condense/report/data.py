"""The figures of the HTML report, computed from a session (no plotting here).

A raw session is replayed through the pruner (:mod:`pi_condense.replay`), and every model call
of the replay gives its context size before and after pruning and the JSON texts of the
condensed messages. A session the pruner already wrote entries into is measured as it stands:
before each assistant message, its branch's context is rendered with the state its entries
had at that point. Everything else (flushes, chains, the biggest outputs, summarizer usage,
recoveries) is read from the resulting session's entries.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import Any, Optional

from ..config import Config
from ..js import json as jsjson
from ..render import render
from ..replay import ReplayOptions, replay
from ..session import SessionFile
from ..session_stats import raw_conversation, stats_report
from ..state import PrunerState
from ..summarize.base import Summarizer

__all__ = ["Call", "Recovery", "ReportData", "collect", "common_prefix_chars"]

SUMMARY = "context-prune-summary"
CHAIN = "context-prune-chain"
INDEX = "context-prune-index"
STATS = "context-prune-stats"
FLUSH_METRICS = "context-prune-flush-metrics"
QUERY_TOOL = "context_tree_query"


@dataclass
class Call:
    """One model call: context chars raw and as sent, and the prompt-cache prefix it kept."""

    raw: int
    sent: int
    cached_prefix: int
    entries: int


@dataclass
class Recovery:
    """A ``context_tree_query`` of a ref: user-turn groups since it was stubbed, and since
    the previous query of the same ref (None for the first)."""

    ref: str
    call: int
    since_stub: Optional[int]
    since_previous_query: Optional[int]


@dataclass
class ReportData:
    """Everything the report shows."""

    title: str
    replayed: bool
    calls: list[Call] = field(default_factory=list)
    flush_calls: list[int] = field(default_factory=list)
    chain_calls: list[int] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    summarizer: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    recoveries: list[Recovery] = field(default_factory=list)
    summaries: int = 0


def _common_start(x: str, y: str) -> int:
    limit = min(len(x), len(y))
    n, step = 0, 1024
    while n + step <= limit and x[n : n + step] == y[n : n + step]:
        n += step
    while n < limit and x[n] == y[n]:
        n += 1
    return n


def common_prefix_chars(a: list[str], b: list[str]) -> int:
    """Length (code points) of the common prefix of ``"[" + ",".join(a) + "]"`` and the same
    text of ``b``: how much of the previous request a provider's prompt cache can reuse."""
    if not a or not b:
        return 2 if a == b else 1
    prefix = 1
    for x, y in zip(a, b, strict=False):
        if x != y:
            return prefix + _common_start(x, y)
        prefix += len(x) + 1
    return prefix if len(a) == len(b) else prefix - 1


def _has_pruner_entries(session: SessionFile) -> bool:
    return any(_is_pruner_entry(e) for e in session.branch())


def _replayed_calls(source: SessionFile, config: Config, summarizer: Summarizer) -> Any:
    with tempfile.TemporaryDirectory(prefix="pi-condense-report-") as tmp:
        options = ReplayOptions(session_dir=tmp, deterministic=False, record_contexts=True)
        result = replay(source, config, summarizer, options)
    pool: dict[int, str] = {}
    calls: list[tuple[int, int, list[str], int]] = []
    sizes = result.contexts.sizes
    for line in result.contexts.lines:
        record = jsjson.loads(line)
        if "p" in record:
            pool[record["p"]] = record["json"]
            continue
        size = sizes[record["call"]]
        calls.append((size.before, size.after, [pool[k] for k in record["out"]], record["entries"]))
    return result.session, calls


def _is_pruner_entry(entry: dict[str, Any]) -> bool:
    return str(entry.get("customType", "")).startswith("context-prune-")


def _seen_by_call(branch: list[dict[str, Any]], answer: int) -> int:
    """How many branch entries the model call answered by ``branch[answer]`` was rendered from.

    Pi runs ``message_end`` handlers before it persists a final reply (one with no tool call),
    so the entries of that reply's ``message-end`` flush precede it in the file although its
    model call came first (spec 08 section 1.4): they end with a flush-metrics entry whose
    trigger is ``message-end`` and go back to the previous flush's metrics or the last
    conversation entry.
    """
    message = branch[answer]["message"]
    content = message.get("content")
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "toolCall" for b in content
    ):
        return answer
    closing = branch[answer - 1]
    data = closing.get("data")
    if closing.get("customType") != FLUSH_METRICS or not (
        isinstance(data, dict) and data.get("trigger") == "message-end"
    ):
        return answer
    seen = answer - 1
    while (
        seen > 0
        and _is_pruner_entry(branch[seen - 1])
        and branch[seen - 1].get("customType") != FLUSH_METRICS
    ):
        seen -= 1
    return seen


def _measured_calls(session: SessionFile, config: Config) -> list[tuple[int, int, list[str], int]]:
    branch = session.branch()
    calls = []
    for i, entry in enumerate(branch):
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict) or message.get("role") != "assistant" or i == 0:
            continue
        seen = _seen_by_call(branch, i)
        messages = session.build_context(branch[seen - 1]["id"]).messages
        result = render(messages, PrunerState.from_branch(branch[:seen]), config)
        sent = result.messages if result.pruned else messages
        texts = [jsjson.dumps(m) for m in sent]
        raw = jsjson.length(raw_conversation(messages))
        calls.append((raw, jsjson.length(sent), texts, i))
    return calls


def _user_groups(branch: list[dict[str, Any]]) -> list[int]:
    """For each branch position, the number of user messages before it."""
    groups, seen = [], 0
    for entry in branch:
        groups.append(seen)
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "user":
            seen += 1
    return groups


def _call_of(position: int, calls: list[Call]) -> int:
    """The first model call made after branch position ``position``."""
    for number, call in enumerate(calls):
        if call.entries > position:
            return number
    return max(len(calls) - 1, 0)


def _outputs(branch: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    state = PrunerState.from_branch(branch)
    summaries: dict[str, int] = {}
    for entry in branch:
        if entry.get("customType") == SUMMARY and isinstance(entry.get("details"), dict):
            content = entry.get("content")
            for ref in entry["details"].get("toolCallRefs") or []:
                if isinstance(ref, dict) and isinstance(content, str):
                    summaries[str(ref.get("shortId"))] = jsjson.utf16_len(content)
    chained: dict[str, str] = {}
    for chain in state.chain_entries():
        for key in chain.get("droppedOccurrenceKeys") or chain.get("droppedToolCallIds") or []:
            chained[key] = str(chain.get("blockId"))
    rows = []
    for entry in branch:
        if entry.get("customType") != INDEX or not isinstance(entry.get("data"), dict):
            continue
        for record in entry["data"].get("toolCalls") or []:
            text = record.get("resultText") if isinstance(record.get("resultText"), str) else ""
            key = f"{record.get('toolCallId')}@{record.get('resultTimestamp')}"
            ref = state.short_ref(key) if record.get("resultTimestamp") is not None else None
            chars = jsjson.utf16_len(text) or int(record.get("spillBytes") or 0)
            if ref is not None and ref in summaries:
                fate = f"summarized as {ref} (summary of {summaries[ref]:,} chars)"
            else:
                fate = "indexed for the chain's deterministic body"
            if record.get("spillPath"):
                fate += ", spilled to a sidecar file"
            if key in chained:
                fate += f", then dropped by chain {chained[key]}"
            args = jsjson.dumps(record.get("args"))
            rows.append(
                {
                    "ref": ref or "-",
                    "tool": record.get("toolName"),
                    "args": args if len(args) <= 80 else args[:77] + "...",
                    "chars": chars,
                    "summaryChars": summaries.get(ref or "", 0),
                    "fate": fate,
                }
            )
    rows.sort(key=lambda row: -int(row["chars"]))
    return rows[:limit]


def _recoveries(branch: list[dict[str, Any]], calls: list[Call]) -> list[Recovery]:
    groups = _user_groups(branch)
    stubbed: dict[str, int] = {}
    last_query: dict[str, int] = {}
    found = []
    for position, entry in enumerate(branch):
        if entry.get("customType") == SUMMARY and isinstance(entry.get("details"), dict):
            for ref in entry["details"].get("toolCallRefs") or []:
                if isinstance(ref, dict):
                    stubbed.setdefault(str(ref.get("shortId")), groups[position])
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for block in message.get("content") or []:
            if not (isinstance(block, dict) and block.get("type") == "toolCall"):
                continue
            if block.get("name") != QUERY_TOOL or not isinstance(block.get("arguments"), dict):
                continue
            for ref in block["arguments"].get("toolCallIds") or []:
                ref = str(ref)
                group = groups[position]
                since = group - stubbed[ref] if ref in stubbed else None
                previous = group - last_query[ref] if ref in last_query else None
                last_query[ref] = group
                found.append(Recovery(ref, _call_of(position, calls), since, previous))
    return found


def collect(
    source: SessionFile,
    config: Config,
    summarizer: Summarizer,
    *,
    title: str,
    top_outputs: int = 15,
) -> ReportData:
    """The report's figures for ``source`` (replayed unless it holds pruner entries)."""
    replayed = not _has_pruner_entries(source)
    if replayed:
        session, raw_calls = _replayed_calls(source, config, summarizer)
    else:
        session, raw_calls = source, _measured_calls(source, config)
    calls: list[Call] = []
    previous: Optional[list[str]] = None
    for raw, sent, texts, entries in raw_calls:
        prefix = common_prefix_chars(previous, texts) if previous is not None else 0
        calls.append(Call(raw, sent, prefix, entries))
        previous = texts
    branch = session.branch()
    data = ReportData(title=title, replayed=replayed, calls=calls)
    for position, entry in enumerate(branch):
        kind = entry.get("customType")
        if kind == SUMMARY and entry.get("type") == "custom_message":
            data.summaries += 1
            data.flush_calls.append(_call_of(position, calls))
        elif kind == CHAIN:
            data.chain_calls.append(_call_of(position, calls))
    data.flush_calls = sorted(set(data.flush_calls))
    data.chain_calls = sorted(set(data.chain_calls))
    data.outputs = _outputs(branch, top_outputs)
    stats = stats_report(session)
    data.stats = stats["stats"]
    data.summarizer = stats["statsUpdates"]
    data.recoveries = _recoveries(branch, calls)
    return data
