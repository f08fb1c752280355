"""The flush: summarize still-raw tool calls, persist summaries and records, advance the frontier.

One flush (the reference's ``flushPending``, spec 05 sections 6-10) runs:

    rescan + trim + group -> dedup pass -> trivial filter -> summarize (LLM, concurrently)
    -> per batch: refs, label rewrite + footer, oversized check, summary + index entries
    -> frontier + stats entries -> chain compression -> notifications -> flush-metrics entry

and appends, in the reference's order (spec 02 section 9): dedup aliases; per summarized batch
the summary message then its index entry; the frontier, then the stats; per compressed chain an
optional backfilled index then the chain entry, then stats again; the flush-metrics entry last.

The flush works on a :class:`~pi_condense.live_state.Runtime`, the live state a
:class:`~pi_condense.condenser.Condenser` shares between its event handlers and its flushes.

Compat: in ``compat: "reference"`` everything the reference does is reproduced, including its
failure behaviour. In our default, a failed append (or any other failure inside a flush)
re-reads the pruner state from the session so memory never claims what the file lacks, and a
summary left without its index entry by an interrupted flush is completed on the next flush
from its persisted text instead of being summarized (and written) a second time.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal, Optional, Union

from .capture import CapturedBatch, call_key, raw_chars
from .config import Config
from .errors import CondenseError
from .js import json as jsjson
from .live_state import SUMMARY, LiveSummary, Runtime
from .metrics import MetricsSnapshot
from .session.lock import UNGUARDED, try_side_lock
from .spill import alias_entry_data, index_records
from .state import Frontier, PrunerState
from .summarize.base import Completion, CompletionRequest
from .summarize.labels import refs_footer, substitute_inline_refs, summary_details
from .summarize.prompt import batch_prompt
from .supersede import lower_floor_by_calls
from .triggers import FlushTrigger

__all__ = [
    "Delivery",
    "FlushOptions",
    "FlushResult",
    "ProgressCallback",
    "flush_pending",
]

log = logging.getLogger(__name__)

Delivery = Literal["runtime", "session"]
"""``session``: entries go straight to the session file (event-triggered flushes);
``runtime``: as the host's runtime API would write them (``/pruner now``)."""

ProgressCallback = Callable[[int, int, CapturedBatch, str], None]
"""``(index, total, batch, "start" | "done" | "skipped")`` per batch of a sequential flush."""

INDEX = "context-prune-index"
ALIAS = "context-prune-dedup-alias"
FRONTIER = "context-prune-frontier"
STATS = "context-prune-stats"
FLUSH_METRICS = "context-prune-flush-metrics"


@dataclass
class FlushOptions:
    """How a flush was triggered and where its output goes (spec 05 section 7)."""

    trigger: FlushTrigger = "manual"
    delivery: Delivery = "runtime"
    closing_message: Any = None
    """The final assistant message of a ``message_end`` flush (not yet in the session)."""
    previewed_batches: Optional[list[CapturedBatch]] = None
    """Batches captured by the caller (``/pruner now`` preview) instead of a rescan."""
    on_progress: Optional[ProgressCallback] = None
    """Summarize one batch at a time and report progress (otherwise all concurrently)."""


@dataclass(frozen=True)
class FlushResult:
    """Outcome of a flush. ``ok`` with ``reason`` ``flushed`` / ``skipped-oversized`` /
    ``skipped-trivial`` / ``skipped-deduped``, or not ``ok`` with ``empty`` /
    ``already-flushing`` / ``summarizer-failed`` / ``failed`` (``error`` set) / ``disabled``
    (:meth:`~pi_condense.condenser.Condenser.flush_now` with pruning off)."""

    ok: bool
    reason: str
    batch_count: int = 0
    tool_call_count: int = 0
    raw_char_count: int = 0
    summary_char_count: int = 0
    deduped_count: int = 0
    error: Optional[str] = None


# -------------------------------------------------------------------------------- the flush


@dataclass
class _Recovered:
    """A summary already persisted by an interrupted flush (default mode)."""

    refs: list[dict[str, Any]]
    text: str


Slot = Union[Completion, None, _Recovered, Literal["trivial", "deduped"]]


@dataclass
class _Totals:
    raw: int = 0
    summary: int = 0
    tool_calls: int = 0
    deduped: int = 0


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def _thinking(config: Config) -> Optional[str]:
    level = config.summarizer_thinking
    return None if level == "default" else level


