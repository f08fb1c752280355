"""Chain compression: deciding and persisting ``context-prune-chain`` entries.

A *chain* is one user request and the agent's work on it: the user message, the assistant
turns that called tools with their results, and the final text-only answer. Once a chain is
old enough, render collapses it into one ``<compressed-chain id="bN">`` message (phase 3); this
module writes the entries that make it so (spec 05 sections 9, 11, 12):

1. detection over the branch messages (closed, interrupted and open chains), with the
   closing assistant threaded in at a ``message_end`` flush (:func:`with_closing_message`);
2. eligibility: closed, not compressed yet, with tool calls, older than the ``rollingWindow``
   most recent closed chains (the open chain never counts), and not holding a
   ``context_tree_query`` output still in its recovery grace window;
3. per eligible chain, oldest first:

   - *covered* (some per-batch summary covers a middle call): a block id ``bN`` and an
     entry listing the chain's ids, occurrence keys, refs and protected ids; with two or more
     distinct per-batch summaries, one summarizer call fuses them into ``rangeSummaryText``
     (a failure or an empty answer leaves render on the concatenation);
   - *uncovered*: the deterministic backfill. The raw outputs not indexed yet are indexed
     by one ``context-prune-index`` entry (``backfilled: true``, spilling oversized ones),
     refs included, before anything changes in memory; then the entry gets a zero-LLM body
     (:data:`DETERMINISTIC` source). A retry after a failed chain append composes from the
     records already indexed, without a second index entry.

Detection, eligibility, range extraction and the deterministic body run in Rust
(:class:`pi_condense._core.ChainScan`); this module orchestrates, calls the summarizer and
persists. :func:`compress_chains_in_flush` is the flush's step (spec 05 section 9 steps 1-4),
:func:`compact_all` the retroactive command (window bypassed).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from . import spill
from ._core import ChainScan
from ._core import deterministic_body as native_deterministic_body
from .config import Config
from .errors import CondenseError
from .js import json as jsjson
from .js.values import (
    ABSENT,
    JS_WHITESPACE,
    get_field,
    is_number,
    map_key,
    strict_equal,
    to_string,
    truthy,
)
from .keys import ProtectedMatcher, bare_tool_call_id, hash_tool_result, occ_key
from .render import render_options
from .state import ChainEntry, PrunerState, ToolCallRecord
from .summarize.base import Completion, CompletionRequest, Summarizer, Usage
from .summarize.prompt import RANGE_SYSTEM_PROMPT, range_prompt

__all__ = [
    "CUSTOM_TYPE_CHAIN",
    "CUSTOM_TYPE_INDEX",
    "DETERMINISTIC",
    "RANGE_SYSTEM_PROMPT",
    "ChainCompressionError",
    "ChainDeps",
    "ChainRange",
    "ChainRunResult",
    "FuseFn",
    "ProtectionSpec",
    "ScanMemo",
    "compact_all",
    "compress_chains",
    "compress_chains_in_flush",
    "detect_chains",
    "deterministic_body",
    "estimate_reclaim_tokens",
    "range_prompt",
    "summarizer_fuse",
    "with_closing_message",
]

CUSTOM_TYPE_CHAIN = "context-prune-chain"
CUSTOM_TYPE_INDEX = "context-prune-index"
DETERMINISTIC = "deterministic"
"""``bodySource`` of a chain entry whose body was composed without an LLM."""

FuseFn = Callable[[str], Awaitable[Optional[Completion]]]
"""Range fusion: takes the full request text, returns the completion or None on failure."""

ProtectionSpec = Union[ProtectedMatcher, Callable[[Any, Any], bool]]
"""A protection override: a matcher, or a ``(toolName, args) -> bool`` predicate."""


def _is_finite_number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


# ---------------------------------------------------------------------------- detection


@dataclass(frozen=True)
class ChainRange:
    """One detected chain (the reference's ``ChainRange``).

    The id and key lists hold the messages' own objects, in first-seen order.
    ``final_assistant_timestamp`` is None for an interrupted chain.
    """

    position: int
    """Position in the scan's chain list."""
    start_index: int
    """Index of the opening user message."""
    end_index: Optional[int]
    """Index of the closing text-only assistant (None: interrupted)."""
    start_user_timestamp: Any
    final_assistant_timestamp: Any
    middle_tool_call_ids: list[Any]
    middle_occurrence_keys: list[Any]
    protected_tool_call_ids: list[Any]

    @property
    def closed(self) -> bool:
        """Whether a text-only assistant closed the chain."""
        return self.end_index is not None

    @property
    def lookup_keys(self) -> list[Any]:
        """``middleOccurrenceKeys`` when non-empty, else ``middleToolCallIds``."""
        return self.middle_occurrence_keys or self.middle_tool_call_ids

    @property
    def fully_protected(self) -> bool:
        """Every middle id is protected (and there is at least one)."""
        protected = set(map(map_key, self.protected_tool_call_ids))
        ids = self.middle_tool_call_ids
        return bool(ids) and all(map_key(i) in protected for i in ids)

    @classmethod
    def _of(cls, row: tuple[Any, ...]) -> ChainRange:
        return cls(*row)


def with_closing_message(branch_messages: list[Any], closing_message: Any = None) -> list[Any]:
    """``withClosingMessage``: ``branch_messages`` plus the closing message (a new list), unless
    there is none or the last message already is it (same role and timestamp).

    Pi runs ``message_end`` handlers before it persists the message, so at a ``message_end``
    flush the final assistant is not on the branch yet.
    """
    if not _threads_in(branch_messages, closing_message):
        return branch_messages
    return [*branch_messages, closing_message]


def _threads_in(branch_messages: list[Any], closing_message: Any) -> bool:
    """Whether :func:`with_closing_message` adds ``closing_message``."""
    if not truthy(closing_message):
        return False
    if branch_messages:
        last = branch_messages[-1]
        if (
            truthy(last)
            and strict_equal(get_field(last, "role"), get_field(closing_message, "role"))
            and strict_equal(get_field(last, "timestamp"), get_field(closing_message, "timestamp"))
        ):
            return False
    return True


def _protection_kwargs(config: Config, protection: Optional[ProtectionSpec]) -> dict[str, Any]:
    if protection is None:
        return {"options": render_options(config)}
    if isinstance(protection, ProtectedMatcher):
        return {"protected_tools": protection.tools, "protected_paths": protection.globs}
    return {"protected_predicate": protection}


class ScanMemo:
    """The latest chain scan of a host whose messages never change in place once handed
    over (``Condenser(frozen_messages=True)``): the next scan reads only the messages that
    are not the very objects this one read at the same positions, and detects chains again
    only from the last plain user message before the first of those (the chains that start
    before it are this scan's)."""

    __slots__ = ("scan",)

    def __init__(self) -> None:
        self.scan: Optional[ChainScan] = None


def _scan(
    messages: list[Any],
    config: Config,
    protection: Optional[ProtectionSpec],
    grace_len: Optional[int] = None,
    memo: Optional[ScanMemo] = None,
    closing: Any = None,
) -> ChainScan:
    scan = ChainScan(
        messages,
        grace_len=grace_len,
        grace_turns=float(config.recovery_grace_turns),
        previous=memo.scan if memo is not None else None,
        closing=closing,
        **_protection_kwargs(config, protection),
    )
    if memo is not None:
        memo.scan = scan
    return scan


def detect_chains(
    messages: list[Any],
    config: Optional[Config] = None,
    *,
    protection: Optional[ProtectionSpec] = None,
) -> list[ChainRange]:
    """``detectChains``: the closed and interrupted chains of ``messages``, in order.

    Protection comes from ``config`` (``protectedTools`` / ``protectedPaths``) unless
    ``protection`` overrides it. Raises ``TypeError`` where the reference throws (a ``null``
    message, or a ``null`` content block of an assistant inside a chain).
    """
    scan = _scan(messages, config if config is not None else Config(), protection)
    return [ChainRange._of(row) for row in scan.chains()]


def deterministic_body(records: Sequence[ToolCallRecord], refs: Sequence[str]) -> str:
    """``buildDeterministicBody``: the seven-line zero-LLM chain body (spec 05 section 12).

    Raises ``ValueError`` where the reference throws (no records, or a time value
    ``toISOString`` rejects).
    """
    rows = []
    for record in records:
        args = record.get("args", ABSENT)
        args_json = "" if args is ABSENT else jsjson.dumps(args)
        at: Any = record.get("resultTimestamp")
        if at is None:
            at = record.get("timestamp")
        rows.append(
            (
                to_string(record.get("toolName", ABSENT)),
                to_string(record.get("toolCallId", ABSENT)),
                args_json,
                float(at) if is_number(at) else math.nan,
            )
        )
    return native_deterministic_body(rows, list(refs))


# ---------------------------------------------------------------------------- the seam


@dataclass
class ChainDeps:
    """What chain compression needs from its caller (the flush, or the compact command).

    ``append(custom_type, data)`` appends one custom entry through the caller's appender (a
    failure propagates). ``now()`` is the epoch-ms clock of ``compressedAt``. ``fuse`` is the
    range fuser (None: no fusion; also skipped when ``fuseRangeSummary`` is off).
    ``diagnostics(kind, dedup_key, detail)`` goes to the session's diagnostic sink (which
    deduplicates). ``session_dir`` / ``session_id`` locate spill sidecars and
    ``write_blob(path, text)`` writes one (default :func:`pi_condense.spill.write_blob`).
    ``protection`` overrides the config's protection rules. ``scan_memo`` keeps the latest
    scan for the next one (only for messages that never change in place).
    """

    state: PrunerState
    config: Config
    append: Callable[[str, Any], None]
    now: Callable[[], int]
    fuse: Optional[FuseFn]
    diagnostics: Callable[[str, str, str], None]
    session_dir: str
    session_id: str
    protection: Optional[ProtectionSpec] = None
    write_blob: Optional[Callable[[str, str], None]] = None
    scan_memo: Optional[ScanMemo] = None


@dataclass
class ChainRunResult:
    """What one compression run did.

    ``entries`` are the appended ``context-prune-chain`` data objects (registered in the
    state), ``block_ids`` their ids. ``fusion_usages`` are the usages of the successful fusion
    calls (add them to the stats: one call each) and ``ranges_summarized`` their count.
    ``skipped`` lists ``(startUserTimestamp, reason)`` with reason ``already-compressed`` or
    ``no-summary`` (the reference's result), ``deferred`` the chains held back by the grace
    window, ``backfilled`` the number of records the deterministic backfill indexed.
    """

    entries: list[ChainEntry] = field(default_factory=list)
    fusion_usages: list[Usage] = field(default_factory=list)
    ranges_summarized: int = 0
    skipped: list[tuple[Any, str]] = field(default_factory=list)
    deferred: int = 0
    backfilled: int = 0

    @property
    def block_ids(self) -> list[str]:
        """Block ids of the compressed chains, in order."""
        return [entry["blockId"] for entry in self.entries]

    @property
    def compressed(self) -> int:
        """Number of chains compressed."""
        return len(self.entries)

    @property
    def skipped_no_summary(self) -> int:
        """Chains skipped for lack of anything to compose a body from."""
        return sum(1 for _, reason in self.skipped if reason == "no-summary")


class ChainCompressionError(CondenseError):
    """Chain compression stopped part-way (e.g. a chain entry could not be appended).

    ``partial`` holds what was done before the failure (entries already appended, fusion
    usages already spent).
    """

    def __init__(self, message: str, partial: ChainRunResult) -> None:
        super().__init__(message)
        self.partial = partial


# ---------------------------------------------------------------------------- compression


def _js_trim(text: str) -> str:
    return text.strip(JS_WHITESPACE)


def _usable(completion: Optional[Completion]) -> bool:
    """A fusion result the reference keeps: text after trimming, a normal stop."""
    if completion is None:
        return False
    if completion.stop_reason in ("length", "error", "aborted"):
        return False
    return bool(_js_trim(completion.text))


def _str_keys(keys: Sequence[Any]) -> list[str]:
    """Keys a string-keyed map can hold (other values never match anything)."""
    return [k for k in keys if isinstance(k, str)]


def _indexed_record(state: PrunerState, key: str) -> Optional[ToolCallRecord]:
    """The record indexed under exactly ``key`` (no alias, ref or bare-id resolution)."""
    if key not in state.index.keys_for_bare_id(bare_tool_call_id(key)):
        return None
    return state.get_record(key)


def _spill(deps: ChainDeps, record: ToolCallRecord) -> None:
    """Writes the record's full text to its sidecar, then spills the record in place
    (``applySpill``: ``spillBytes, resultPreview, spillPath, contentHash``, text emptied)."""
    text: str = record["resultText"]
    if not deps.config.is_reference and not (
        deps.session_dir and spill.safe_session_id(deps.session_id)
    ):
        # No usable blob directory: the backfill fails (the chain stays raw) rather than
        # writing outside the session directory or inlining the body.
        raise CondenseError(f"no blob directory for session id {deps.session_id!r}")
    key = occ_key(record["toolCallId"], record.get("resultTimestamp"))
    path = spill.blob_path(deps.session_dir, deps.session_id, key)
    write = deps.write_blob if deps.write_blob is not None else spill.write_blob
    write(path, text)
    record["spillBytes"] = jsjson.utf8_len(text)
    record["resultPreview"] = spill.head_preview(text, deps.config.spill_preview_bytes)
    record["spillPath"] = path
    record["contentHash"] = hash_tool_result(to_string(record.get("toolName", ABSENT)), text)
    record["resultText"] = ""


def _backfill(deps: ChainDeps, records: list[ToolCallRecord]) -> list[dict[str, Any]]:
    """``backfillChainRecords``: spill, allocate refs, append the index entry, then (only
    then) index the records and register their refs. Any failure propagates."""
    threshold = deps.config.spill_threshold
    for record in records:
        if jsjson.utf16_len(record["resultText"]) >= threshold:
            _spill(deps, record)
    refs = deps.state.allocate_refs(
        [(record["toolCallId"], record.get("resultTimestamp")) for record in records]
    )
    deps.append(CUSTOM_TYPE_INDEX, {"toolCalls": records, "backfilled": True, "refs": refs})
    deps.state.add_backfilled(records, refs)
    return refs


async def _fuse(deps: ChainDeps, keys: list[str], result: ChainRunResult) -> Optional[str]:
    """One fusion call for a span with >= 2 distinct per-batch summaries."""
    chain_config = deps.config.chain_compression
    if deps.fuse is None or not chain_config.fuse_range_summary:
        return None
    summaries = deps.state.per_batch_summaries(keys)
    if len(summaries) < 2:
        return None
    try:
        completion = await deps.fuse(range_prompt(summaries))
    except Exception:
        return None
    if completion is None or not _usable(completion):
        return None
    result.fusion_usages.append(completion.usage)
    result.ranges_summarized += 1
    return completion.text


def _entry(
    chain: ChainRange, block_id: str, tool_refs: list[str], compressed_at: int
) -> ChainEntry:
    return {
        "blockId": block_id,
        "startUserTimestamp": chain.start_user_timestamp,
        "droppedToolCallIds": chain.middle_tool_call_ids,
        "finalAssistantTimestamp": chain.final_assistant_timestamp,
        "toolRefs": tool_refs,
        "compressedAt": compressed_at,
    }


def _finish(entry: ChainEntry, chain: ChainRange) -> ChainEntry:
    if chain.protected_tool_call_ids:
        entry["protectedToolCallIds"] = chain.protected_tool_call_ids
    if chain.middle_occurrence_keys:
        entry["droppedOccurrenceKeys"] = chain.middle_occurrence_keys
    return entry


def _commit(deps: ChainDeps, entry: ChainEntry, result: ChainRunResult) -> None:
    deps.append(CUSTOM_TYPE_CHAIN, entry)
    deps.state.register_chain(entry)
    result.entries.append(entry)


async def _compress_covered(
    deps: ChainDeps, chain: ChainRange, keys: list[str], result: ChainRunResult
) -> None:
    block_id = deps.state.issue_block_id()
    tool_refs = deps.state.tool_refs_for(keys)
    fused = await _fuse(deps, keys, result)
    entry = _entry(chain, block_id, tool_refs, deps.now())
    if fused:
        entry["rangeSummaryText"] = fused
    _commit(deps, _finish(entry, chain), result)


def _compress_uncovered(
    deps: ChainDeps,
    scan: ChainScan,
    chain: ChainRange,
    keys: list[str],
    result: ChainRunResult,
) -> None:
    state = deps.state
    indexed = [r for r in (_indexed_record(state, k) for k in keys) if r is not None]
    fresh = scan.extract(
        state.index,
        float(chain.start_user_timestamp),
        float(chain.final_assistant_timestamp),
        chain.protected_tool_call_ids,
    )
    if not fresh and not indexed:
        if not chain.fully_protected:
            deps.diagnostics(
                "backfill-empty",
                to_string(chain.start_user_timestamp),
                f"middles={len(chain.middle_tool_call_ids)}",
            )
        result.skipped.append((chain.start_user_timestamp, "no-summary"))
        return
    if fresh:
        try:
            _backfill(deps, fresh)
        except Exception:
            result.skipped.append((chain.start_user_timestamp, "no-summary"))
            return
        result.backfilled += len(fresh)
    tool_refs = state.tool_refs_for(keys)
    block_id = state.issue_block_id()
    entry = _entry(chain, block_id, tool_refs, deps.now())
    entry["rangeSummaryText"] = deterministic_body([*indexed, *fresh], tool_refs)
    entry["bodySource"] = DETERMINISTIC
    _commit(deps, _finish(entry, chain), result)


async def compress_chains(
    deps: ChainDeps,
    messages: list[Any],
    *,
    window: Optional[float],
    grace_len: Optional[int] = None,
    report_compressed: bool = True,
    closing: Any = None,
) -> ChainRunResult:
    """``detectChains`` + ``compressEligible`` over ``messages`` with rolling window
    ``window`` (None: absent, nothing is selected; 0: every eligible chain).

    ``closing``, when not None, is read after ``messages`` as if it ended the list (as
    :func:`with_closing_message` would add it, without building that list). The recovery
    grace set is computed over the first ``grace_len`` messages (default: all).
    Without ``report_compressed`` the chains already compressed are left out of
    ``skipped`` (listing them reads every chain). A failure after something was appended
    raises :class:`ChainCompressionError` carrying the partial result; detection failures
    raise ``TypeError`` before anything happens.
    """
    scan = _scan(messages, deps.config, deps.protection, grace_len, deps.scan_memo, closing)
    eligible, compressed, deferred = scan.select(
        deps.state.index, math.nan if window is None else float(window), report_compressed
    )
    result = ChainRunResult(deferred=len(deferred))
    result.skipped.extend((start, "already-compressed") for start in compressed)
    try:
        for row in eligible:
            chain = ChainRange._of(row)
            if not (
                _is_finite_number(chain.start_user_timestamp)
                and _is_finite_number(chain.final_assistant_timestamp)
            ):
                # The reference would write an entry it cannot read back (ours: skip).
                result.skipped.append((chain.start_user_timestamp, "no-summary"))
                continue
            keys = _str_keys(chain.lookup_keys)
            if deps.state.has_summary_covering_any(keys):
                await _compress_covered(deps, chain, keys, result)
            else:
                _compress_uncovered(deps, scan, chain, keys, result)
    except Exception as exc:
        raise ChainCompressionError(f"chain compression failed: {exc}", result) from exc
    return result


async def compress_chains_in_flush(
    deps: ChainDeps,
    branch_messages: list[Any],
    closing_message: Any = None,
    *,
    report_compressed: bool = True,
) -> ChainRunResult:
    """The flush's chain step (spec 05 section 9 steps 1-4), when ``chainCompression`` is
    enabled: detection over the branch messages with ``closing_message`` threaded in, grace
    over the branch alone, the configured rolling window.

    ``branch_messages`` are the ``message`` entries' messages of the branch, read before the
    flush wrote its frontier. Updating the stats (chains, fusion usages), the notification and
    catching :class:`ChainCompressionError` are the caller's (steps 5 and the wrapper).
    ``report_compressed`` as for :func:`compress_chains`.
    """
    chain_config = deps.config.chain_compression
    if not chain_config.enabled:
        return ChainRunResult()
    return await compress_chains(
        deps,
        branch_messages,
        window=chain_config.rolling_window,
        grace_len=len(branch_messages),
        report_compressed=report_compressed,
        closing=closing_message if _threads_in(branch_messages, closing_message) else None,
    )


async def compact_all(deps: ChainDeps, branch_messages: list[Any]) -> ChainRunResult:
    """``/pruner compact``: every eligible chain now (window 0), regardless of
    ``chainCompression.enabled``; no closing message."""
    return await compress_chains(deps, branch_messages, window=0)


def estimate_reclaim_tokens(state: PrunerState, entries: Sequence[ChainEntry]) -> int:
    """The compact command's estimate (spec 09 section 2.3): ``ceil(chars / 4)`` over the
    result texts of the records the entries dropped (spilled records count 0)."""
    chars = 0
    for entry in entries:
        keys = entry.get("droppedOccurrenceKeys")
        if keys is None:
            keys = entry.get("droppedToolCallIds") or []
        for record in state.lookup_records(_str_keys(keys)):
            text = record.get("resultText")
            if isinstance(text, str):
                chars += jsjson.utf16_len(text)
    return -(-chars // 4)


def summarizer_fuse(
    summarizer: Summarizer, clock: Callable[[], int], thinking: Optional[str] = None
) -> FuseFn:
    """A plain range fuser over ``summarizer`` (one call, no timeouts or fallback; any
    failure is None)."""

    async def fuse(prompt: str) -> Optional[Completion]:
        request = CompletionRequest(
            prompt=prompt, kind="range", timestamp=clock(), thinking=thinking
        )
        try:
            return await summarizer.complete(request, lambda: None)
        except Exception:
            return None

    return fuse
