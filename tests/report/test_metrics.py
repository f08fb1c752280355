"""Context metrics, stats, diagnostics and status text (spec 08 sections 5-8, spec 11 section 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

from pi_condense.capture import protection_predicate
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.js.values import js_round, to_fixed
from pi_condense.keys import occ_key
from pi_condense.metrics import ContextMetrics, MetricsSnapshot, project_branch_messages
from pi_condense.session import SessionFile
from pi_condense.state import Frontier, PrunerState, normalize_frontier
from pi_condense.status import (
    DiagnosticSink,
    StatsAccumulator,
    cc,
    format_char_progress,
    format_cost,
    status_text,
)
from pi_condense.summarize.base import Cost, Usage
from support.agent import assistant, config, read_gz, result, user


def never(name: Any, args: Any) -> bool:
    return False


def metrics(
    messages: list[Any],
    frontier: Optional[Frontier] = None,
    summarized: frozenset[str] = frozenset(),
    protect: Any = never,
) -> MetricsSnapshot:
    return ContextMetrics().compute(messages, frontier, summarized.__contains__, protect)


def tokens(message: Any) -> int:
    return js_round(jsjson.length(message) / 4)


# ---------------------------------------------------------------------------- JS numbers


def test_js_round_and_to_fixed() -> None:
    assert [js_round(x) for x in (2.5, -2.5, 0.49999999999999994, 1.4999)] == [3, -2, 0, 1]
    assert to_fixed(1.25, 1) == "1.3"
    assert to_fixed(0.125, 2) == "0.13"
    assert to_fixed(1.005, 2) == "1.00"
    assert to_fixed(0, 3) == "0.000"


def test_one_math_round_for_every_caller() -> None:
    # The summarizer's stall message once had its own floor(x + 0.5), which gives 1 for
    # 0.49999999999999994 (the sum rounds to exactly 1.0); every caller uses the one rule.
    from pi_condense.cli import render_cmd, status_cmd
    from pi_condense.js import values
    from pi_condense.summarize import runner

    assert runner.js_round is values.js_round
    assert render_cmd.js_round is values.js_round
    assert render_cmd.to_fixed is values.to_fixed
    assert status_cmd.js_round is values.js_round


def test_compact_counts_and_costs() -> None:
    assert cc(340) == "340"
    assert cc(1250) == "1.3k"
    assert cc(92000) == "92.0k"
    assert cc(1_250_000) == "1.3M"
    assert cc(12.5) == "12.5"
    assert format_cost(0) == "$0.000"
    assert format_cost(0.0004) == "<$0.001"
    assert format_cost(0.0125) == "$0.013"
    assert format_char_progress(1) == "1 summary char"
    assert format_char_progress(1250, 1) == "1.3k summary chars / 1 raw char"


# ---------------------------------------------------------------------------- metrics


def test_empty_branch_is_all_zeros() -> None:
    assert metrics([]) == {
        "openCycleThinkingTokens": 0,
        "largestChainSharePct": 0,
        "frontierGapTokens": 0,
    }


def test_thinking_counts_only_after_the_last_text_only_assistant() -> None:
    early = assistant(2, thinking="x" * 40, text="done")
    late = assistant(4, ("a", "read", {}), thinking="y" * 100)
    block = late["content"][0]
    snap = metrics([user("q", 1), early, user("q2", 3), late])
    assert snap["openCycleThinkingTokens"] == js_round(jsjson.length(block) / 4)
    whole = metrics([user("q", 1), late])  # no text-only assistant: everything is open
    assert whole["openCycleThinkingTokens"] == js_round(jsjson.length(block) / 4)
    assert metrics([user("q", 1), early])["openCycleThinkingTokens"] == 0


def test_chain_share_closed_chain_versus_open_segment() -> None:
    big = user("x" * 400, 1)
    closed = [big, assistant(2, text="ok")]
    tail = [user("small", 3)]
    msgs = closed + tail
    total = sum(jsjson.length(m) for m in msgs)
    chain = jsjson.length(big) + jsjson.length(closed[1])
    assert metrics(msgs)["largestChainSharePct"] == js_round(100 * chain / total)
    open_big = [user("s", 1), assistant(2, text="ok"), user("y" * 800, 3)]
    total = sum(jsjson.length(m) for m in open_big)
    assert metrics(open_big)["largestChainSharePct"] == js_round(
        100 * jsjson.length(open_big[2]) / total
    )


def test_custom_messages_count_and_open_chains_while_idle() -> None:
    custom = {
        "role": "custom",
        "customType": "note",
        "content": "z" * 500,
        "display": False,
        "timestamp": 2,
    }
    msgs = [user("a", 1), custom, assistant(3, text="b")]
    total = sum(jsjson.length(m) for m in msgs)
    share = metrics(msgs)["largestChainSharePct"]
    assert share == js_round(100 * total / total)  # the chain spans the custom message
    # 2.10.0: a custom message first opens a chain of its own, interrupted by the user
    # message: the largest chain is the custom message alone (78, the 2.11.3 reference's
    # computeContextMetrics on these three messages).
    only = [custom, user("a", 1), assistant(3, text="b")]
    expected = js_round(100 * jsjson.length(custom) / sum(map(jsjson.length, only)))
    assert metrics(only)["largestChainSharePct"] == expected == 78


def test_interrupted_chains_are_measured_to_the_next_user() -> None:
    first = user("w" * 600, 1)
    msgs = [
        first,
        assistant(2, ("a", "x", {})),
        result("a", "x", "r", 3),
        user("b", 4),
        assistant(5, text="c"),
    ]
    total = sum(jsjson.length(m) for m in msgs)
    interrupted = sum(jsjson.length(m) for m in msgs[:3])
    assert metrics(msgs)["largestChainSharePct"] == js_round(100 * interrupted / total)


def test_frontier_gap_rules() -> None:
    r1 = result("a", "read", "1" * 40, 11)
    r2 = result("b", "read", "2" * 40, 12)
    r3 = result("a", "read", "3" * 40, 21)  # a later reuse of id "a"
    msgs = [
        user("q", 1),
        assistant(10, ("a", "read", {}), ("b", "read", {})),
        r1,
        r2,
        assistant(20, ("a", "read", {"path": "/x/skills/s/a.md"})),
        r3,
    ]
    everything = tokens(r1) + tokens(r2) + tokens(r3)
    assert metrics(msgs)["frontierGapTokens"] == everything
    anchored = normalize_frontier({"lastAttemptedToolCallId": "a", "lastAttemptedTurnIndex": 0})
    assert metrics(msgs, anchored)["frontierGapTokens"] == tokens(r2) + tokens(r3)
    missing = normalize_frontier({"lastAttemptedToolCallId": "zz", "lastAttemptedTurnIndex": 0})
    assert metrics(msgs, missing)["frontierGapTokens"] == everything
    summarized = frozenset({occ_key("b", 12)})
    assert metrics(msgs, anchored, summarized)["frontierGapTokens"] == tokens(r3)
    protect = protection_predicate(Config())  # **/skills/**/*.md, args from the pairing call
    assert metrics(msgs, anchored, protect=protect)["frontierGapTokens"] == tokens(r2)


def test_projection_of_custom_message_entries() -> None:
    branch = [
        {"type": "message", "id": "1", "message": user("a", 5)},
        {"type": "custom_message", "id": "2", "customType": "k", "content": "c", "display": False,
         "timestamp": "2025-01-01T00:00:00.000Z"},
        {"type": "custom", "id": "3", "customType": "x", "data": {}},
    ]  # fmt: skip
    projected = project_branch_messages(branch)
    assert projected[1] == {
        "role": "custom",
        "customType": "k",
        "content": "c",
        "display": False,
        "timestamp": 1735689600000,
    }
    assert len(projected) == 2


@pytest.mark.parametrize("vector", ["large-default", "large-protect-spill"])
def test_flush_metrics_entries_of_the_vectors(conformance_dir: Path, vector: str) -> None:
    """Every flush-metrics entry of a vector was computed at flush entry: the branch before
    the flush's own entries, with the state rebuilt from it."""
    root = conformance_dir / "replay" / vector
    settings = json.loads((root / "config.json").read_text())
    cfg = Config.from_settings_dict(settings, compat="reference")
    protect = protection_predicate(cfg)
    lines = read_gz(root / "session.jsonl.gz").decode("utf-8").splitlines()
    session = SessionFile.parse("\n".join(lines) + "\n")
    entries = session.entries
    calc = ContextMetrics()
    checked = 0
    for i, entry in enumerate(entries):
        if entry.get("customType") != "context-prune-flush-metrics":
            continue
        start = i
        while start > 0 and str(entries[start - 1].get("customType", "")).startswith(
            "context-prune-"
        ):
            if entries[start - 1].get("customType") == "context-prune-flush-metrics":
                break
            start -= 1
        prefix = entries[:start]
        state = PrunerState.from_branch(prefix)
        snap = calc.compute(calc.project(prefix), state.frontier, state.is_summarized, protect)
        assert snap == entry["data"]["metrics"], (i, entry["data"])
        checked += 1
    assert checked > 50