def _orphan_summary(state: PrunerState, batch: CapturedBatch) -> Optional[_Recovered]:
    """A persisted summary covering exactly this batch's calls, whose index entry is missing."""
    keys = [call_key(c) for c in batch.tool_calls]
    for body_keys, text in state.index.summary_bodies_with_keys(keys):
        # The index matched them as JS strings, a str compare as str values (which tells
        # apart the two spellings of a surrogate pair): the first body both accept is it.
        if list(body_keys) != keys:
            continue
        refs = []
        for call, key in zip(batch.tool_calls, keys, strict=True):
            short = state.short_ref(key)
            if short is None:
                return None
            ref: dict[str, Any] = {"shortId": short, "toolCallId": call["toolCallId"]}
            if call.get("resultTimestamp") is not None:
                ref["resultTimestamp"] = call["resultTimestamp"]
            refs.append(ref)
        return _Recovered(refs, text)
    return None


class _Flush:
    """One flush attempt (state shared between the pipeline steps)."""

    def __init__(self, rt: Runtime, options: FlushOptions) -> None:
        self.rt = rt
        self.options = options
        self.reference = rt.config.is_reference
        self.captured = 0
        self.processed_count = 0
        # Tool calls this flush turned into stubs (summarized or deduplicated; 2.10.5).
        self.stub_count = 0
        self.outcome = "empty"
        self.batches: list[CapturedBatch] = []
        self.deduped: list[list[dict[str, Any]]] = []
        self.deduped_raw: list[int] = []
        self.anchor: Optional[tuple[Any, Any]] = None

    @property
    def live_visible(self) -> bool:
        """Summaries of this flush join the live context (runtime delivery, or our default)."""
        return self.options.delivery == "runtime" or not self.reference

    # ------------------------------------------------------------------ steps

    def dedup_pass(self) -> None:
        rt = self.rt
        self.deduped = [[] for _ in self.batches]
        self.deduped_raw = [0 for _ in self.batches]
        if not rt.config.dedup_by_content_hash:
            return
        for i, batch in enumerate(self.batches):
            remaining = []
            for call in batch.tool_calls:
                name = (
                    call["toolName"] if isinstance(call["toolName"], str) else str(call["toolName"])
                )
                original = rt.state.lookup_by_content(name, call["resultText"])
                key = call_key(call)
                if original is not None and original != key:
                    rt.state.register_duplicate(key, original)
                    rt.append(ALIAS, alias_entry_data(key, original))
                    self.deduped[i].append(call)
                    self.deduped_raw[i] += jsjson.utf16_len(call["resultText"])
                else:
                    remaining.append(call)
            self.batches[i] = batch.with_calls(remaining)

    async def summarize(self, slots: list[Slot], todo: list[int]) -> None:
        rt = self.rt

        def request(batch: CapturedBatch) -> CompletionRequest:
            return CompletionRequest(
                prompt=batch_prompt(batch, head_tail=not rt.config.is_reference),
                kind="batch",
                timestamp=rt.clock(),
                thinking=_thinking(rt.config),
            )

        progress = self.options.on_progress
        total = len(self.batches)
        if progress is not None:
            for i, batch in enumerate(self.batches):
                if i not in todo:
                    progress(i, total, batch, "skipped")
                    continue
                progress(i, total, batch, "start")
                result = await rt.summarize(request(batch))
                slots[i] = result
                progress(i, total, batch, "done" if result is not None else "skipped")
            return
        if todo:
            results = await asyncio.gather(*(rt.summarize(request(self.batches[i])) for i in todo))
            for i, result in zip(todo, results, strict=True):
                slots[i] = result

    def persist_summary(
        self, batch: CapturedBatch, refs: list[dict[str, Any]], text: str, write_summary: bool
    ) -> None:
        rt = self.rt
        keys = [call_key(c) for c in batch.tool_calls]
        if write_summary:
            names = [c["toolName"] for c in batch.tool_calls]
            details = summary_details(refs, names, batch.turn_index, batch.timestamp)
            entry_id = rt.session.append_custom_message(SUMMARY, text, False, details)
            rt.state.register_refs(refs)
            if self.live_visible:
                self._track_live(entry_id, refs)
        records = index_records(batch)
        if self.reference:
            rt.state.add_batch(records)
            rt.append(INDEX, {"toolCalls": records})
        else:
            rt.append(INDEX, {"toolCalls": records})
            rt.state.add_batch(records)
        rt.state.register_summary_body(keys, text)

    def _track_live(self, entry_id: str, refs: list[dict[str, Any]]) -> None:
        entry = self.rt.session.get_entry(entry_id)
        if entry is None:
            return
        message = self.rt.metrics.project([entry])[0]
        identity = jsjson.dumps(refs)
        self.rt.live_summaries.append(LiveSummary(self.anchor, message, identity))

    def frontier_snapshot(
        self, processed: list[int], kinds: dict[str, list[int]], totals: _Totals
    ) -> tuple[Frontier, str]:
        last = processed[-1]
        batch = self.batches[last]
        calls = batch.tool_calls if batch.tool_calls else self.deduped[last]
        last_call = calls[-1]
        flushed = len(processed) - len(kinds["trivial"]) - len(kinds["oversized"])
        flushed -= len(kinds["deduped"])
        if flushed > 0:
            outcome = "summarized"
        elif kinds["oversized"]:
            outcome = "skipped-oversized"
        elif kinds["deduped"]:
            outcome = "skipped-deduped"
        else:
            outcome = "skipped-trivial"
        snapshot: Frontier = {
            "lastAttemptedToolCallId": last_call["toolCallId"],
            "lastAttemptedToolName": last_call["toolName"],
            "lastAttemptedTurnIndex": batch.turn_index,
            "lastAttemptedTimestamp": batch.timestamp,
            "attemptedBatchCount": len(processed),
            "attemptedToolCallCount": totals.tool_calls,
            "rawCharCount": totals.raw,
            "summaryCharCount": totals.summary,
            "outcome": outcome,
        }
        return snapshot, outcome

    def notify_skips(self, slots: list[Slot], kinds: dict[str, list[int]], totals: _Totals) -> None:
        rt = self.rt
        if rt.config.quiet_oversized_skips:
            return
        for i in kinds["oversized"]:
            batch = self.batches[i]
            n = len(batch.tool_calls)
            slot = slots[i]
            length = jsjson.utf16_len(slot.text) if isinstance(slot, Completion) else 0
            rt.ui.notify(
                f"pruner: skipped pruning turn {_num(batch.turn_index)} ({n} tool call{_plural(n)})"
                f" \u2014 summary was {length} chars vs {raw_chars(batch.tool_calls)} raw chars;"
                " frontier advanced past this range",
                "info",
            )
        for i in kinds["trivial"]:
            batch = self.batches[i]
            n = len(batch.tool_calls)
            rt.ui.notify(
                f"pruner: skipped pruning turn {_num(batch.turn_index)} ({n} tool call{_plural(n)})"
                f" \u2014 only {raw_chars(batch.tool_calls)} raw chars (< minBatchChars="
                f"{rt.config.min_batch_chars}); no LLM call made;"
                " frontier advanced past this range",
                "info",
            )
        for i in kinds["deduped"]:
            n = len(self.deduped[i])
            rt.ui.notify(
                f"pruner: deduplicated {n} tool call{_plural(n)} (turn "
                f"{_num(self.batches[i].turn_index)}, {self.deduped_raw[i]} raw chars) against "
                "earlier prunes; no LLM call made; frontier advanced past this range",
                "info",
            )
        if totals.deduped > 0 and not kinds["deduped"]:
            n = totals.deduped
            rt.ui.notify(
                f"pruner: deduplicated {n} tool call{_plural(n)} against earlier prunes (no LLM "
                "call for those); remaining tool calls were summarized normally.",
                "info",
            )

    async def compress_chains(self, branch_messages: Optional[list[Any]]) -> None:
        rt = self.rt
        if rt.chains is None or branch_messages is None:
            return
        try:
            try:
                compressed = await rt.chains(rt, branch_messages, self.options.closing_message)
            finally:
                rt.facts().end_lend(branch_messages)
            if compressed:
                rt.stats.add_chains_compressed(len(compressed))
                rt.append(STATS, rt.stats.snapshot())
                rt.emit_cost()
                n = len(compressed)
                rt.ui.notify(
                    f"pruner: compressed {n} chain{_plural(n)} ({', '.join(compressed)})", "info"
                )
        except Exception as exc:
            if not self.reference:
                rt.resync()
            rt.ui.notify(f"pruner: chain compression failed: {_message(exc)}", "warning")

    # ------------------------------------------------------------------ main

    async def run(self) -> FlushResult:
        rt = self.rt
        batches = self.options.previewed_batches
        self.batches = list(batches) if batches is not None else rt.capture_pending()
        self.captured = len(self.batches)
        if not self.batches:
            self.outcome = "empty"
            return FlushResult(False, "empty")
        rt.pending.clear()
        rt.flushing = True
        if self.live_visible:
            self.anchor = rt.facts().last_anchor
        try:
            return await self._run()
        except Exception as exc:
            rt.pending[:0] = self.batches
            self.outcome = "error"
            if not self.reference:
                rt.resync()
            message = _message(exc)
            rt.ui.notify(f"pruner: summarization failed: {message}", "error")
            return FlushResult(False, "failed", error=message)

    async def _run(self) -> FlushResult:
        rt = self.rt
        config = rt.config
        self.dedup_pass()
        min_chars = config.min_batch_chars
        batch_raw = [raw_chars(b.tool_calls) for b in self.batches]
        fully_deduped = [
            bool(self.deduped[i]) and not b.tool_calls for i, b in enumerate(self.batches)
        ]
        slots: list[Slot] = [None] * len(self.batches)
        todo: list[int] = []
        for i, batch in enumerate(self.batches):
            if fully_deduped[i]:
                slots[i] = "deduped"
            elif min_chars > 0 and batch_raw[i] < min_chars and batch.tool_calls:
                slots[i] = "trivial"
            elif not self.reference and (recovered := _orphan_summary(rt.state, batch)):
                slots[i] = recovered
            else:
                todo.append(i)
        if todo:
            rt.refresh_status("prune: summarizing\u2026")
        await self.summarize(slots, todo)

        totals = _Totals()
        kinds: dict[str, list[int]] = {"oversized": [], "trivial": [], "deduped": []}
        processed: list[int] = []
        stubbed = [call for calls in self.deduped for call in calls]
        first_failure = -1
        for i, slot in enumerate(slots):
            if slot is None:
                first_failure = i
                break
            batch = self.batches[i]
            dedup_count = len(self.deduped[i])
            self.stub_count += dedup_count
            if slot == "deduped":
                totals.raw += self.deduped_raw[i]
                totals.tool_calls += dedup_count
                totals.deduped += dedup_count
                kinds["deduped"].append(i)
                processed.append(i)
                continue
            totals.raw += batch_raw[i] + self.deduped_raw[i]
            totals.tool_calls += len(batch.tool_calls) + dedup_count
            totals.deduped += dedup_count
            if slot == "trivial":
                kinds["trivial"].append(i)
                processed.append(i)
                continue
            if isinstance(slot, _Recovered):
                totals.summary += jsjson.utf16_len(slot.text)
                self.persist_summary(batch, slot.refs, slot.text, write_summary=False)
                self.stub_count += len(batch.tool_calls)
                stubbed.extend(batch.tool_calls)
                processed.append(i)
                continue
            assert isinstance(slot, Completion)
            calls = [(c["toolCallId"], c.get("resultTimestamp")) for c in batch.tool_calls]
            refs = rt.state.allocate_refs(calls)
            names = [c["toolName"] for c in batch.tool_calls]
            text = substitute_inline_refs(slot.text, refs, names) + refs_footer(refs)
            oversized = jsjson.utf16_len(text) > batch_raw[i]
            rt.stats.add(slot.usage)
            totals.summary += jsjson.utf16_len(text)
            if oversized:
                kinds["oversized"].append(i)
            else:
                self.persist_summary(batch, refs, text, write_summary=True)
                self.stub_count += len(batch.tool_calls)
                stubbed.extend(batch.tool_calls)
            processed.append(i)
        # Supersession may follow where this flush's stubs change the context anyway: from
        # the earliest result stubbed (every deduplicated call counts, as in the reference).
        lower_floor_by_calls(rt.supersede, stubbed)

        if first_failure >= 0:
            rt.pending[:0] = self.batches[first_failure:]
        if not processed:
            rt.refresh_status()
            self.outcome = "error"
            return FlushResult(False, "summarizer-failed")

        snapshot, outcome = self.frontier_snapshot(processed, kinds, totals)
        branch_messages: Optional[list[Any]] = None
        if config.chain_compression.enabled:
            # Lent (no copy) until the chain step is done: the branch as it is now.
            branch_messages = rt.facts().lend_chain_messages()
        try:
            rt.state.advance_frontier(snapshot)
            rt.append(FRONTIER, snapshot)
            try:
                rt.append(STATS, rt.stats.snapshot())
            except Exception:
                log.warning("pi-condense: stats entry not written", exc_info=True)
        except Exception as exc:
            self.processed_count = len(processed)
            self.outcome = "error"
            if not self.reference:
                rt.resync()
            return FlushResult(False, "failed", error=_message(exc))

        rt.refresh_status()
        rt.emit_cost()
        if config.chain_compression.enabled:
            await self.compress_chains(branch_messages)
        self.notify_skips(slots, kinds, totals)

        self.processed_count = len(processed)
        self.outcome = outcome
        reason = "flushed" if outcome == "summarized" else outcome
        return FlushResult(
            True,
            reason,
            batch_count=len(processed),
            tool_call_count=totals.tool_calls,
            raw_char_count=totals.raw,
            summary_char_count=totals.summary,
            deduped_count=totals.deduped,
        )

    def emit_metrics(self, entry_metrics: MetricsSnapshot) -> None:
        data = {
            "ts": self.rt.clock(),
            "trigger": self.options.trigger,
            "capturedBatches": self.captured,
            "processedBatches": self.processed_count,
            "stubCount": self.stub_count,
            "outcome": self.outcome,
            "metrics": entry_metrics,
        }
        try:
            self.rt.append(FLUSH_METRICS, data)
        except Exception:
            log.warning("pi-condense: flush-metrics entry not written", exc_info=True)


