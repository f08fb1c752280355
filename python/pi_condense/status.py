"""The pruner's status: summarizer stats, diagnostics, the status line and the number formats
it prints.

- :class:`StatsAccumulator` holds the cumulative summarizer usage (``context-prune-stats``),
  the baseline for the external cost event and the live reclaim of the last render.
- :class:`DiagnosticSink` persists each render/compression degradation once per session.
- :func:`status_text` is the status line; :func:`cc` and :func:`format_cost` format numbers
  with JavaScript's rounding (spec 11 section 4).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Callable, Optional, TypedDict, Union

from .config import Config
from .js.values import js_round, to_fixed, to_string
from .state import Stats, normalize_stats
from .summarize.base import Usage

__all__ = [
    "DIAGNOSTIC_KINDS",
    "DiagnosticSink",
    "LiveReclaim",
    "StatsAccumulator",
    "cc",
    "format_char_progress",
    "format_cost",
    "status_text",
]

log = logging.getLogger(__name__)

Number = Union[int, float]

DIAGNOSTIC_KINDS = ("unresolved-range", "range-id-mismatch", "orphan-sweep", "backfill-empty")
"""Every ``context-prune-diagnostic`` kind, in status-line order."""

_DIAG_LETTERS = {"unresolved-range": "u", "range-id-mismatch": "m", "orphan-sweep": "o"}
_DIAG_LETTERS["backfill-empty"] = "b"


# ------------------------------------------------------------------------------ JS numbers


def cc(n: Number) -> str:
    """``formatCompactCount``: ``1.2M``, ``1.3k`` (from 1250), ``340``."""
    if n >= 1_000_000:
        return f"{to_fixed(n / 1_000_000, 1)}M"
    if n >= 1000:
        return f"{to_fixed(n / 1000, 1)}k"
    return to_string(n)


def format_cost(n: Number) -> str:
    """``formatCost``: ``<$0.001`` for tiny positive amounts, else ``$`` + 3 decimals."""
    if 0 < n < 0.001:
        return "<$0.001"
    return f"${to_fixed(n, 3)}"


def format_char_progress(received: Number, raw: Optional[Number] = None) -> str:
    """``formatCharProgress``: ``1.2k summary chars / 8.4k raw chars``."""
    text = f"{cc(received)} summary char{'' if received == 1 else 's'}"
    if raw is None:
        return text
    return f"{text} / {cc(raw)} raw char{'' if raw == 1 else 's'}"


# ------------------------------------------------------------------------------ stats


class LiveReclaim(TypedDict):
    """Sizes of the last render that pruned something (UTF-16 units)."""

    beforeChars: int
    afterChars: int


class StatsAccumulator:
    """Cumulative summarizer stats (``StatsAccumulator``) plus the cost baseline and the live
    reclaim of the last pruning render."""

    __slots__ = ("_baseline", "_stats", "live_reclaim")

    def __init__(self, stats: Optional[Stats] = None) -> None:
        self._stats: Stats = normalize_stats(None)
        self._baseline: Stats = normalize_stats(None)
        self.live_reclaim: Optional[LiveReclaim] = None
        """Before/after sizes of the last render that changed the context, if any."""
        self.reset(stats)

    def reset(self, stats: Optional[Stats] = None) -> None:
        """Reconstruction: take ``stats`` (zeros if None) as both totals and cost baseline and
        forget the live reclaim."""
        self._stats = normalize_stats(stats)
        self._baseline = normalize_stats(stats)
        self.live_reclaim = None

    def add(self, usage: Usage) -> None:
        """Count one summarizer call whose result was used."""
        self._stats["totalInputTokens"] += usage.input
        self._stats["totalOutputTokens"] += usage.output
        self._stats["totalCost"] += usage.cost.total
        self._stats["callCount"] += 1

    def add_chains_compressed(self, n: int) -> None:
        """Count compressed chains."""
        self._stats["chainsCompressed"] += n

    def add_ranges_summarized(self, n: int) -> None:
        """Count successful range fusions."""
        self._stats["rangesSummarized"] += n

    def snapshot(self) -> Stats:
        """A copy of the totals (the ``context-prune-stats`` data)."""
        return self._stats.copy()

    def external_cost(self) -> dict[str, Any]:
        """The ``cost:external`` payload: this session's delta since reconstruction."""
        return {
            "source": "pi-condense",
            "totalCost": self._stats["totalCost"] - self._baseline["totalCost"],
            "inputTokens": self._stats["totalInputTokens"] - self._baseline["totalInputTokens"],
            "outputTokens": self._stats["totalOutputTokens"] - self._baseline["totalOutputTokens"],
        }

    def set_live_reclaim(self, before_chars: int, after_chars: int) -> None:
        """Record the sizes of a pruning render."""
        self.live_reclaim = {"beforeChars": before_chars, "afterChars": after_chars}


# ------------------------------------------------------------------------------ diagnostics


class DiagnosticSink:
    """Persists ``context-prune-diagnostic`` entries once per ``(kind, dedup key)``.

    ``append(customType, data)`` writes the entry; when it raises, the report is logged and
    not marked seen, so the next report of the same condition retries.
    """

    __slots__ = ("_append", "_counts", "_seen")

    def __init__(self, append: Callable[[str, Any], Any]) -> None:
        self._append = append
        self._seen: set[str] = set()
        self._counts: dict[str, int] = dict.fromkeys(DIAGNOSTIC_KINDS, 0)

    def report(self, kind: str, dedup_key: str, detail: str) -> bool:
        """Persist the diagnostic unless already reported; True when an entry was written."""
        key = f"{kind}:{dedup_key}"
        if key in self._seen:
            return False
        try:
            self._append("context-prune-diagnostic", {"kind": kind, "detail": detail})
        except Exception:
            log.warning("pruner: failed to persist %s diagnostic:", kind, exc_info=True)
            return False
        self._seen.add(key)
        self._counts[kind] = self._counts.get(kind, 0) + 1
        return True

    def counts(self) -> dict[str, int]:
        """Reports per kind since the last reset (a copy)."""
        return dict(self._counts)

    def reset(self) -> None:
        """Forget what was reported (reload / tree navigation)."""
        self._seen.clear()
        self._counts = dict.fromkeys(DIAGNOSTIC_KINDS, 0)


# ------------------------------------------------------------------------------ status line


def status_text(
    config: Config,
    reclaim: Optional[LiveReclaim] = None,
    diagnostics: Optional[Mapping[str, int]] = None,
) -> str:
    """``pruneStatusText`` (spec 08 section 7), without the widget's ``"│ "`` prefix: the
    context metrics are no longer shown there (pi-condense 2.9.2; ``status`` shows them)."""
    if not config.enabled:
        return "prune: OFF"
    parts = [
        f"{_DIAG_LETTERS[kind]}{diagnostics[kind]}"
        for kind in DIAGNOSTIC_KINDS
        if diagnostics and diagnostics.get(kind)
    ]
    suffix = f" \u00b7 diag {'/'.join(parts)}" if parts else ""
    if reclaim is None or reclaim["beforeChars"] <= 0:
        return f"prune: ON{suffix}"
    before = js_round(reclaim["beforeChars"] / 4)
    after = js_round(reclaim["afterChars"] / 4)
    if before == 0:  # JS: 1 - after/0 is -Infinity (clamped to 0), or NaN when both are 0
        reduction = "NaN" if after == 0 else "0"
    else:
        reduction = str(max(0, js_round((1 - after / before) * 100)))
    return f"prune: ON \u00b7 {cc(before)}->{cc(after)} (-{reduction}%){suffix}"