# ---------------------------------------------------------------------------- stats


def test_stats_accumulator_totals_delta_and_reclaim() -> None:
    stats = StatsAccumulator()
    stats.reset(
        {"totalInputTokens": 100, "totalOutputTokens": 10, "totalCost": 1.0, "callCount": 2,
         "chainsCompressed": 1, "rangesSummarized": 0}
    )  # fmt: skip
    assert stats.live_reclaim is None
    stats.add(Usage(input=7, output=3, cost=Cost(total=0.25)))
    stats.add_chains_compressed(2)
    stats.add_ranges_summarized(1)
    snap = stats.snapshot()
    assert list(snap) == [
        "totalInputTokens", "totalOutputTokens", "totalCost", "callCount",
        "chainsCompressed", "rangesSummarized",
    ]  # fmt: skip
    assert snap == {
        "totalInputTokens": 107,
        "totalOutputTokens": 13,
        "totalCost": 1.25,
        "callCount": 3,
        "chainsCompressed": 3,
        "rangesSummarized": 1,
    }
    assert stats.external_cost() == {
        "source": "pi-condense",
        "totalCost": 0.25,
        "inputTokens": 7,
        "outputTokens": 3,
    }
    stats.set_live_reclaim(400, 100)
    assert stats.live_reclaim == {"beforeChars": 400, "afterChars": 100}