def _num(value: Any) -> str:
    return jsjson.dumps(value) if isinstance(value, (int, float)) else str(value)


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def flush_pending(rt: Runtime, options: Optional[FlushOptions] = None) -> FlushResult:
    """Run one flush (``flushPending``). Returns ``already-flushing`` at once if one runs.

    Every attempt that gets past that check appends exactly one flush-metrics entry, last.
    Failures are reported through ``rt.ui`` and the result; this never raises for a failed
    summarizer or a failed append.
    """
    opts = options if options is not None else FlushOptions()
    if rt.flushing:
        return FlushResult(False, "already-flushing")
    if rt.config.is_reference:
        return await _flush_pending(rt, opts)
    lock = FlushLock.try_acquire(rt)
    if lock is None:
        rt.ui.notify("pruner: another condenser is flushing this session; will retry", "info")
        return FlushResult(False, "already-flushing")
    try:
        if absorb_other_writers(rt):
            opts = replace(opts, previewed_batches=None)
        return await _flush_pending(rt, opts)
    finally:
        lock.release()


async def _flush_pending(rt: Runtime, opts: FlushOptions) -> FlushResult:
    rt.rearmed = False
    cached = rt.compute_metrics()
    entry_metrics: MetricsSnapshot = (
        cached.copy()
        if cached is not None
        else {"openCycleThinkingTokens": 0, "largestChainSharePct": 0, "frontierGapTokens": 0}
    )
    flush = _Flush(rt, opts)
    try:
        return await flush.run()
    finally:
        rt.flushing = False
        flush.emit_metrics(entry_metrics)


