"""Pruner state: the index, frontier and stats rebuilt from a branch's ``context-prune-*`` entries.

:class:`PrunerState` wraps the native :class:`pi_condense._core.Index` (records by occurrence
key, short refs ``tN``, dedup aliases, per-batch summary bodies, the compressed-chain registry
and the block counter ``bN``) and adds the two small state holders the reference rebuilds from
the same branch: the prune frontier (last valid entry wins) and the summarizer stats (last entry
wins).

Reconstruction reads the branch's entry dicts in one pass in Rust; records and chain entries
stay the very dict objects of the branch (lookups return them, not copies), except dedup-alias
occurrences from :meth:`PrunerState.records_for_id`, which are shallow copies labelled with the
alias's own ``resultTimestamp``, as in the reference.

Keys, ids and short refs are compared as JavaScript compares strings (UTF-16 code units): one
holding a lone surrogate is a different key from its U+FFFD look-alike, and every key returned
is the exact ``str`` (a surrogate pair given as two code points comes back joined, the same JS
string). The record bodies themselves are never converted.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Optional, TypedDict, Union

from ._core import Index, RenderCache
from .js.values import ABSENT
from .session import SessionFile

__all__ = [
    "ChainEntry",
    "Frontier",
    "PrunerState",
    "Stats",
    "ToolCallRecord",
    "normalize_frontier",
    "normalize_stats",
]

ToolCallRecord = dict[str, Any]
"""A persisted ``ToolCallRecord`` (spec 02 section 1), as a plain JSON dict."""

ChainEntry = dict[str, Any]
"""A persisted ``ChainCompressionEntry`` (spec 02 section 4), as a plain JSON dict."""

Number = Union[int, float]


class Frontier(TypedDict):
    """The prune frontier (``context-prune-frontier`` data, writer key order)."""

    lastAttemptedToolCallId: str
    lastAttemptedToolName: str
    lastAttemptedTurnIndex: Number
    lastAttemptedTimestamp: Number
    attemptedBatchCount: Number
    attemptedToolCallCount: Number
    rawCharCount: Number
    summaryCharCount: Number
    outcome: str


class Stats(TypedDict):
    """Cumulative summarizer stats (``context-prune-stats`` data, writer key order)."""

    totalInputTokens: Number
    totalOutputTokens: Number
    totalCost: Number
    callCount: Number
    chainsCompressed: Number
    rangesSummarized: Number


def _get(data: Any, key: str) -> Any:
    """``data.key`` with ``undefined`` as None (``None`` and a missing key are both nullish)."""
    if isinstance(data, Mapping):
        value = data.get(key)
        if value is None or value is ABSENT:
            return None
        return value
    return None


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def normalize_frontier(data: Any) -> Frontier:
    """The reference's ``PruneFrontierTracker.fromJSON`` for a valid frontier ``data``.

    Missing (or ``null``) fields default: tool name ``"unknown"``, numbers ``0``, outcome
    ``"summarized"``. Unknown keys (e.g. the legacy ``thinkingStripBoundaryTimestamp``) are
    dropped. Values are otherwise copied as they are.
    """
    return {
        "lastAttemptedToolCallId": _get(data, "lastAttemptedToolCallId"),
        "lastAttemptedToolName": _or(_get(data, "lastAttemptedToolName"), "unknown"),
        "lastAttemptedTurnIndex": _or(_get(data, "lastAttemptedTurnIndex"), 0),
        "lastAttemptedTimestamp": _or(_get(data, "lastAttemptedTimestamp"), 0),
        "attemptedBatchCount": _or(_get(data, "attemptedBatchCount"), 0),
        "attemptedToolCallCount": _or(_get(data, "attemptedToolCallCount"), 0),
        "rawCharCount": _or(_get(data, "rawCharCount"), 0),
        "summaryCharCount": _or(_get(data, "summaryCharCount"), 0),
        "outcome": _or(_get(data, "outcome"), "summarized"),
    }


def normalize_stats(data: Any) -> Stats:
    """The reference's ``StatsAccumulator.fromJSON``: every field ``?? 0``.

    ``None`` (no stats entry) gives all zeros, as does truthy ``data`` that is not an object.
    """
    return {
        "totalInputTokens": _or(_get(data, "totalInputTokens"), 0),
        "totalOutputTokens": _or(_get(data, "totalOutputTokens"), 0),
        "totalCost": _or(_get(data, "totalCost"), 0),
        "callCount": _or(_get(data, "callCount"), 0),
        "chainsCompressed": _or(_get(data, "chainsCompressed"), 0),
        "rangesSummarized": _or(_get(data, "rangesSummarized"), 0),
    }


class PrunerState:
    """Index + frontier + stats of one branch.

    Build it with :meth:`from_branch` / :meth:`from_session` (reconstruction, spec 03 section 3)
    or empty; the lookups below follow spec 03 section 5 and 8. The flush mutates it through
    the ``add_*`` / ``register_*`` methods, which change memory only: writing the entries is
    the caller's job.
    """

    __slots__ = ("__weakref__", "frontier", "index", "render_cache", "stats")

    def __init__(
        self,
        index: Optional[Index] = None,
        frontier: Optional[Frontier] = None,
        stats: Optional[Stats] = None,
    ) -> None:
        self.index: Index = index if index is not None else Index()
        """The native index (also what the Rust render reads)."""
        self.frontier: Optional[Frontier] = frontier
        """The prune frontier in effect, or None."""
        self.stats: Stats = stats if stats is not None else normalize_stats(None)
        """Cumulative summarizer stats (the replayed totals are also the cost baseline)."""
        self.render_cache: RenderCache = RenderCache()
        """What the last render against this state leaves to the next: the JSON lengths of its
        messages, reused for every message whose objects are unchanged (exact: see README
        "Performance"), its new messages, and where a frozen render resumes. It holds
        references to those messages until the next render."""

    @property
    def sizes(self) -> RenderCache:
        """Deprecated name of :attr:`render_cache`."""
        warnings.warn(
            "PrunerState.sizes is deprecated: use PrunerState.render_cache",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.render_cache

    @sizes.setter
    def sizes(self, cache: RenderCache) -> None:
        warnings.warn(
            "PrunerState.sizes is deprecated: use PrunerState.render_cache",
            DeprecationWarning,
            stacklevel=2,
        )
        self.render_cache = cache

    @classmethod
    def from_branch(cls, entries: Iterable[Mapping[str, Any]]) -> PrunerState:
        """Rebuild the state from a branch: its entry dicts, root first.

        Entries that are not ``context-prune-*`` entries the reference reads back are ignored,
        and so are malformed ones the reference would choke on (e.g. an index entry without
        ``data``), instead of aborting the rebuild.
        """
        index = Index.from_entries(entries)
        frontier_data = index.frontier_data
        frontier = normalize_frontier(frontier_data) if frontier_data is not None else None
        return cls(index, frontier, normalize_stats(index.stats_data))

    @classmethod
    def from_session(cls, session: SessionFile, leaf: Optional[str] = None) -> PrunerState:
        """Rebuild the state from the branch of ``session`` ending at ``leaf``.

        ``leaf`` defaults to the session's current leaf.
        """
        # Only custom and custom_message entries hold pruner state: the others (most of a
        # branch) are not handed over at all.
        return cls.from_branch(session.custom_entries(leaf))

    def __repr__(self) -> str:
        return (
            f"PrunerState(records={self.index.record_count}, aliases={self.index.alias_count}, "
            f"summaries={self.index.summary_count}, chains={self.index.chain_count}, "
            f"next_ref=t{self.index.next_short_ref_number}, "
            f"next_block=b{self.index.next_block_number})"
        )

    # ------------------------------------------------------------------ lookups

    def is_summarized(self, key: str) -> bool:
        """``isSummarized``: the occurrence key is indexed or is a dedup alias (strict)."""
        return self.index.is_summarized(key)

    def has_legacy_bare_record(self, tool_call_id: str) -> bool:
        """``hasLegacyBareRecord``: a record under the bare id, and no other key for it."""
        return self.index.has_legacy_bare_record(tool_call_id)

    def resolve(self, id_or_ref: str) -> Optional[str]:
        """``resolveToolCallId``: key, dedup alias, short ref, or an unambiguous bare id."""
        return self.index.resolve(id_or_ref)

    def get_record(self, id_or_ref: str) -> Optional[ToolCallRecord]:
        """``getRecord``: the record :meth:`resolve` leads to (the branch's own dict)."""
        return self.index.get_record(id_or_ref)

    def lookup_records(self, ids: Iterable[str]) -> list[ToolCallRecord]:
        """``lookupToolCalls``: :meth:`get_record` for each id, misses skipped."""
        return self.index.lookup_records(list(ids))

    def records_for_id(self, id_or_ref: str) -> list[ToolCallRecord]:
        """``getRecordsForId``: every occurrence of a bare id (dedup aliases included),
        chronologically; exactly one record for a key or short ref; ``[]`` if unknown."""
        return self.index.records_for_id(id_or_ref)

    def short_ref(self, key: str) -> Optional[str]:
        """``getShortRefForToolCallId``: the ``tN`` of a key (None for legacy refs)."""
        return self.index.short_ref(key)

    def key_for_short_ref(self, short_id: str) -> Optional[str]:
        """The occurrence key a short ref stands for."""
        return self.index.key_for_short_ref(short_id)

    def tool_refs_for(self, keys: Iterable[str]) -> list[str]:
        """``getToolRefsForToolCallIds``: refs of the keys that have one, in order.

        A ref may repeat: a dedup alias shares its original's ref.
        """
        return self.index.tool_refs_for(list(keys))

    def has_summary_covering_any(self, keys: Iterable[str]) -> bool:
        """``hasPerBatchSummaryCoveringAny``: some summary body shares a key."""
        return self.index.has_summary_covering_any(list(keys))

    def per_batch_summaries(self, keys: Iterable[str]) -> list[str]:
        """``getPerBatchSummariesForToolCallIds``: overlapping body texts, deduplicated."""
        return self.index.per_batch_summaries(list(keys))

    def per_batch_summary_text(self, keys: Iterable[str]) -> str:
        """``getPerBatchSummaryTextForToolCallIds``: those texts joined with a blank line."""
        return self.index.per_batch_summary_text(list(keys))

    def chain_entries(self) -> list[ChainEntry]:
        """``getChainEntries``: registered chains by ``startUserTimestamp`` ascending."""
        return self.index.chain_entries()

    def find_chain_by_block_id(self, block_id: str) -> Optional[ChainEntry]:
        """``findChainEntryByBlockId``: the first registered chain with that block id."""
        return self.index.find_chain_by_block_id(block_id)

    def lookup_by_content(self, tool_name: str, result_text: str) -> Optional[str]:
        """``lookupByContent``: the canonical key of an identical (normalized) result."""
        return self.index.lookup_by_content(tool_name, result_text)

    @property
    def next_short_ref_number(self) -> Number:
        """``N`` of the next short ref ``tN`` to allocate."""
        return self.index.next_short_ref_number

    @property
    def next_block_number(self) -> Number:
        """``N`` of the next block id ``bN`` to issue."""
        return self.index.next_block_number

    # ---------------------------------------------------------------- mutations

    def add_batch(self, records: Iterable[ToolCallRecord]) -> list[str]:
        """``addBatch`` in memory: index the records and seed their dedup hashes."""
        return self.index.add_batch(records)

    def add_backfilled(
        self, records: Iterable[ToolCallRecord], refs: Iterable[Mapping[str, Any]]
    ) -> list[str]:
        """Backfill step 4: index without dedup seeding, then register the refs."""
        return self.index.add_backfilled(records, [dict(r) for r in refs])

    def allocate_refs(self, calls: Iterable[tuple[str, Optional[Number]]]) -> list[dict[str, Any]]:
        """``allocateSummaryRefs``: fresh ``tN`` refs for ``(toolCallId, resultTimestamp)``.

        The counter advances; nothing is registered until :meth:`register_refs`.
        """
        return self.index.allocate_refs(calls)

    def register_refs(self, refs: Iterable[Mapping[str, Any]]) -> None:
        """``registerSummaryRefs`` for ``{shortId, toolCallId, resultTimestamp?}`` refs."""
        self.index.register_refs([dict(r) for r in refs])

    def register_duplicate(self, new_key: str, original_key: str) -> bool:
        """``registerDuplicate`` in memory (False when the keys are equal: nothing to write)."""
        return self.index.register_duplicate(new_key, original_key)

    def register_summary_body(self, keys: Iterable[str], text: str) -> bool:
        """``registerSummaryBody``: kept only when both keys and text are non-empty."""
        return self.index.register_summary_body(list(keys), text)

    def register_chain(self, entry: ChainEntry) -> None:
        """``registerChain``: replaces any chain with the same ``startUserTimestamp``."""
        self.index.register_chain(entry)

    def issue_block_id(self) -> str:
        """The next block id ``bN`` (burned even if its entry is never written)."""
        return self.index.issue_block_id()

    def advance_frontier(self, frontier: Frontier) -> None:
        """Replace the frontier (a copy is kept)."""
        self.frontier = frontier.copy()