# ---------------------------------------------------------------------------- diagnostics


def test_diagnostic_sink_dedups_counts_and_retries_failed_appends() -> None:
    written: list[tuple[str, Any]] = []
    fail = [True]

    def append(kind: str, data: Any) -> None:
        if fail[0]:
            fail[0] = False
            raise OSError("disk full")
        written.append((kind, data))

    sink = DiagnosticSink(append)
    assert not sink.report("orphan-sweep", "k1", "swept 1")  # failed: not marked seen
    assert sink.counts()["orphan-sweep"] == 0
    assert sink.report("orphan-sweep", "k1", "swept 1")
    assert not sink.report("orphan-sweep", "k1", "swept 1")
    assert sink.report("backfill-empty", "k1", "middles=2")
    assert written == [
        ("context-prune-diagnostic", {"kind": "orphan-sweep", "detail": "swept 1"}),
        ("context-prune-diagnostic", {"kind": "backfill-empty", "detail": "middles=2"}),
    ]
    counts = sink.counts()
    counts["orphan-sweep"] = 99
    assert sink.counts() == {
        "unresolved-range": 0,
        "range-id-mismatch": 0,
        "orphan-sweep": 1,
        "backfill-empty": 1,
    }
    sink.reset()
    assert sink.counts()["orphan-sweep"] == 0
    assert sink.report("orphan-sweep", "k1", "swept 1")


# ---------------------------------------------------------------------------- status text


def test_status_text_forms() -> None:
    on = config()
    diag = {"unresolved-range": 2, "range-id-mismatch": 0, "orphan-sweep": 1, "backfill-empty": 0}
    assert status_text(Config()) == "prune: OFF"
    assert status_text(on) == "prune: ON"
    assert status_text(on, {"beforeChars": 0, "afterChars": 0}) == "prune: ON"
    reclaim = {"beforeChars": 368000, "afterChars": 56000}
    assert status_text(on, reclaim) == "prune: ON \u00b7 92.0k->14.0k (-85%)"  # type: ignore[arg-type]
    grown = {"beforeChars": 400, "afterChars": 800}
    assert status_text(on, grown).endswith("(-0%)")  # type: ignore[arg-type]
    # 2.9.2 took the metrics suffix (think/gap/chain) off the status line.
    assert status_text(on, None, diag) == "prune: ON \u00b7 diag u2/o1"
    assert status_text(on, None, {"backfill-empty": 3}) == "prune: ON \u00b7 diag b3"


def test_frontier_gap_prices_an_image_at_1600_tokens() -> None:
    # Expected 1642: the pi-condense 2.11.3 reference's computeContextMetrics on this branch
    # (2.11.1 prices image blocks flat; 2.9.1 counted the base64 and gave 551).
    img = {"type": "image", "data": "QUJD" * 500, "mimeType": "image/png"}
    branch = [
        {"role": "user", "content": [{"type": "text", "text": "look"}], "timestamp": 1},
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.png"}}
            ],
            "timestamp": 2,
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [{"type": "text", "text": "Read image file [image/png]"}, img],
            "isError": False,
            "timestamp": 3,
        },
    ]
    assert metrics(branch)["frontierGapTokens"] == 1642


def test_timestamp_keys_are_equal_exactly_when_the_values_are_strictly_equal() -> None:
    # The metrics and the branch facts find messages by timestamp through dict keys: two
    # timestamps must share a key exactly when JavaScript's `===` holds between them.
    from pi_condense.branch_facts import _match_key
    from pi_condense.js.values import MISSING, strict_equal
    from pi_condense.metrics import _stamp_key

    nan = float("nan")
    listed: list[Any] = [1, 1.0, True, False, 0, 0.0, -0.0, "1", "", "true", None, MISSING]
    values = [*listed, nan, [1], {"a": 1}, 1735689600000, 1735689600000.0, "1735689600000"]
    for a in values:
        for b in values:
            same = strict_equal(a, b)
            # (a NaN object finds itself, as a dict finds any key by identity first)
            assert (_stamp_key(a) == _stamp_key(b)) is (same or a is b is nan), (a, b)
            if a is nan or b is nan:
                assert None in (_match_key(a), _match_key(b))  # NaN equals nothing
            else:
                assert (_match_key(a) == _match_key(b)) is same, (a, b)