# ------------------------------------------------- two Condensers on one session cooperate
#
# Pi runs one extension per process, so the reference never meets a second writer of its own
# entries; two Pi processes (or a Pi and a ``pi-condense compact``) on one session each
# summarize everything. In the default mode a flush therefore
#
# 1. takes the session's flush lock (``flock`` on ``.<session name>.pi-condense-flush.lock``
#    beside the session, never waited on: when another Condenser is flushing, this flush is
#    skipped with ``already-flushing`` and its batches stay pending for the next trigger), and
# 2. re-reads the session and, when another Condenser appended ``context-prune-*`` entries
#    since the state was built, rebuilds the pruner state from the session, so the calls it
#    summarized are no longer pending.
#
# ``compat: "reference"`` does neither (the reference behaviour). Windows has no ``flock``:
# there only step 2 applies (see README, Reliability).


class FlushLock:
    """The session-wide flush lock (held until :meth:`release`)."""

    def __init__(self, fd: Optional[int]) -> None:
        self._fd = fd

    @classmethod
    def try_acquire(cls, rt: Runtime) -> Optional[FlushLock]:
        """The lock, or None when another process holds it. In-memory sessions (and
        Windows, or a directory we cannot write) get a lock that guards nothing."""
        fd = try_side_lock(rt.session.path, "flush")
        if fd is None:
            return None
        return cls(None if fd == UNGUARDED else fd)

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def absorb_other_writers(rt: Runtime) -> bool:
    """Pick up what other writers appended; rebuild the state when another Condenser's
    entries arrived. Returns whether the state was rebuilt."""
    session = rt.session
    if session.path is None:
        return False
    try:
        session.refresh()
    except CondenseError:
        return False  # rewritten meanwhile: the flush's first append reports it
    if session.foreign_prune_entries == rt.foreign_prune_seen:
        return False
    rt.resync()
    return True
