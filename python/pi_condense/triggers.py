"""When to flush: ``pruneOn``, the token-budget and budget-delta triggers, reload rearm.

The reference flushes at the end of every final (tool-free) assistant reply when
``pruneOn`` is ``agent-message``, and, independently of the mode, at ``turn_end`` when the
context crosses ``autoBudgetThreshold`` of the window or grew by ``budgetTurnDelta`` of it in
one turn (spec 08 sections 1-2), or (pi-condense 2.10.0, opt-in) when the unsummarized tail
past the prune frontier reaches ``frontierGapThresholdTokens``. The window is capped at
:data:`MAX_BUDGET_WINDOW` tokens: the threshold caps the level, the delta caps the denominator.
After a reload, a rescan that finds recoverable work arms the gate once ("rearmed") so the
next ``turn_end`` evaluates it even without a freshly queued batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

__all__ = [
    "MAX_BUDGET_WINDOW",
    "ContextUsage",
    "FlushTrigger",
    "GateDecision",
    "evaluate_gate",
    "queued_notice",
    "should_budget_flush",
    "should_delta_flush",
    "usage_fraction",
]

MAX_BUDGET_WINDOW = 300_000
"""Token ceiling of the window the budget triggers measure against."""

FlushTrigger = Literal["budget", "delta", "frontier-gap", "message-end", "manual", "rearmed"]
"""The ``trigger`` of a flush-metrics entry."""


@dataclass(frozen=True)
class ContextUsage:
    """The host's context usage (Pi's ``getContextUsage()``): ``tokens`` is None right after a
    provider compaction, when the size is unknown."""

    tokens: Optional[int]
    context_window: int
    percent: Optional[float] = None


def _fraction(value: Optional[float]) -> Optional[float]:
    """``value`` if it is a fraction in (0, 1], else None."""
    if value is None or math.isnan(value) or not 0 < value <= 1:
        return None
    return value


def _tokens(usage: Optional[ContextUsage]) -> Optional[int]:
    """The token count when it is known and the window is positive."""
    if usage is None or usage.tokens is None or not usage.context_window > 0:
        return None
    return usage.tokens


def should_budget_flush(usage: Optional[ContextUsage], threshold: Optional[float]) -> bool:
    """``tokens >= min(300000, threshold * contextWindow)`` for a valid threshold in (0, 1]."""
    level = _fraction(threshold)
    tokens = _tokens(usage)
    if level is None or tokens is None or usage is None:
        return False
    return tokens >= min(MAX_BUDGET_WINDOW, level * usage.context_window)


def usage_fraction(usage: Optional[ContextUsage]) -> Optional[float]:
    """``tokens / min(contextWindow, 300000)``, not clamped (can exceed 1); None when unknown."""
    tokens = _tokens(usage)
    if tokens is None or usage is None:
        return None
    return tokens / min(usage.context_window, MAX_BUDGET_WINDOW)


def should_delta_flush(
    usage: Optional[ContextUsage], previous: Optional[float], delta: Optional[float]
) -> bool:
    """The context grew by at least ``delta`` of the (capped) window since the last turn."""
    step = _fraction(delta)
    current = usage_fraction(usage)
    if step is None or previous is None or current is None:
        return False
    return current - previous >= step


@dataclass(frozen=True)
class GateDecision:
    """Outcome of the ``turn_end`` gate: whether to flush now, with which trigger and notice,
    and the new delta baseline."""

    flush: bool
    trigger: Optional[FlushTrigger]
    notice: Optional[str]
    previous_fraction: Optional[float]


def evaluate_gate(
    usage: Optional[ContextUsage],
    *,
    pending: int,
    rearmed: bool,
    flushing: bool,
    previous_fraction: Optional[float],
    threshold: Optional[float],
    delta: Optional[float],
    gap_tokens: Optional[int] = None,
    gap_threshold: Optional[int] = None,
) -> GateDecision:
    """The budget/delta/frontier-gap gate of ``turn_end`` (spec 08 section 1.3 steps 6-7).

    Budget and delta are evaluated against the old baseline, then the baseline moves to the
    current fraction (kept when the size is unknown). The frontier gap hits when
    ``gap_tokens`` (the metrics' ``frontierGapTokens``; None when unknown) reaches
    ``gap_threshold``. A flush needs queued or rearmed work, no flush in progress, and a hit;
    budget wins over delta, delta over the gap.
    """
    budget_hit = should_budget_flush(usage, threshold)
    delta_hit = should_delta_flush(usage, previous_fraction, delta)
    gap_hit = gap_threshold is not None and gap_tokens is not None and gap_tokens >= gap_threshold
    fraction = usage_fraction(usage)
    baseline = previous_fraction if fraction is None else fraction
    if not ((pending > 0 or rearmed) and not flushing and (budget_hit or delta_hit or gap_hit)):
        return GateDecision(False, None, None, baseline)
    trigger: FlushTrigger
    if budget_hit:
        reason, trigger = "context budget reached", "budget"
    elif delta_hit:
        reason, trigger = "context jumped this turn", "delta"
    else:
        reason, trigger = "un-pruned tail exceeded frontier gap threshold", "frontier-gap"
    if pending > 0:
        plural = "" if pending == 1 else "s"
        notice = f"pruner: {reason} \u2014 compacting {pending} pending turn{plural}"
    else:
        notice = f"pruner: {reason} \u2014 compacting work recovered after reload"
        trigger = "rearmed"
    return GateDecision(True, trigger, notice, baseline)


def queued_notice(pending: int, prune_on: str) -> str:
    """The notification after a live batch was queued."""
    when = "agent's next text response" if prune_on == "agent-message" else "/pruner now"
    plural = "" if pending == 1 else "s"
    return f"pruner: {pending} turn{plural} queued \u2014 will summarize on {when}"
