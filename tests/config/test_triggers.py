"""Budget / delta triggers and the turn_end gate (spec 08 sections 1.3, 2)."""

from __future__ import annotations

import math
from typing import Optional

import pytest

from pi_condense.triggers import (
    MAX_BUDGET_WINDOW,
    ContextUsage,
    evaluate_gate,
    queued_notice,
    should_budget_flush,
    should_delta_flush,
    usage_fraction,
)


def usage(tokens: Optional[int], window: int = 200_000) -> ContextUsage:
    return ContextUsage(tokens, window)


@pytest.mark.parametrize("threshold", [None, 0, -0.5, 1.5, math.nan])
def test_budget_rejects_invalid_thresholds(threshold: Optional[float]) -> None:
    assert not should_budget_flush(usage(199_999), threshold)


def test_budget_guards_and_levels() -> None:
    assert not should_budget_flush(None, 0.5)
    assert not should_budget_flush(usage(None), 0.5)
    assert not should_budget_flush(usage(100, 0), 0.5)
    assert should_budget_flush(usage(100_000), 0.5)
    assert not should_budget_flush(usage(99_999), 0.5)
    assert should_budget_flush(usage(200_000), 1.0)


def test_budget_ceiling_caps_the_level_on_huge_windows() -> None:
    assert MAX_BUDGET_WINDOW == 300_000
    assert should_budget_flush(usage(300_000, 1_000_000), 0.9)
    assert not should_budget_flush(usage(299_999, 1_000_000), 0.9)
    assert should_budget_flush(usage(100_000, 1_000_000), 0.1)  # a low threshold still governs


def test_usage_fraction_uses_the_capped_window_and_is_not_clamped() -> None:
    assert usage_fraction(None) is None
    assert usage_fraction(usage(None)) is None
    assert usage_fraction(usage(50_000)) == 0.25
    assert usage_fraction(usage(600_000, 1_000_000)) == 2.0


def test_delta_trigger() -> None:
    assert not should_delta_flush(usage(100_000), None, 0.1)
    assert not should_delta_flush(usage(100_000), 0.2, None)
    assert not should_delta_flush(usage(100_000), 0.2, 0)
    assert not should_delta_flush(usage(100_000), 0.2, 1.2)
    assert not should_delta_flush(usage(None), 0.2, 0.1)
    assert should_delta_flush(usage(100_000), 0.25, 0.25)  # exactly the delta
    assert not should_delta_flush(usage(99_000), 0.25, 0.25)
    assert not should_delta_flush(usage(60_000), 0.2, 0.1)  # 0.3 - 0.2 < 0.1 in doubles, as in JS
    # growth is measured against the capped window; it keeps firing above the ceiling
    assert should_delta_flush(usage(900_000, 1_000_000), 2.5, 0.4)


def test_gate_budget_wins_and_sets_the_baseline() -> None:
    decision = evaluate_gate(
        usage(150_000),
        pending=2,
        rearmed=False,
        flushing=False,
        previous_fraction=0.1,
        threshold=0.5,
        delta=0.2,
    )
    assert decision.flush
    assert decision.trigger == "budget"
    assert decision.notice == "pruner: context budget reached \u2014 compacting 2 pending turns"
    assert decision.previous_fraction == 0.75


def test_gate_delta_and_rearmed_notices() -> None:
    delta = evaluate_gate(
        usage(100_000), pending=1, rearmed=False, flushing=False,
        previous_fraction=0.2, threshold=None, delta=0.25,
    )  # fmt: skip
    assert (delta.trigger, delta.notice) == (
        "delta",
        "pruner: context jumped this turn \u2014 compacting 1 pending turn",
    )
    rearmed = evaluate_gate(
        usage(190_000), pending=0, rearmed=True, flushing=False,
        previous_fraction=None, threshold=0.9, delta=None,
    )  # fmt: skip
    assert (rearmed.trigger, rearmed.notice) == (
        "rearmed",
        "pruner: context budget reached \u2014 compacting work recovered after reload",
    )


def test_gate_does_not_fire_without_work_or_while_flushing() -> None:
    for pending, rearmed, flushing in ((0, False, False), (1, False, True)):
        decision = evaluate_gate(
            usage(190_000), pending=pending, rearmed=rearmed, flushing=flushing,
            previous_fraction=None, threshold=0.5, delta=None,
        )  # fmt: skip
        assert not decision.flush
        assert decision.trigger is None
        assert decision.previous_fraction == 0.95


def test_gate_keeps_the_baseline_when_tokens_are_unknown() -> None:
    decision = evaluate_gate(
        usage(None), pending=1, rearmed=False, flushing=False,
        previous_fraction=0.4, threshold=0.5, delta=0.1,
    )  # fmt: skip
    assert not decision.flush
    assert decision.previous_fraction == 0.4


def test_queued_notice() -> None:
    assert queued_notice(1, "agent-message") == (
        "pruner: 1 turn queued \u2014 will summarize on agent's next text response"
    )
    assert (
        queued_notice(3, "on-demand")
        == "pruner: 3 turns queued \u2014 will summarize on /pruner now"
    )
