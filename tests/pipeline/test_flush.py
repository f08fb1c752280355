"""The flush pipeline (spec 05 sections 6-10, spec 02 section 9)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from pi_condense.condenser import Condenser
from pi_condense.config import Config
from pi_condense.flush import FlushOptions, FlushResult, flush_pending
from pi_condense.js import json as jsjson
from pi_condense.keys import occ_key
from pi_condense.session import SessionFile
from pi_condense.summarize.labels import refs_footer
from support.agent import (
    Agent,
    Clock,
    ScriptedSummarizer,
    config,
    custom_entries,
    label_bullets,
    new_session,
    pruner_types,
)

BIG = 1200


def setup(
    cfg: Config, answer: Optional[Callable[[str], Optional[str]]] = None, tmp: Optional[Path] = None
) -> tuple[Agent, ScriptedSummarizer, list[tuple[str, str]]]:
    clock = Clock()
    session = new_session(tmp, clock)
    summarizer = ScriptedSummarizer(answer)
    notes: list[tuple[str, str]] = []
    condenser = Condenser(
        session,
        cfg,
        summarizer=summarizer,
        clock=clock,
        notify=lambda message, level: notes.append((message, level)),
    )
    condenser.session_start()
    return Agent(session, condenser, clock), summarizer, notes


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def data(session: SessionFile, kind: str) -> list[Any]:
    return [
        e.get("data", e.get("content")) for e in custom_entries(session, f"context-prune-{kind}")
    ]


# ---------------------------------------------------------------------------- happy path


@pytest.mark.parametrize("compat", ["reference", "default"])
def test_summarized_batch_entries_in_the_reference_order(compat: str) -> None:
    agent, summarizer, notes = setup(config(compat=compat))

    async def scenario() -> Any:
        await agent.prompt("go")
        await agent.tools([("a", "read", {"path": "x"}, "A" * BIG), ("b", "bash", {}, "B" * BIG)])
        return await agent.reply()

    outcome: FlushResult = run(scenario())
    session = agent.session
    assert pruner_types(session) == ["summary", "index", "frontier", "stats", "flush-metrics"]
    # every entry of the message_end flush precedes the final assistant message
    assert session.entries[-1]["message"]["content"][0]["text"] == "done"
    [summary] = custom_entries(session, "context-prune-summary")
    assert summary["type"] == "custom_message"
    assert summary["display"] is False
    assert summary["content"] == "- `t1` done\n- `t2` done" + refs_footer(
        [{"shortId": "t1"}, {"shortId": "t2"}]
    )
    a_ts, b_ts = (m["timestamp"] for m in agent.messages if m.get("role") == "toolResult")
    assert summary["details"] == {
        "toolCallRefs": [
            {"shortId": "t1", "toolCallId": "a", "resultTimestamp": a_ts},
            {"shortId": "t2", "toolCallId": "b", "resultTimestamp": b_ts},
        ],
        "toolNames": ["read", "bash"],
        "turnIndex": 0,
        "timestamp": summary["details"]["timestamp"],
    }
    [index] = data(session, "index")
    assert [r["toolCallId"] for r in index["toolCalls"]] == ["a", "b"]
    assert list(index["toolCalls"][0]) == [
        "toolCallId", "toolName", "args", "resultText", "isError", "turnIndex", "timestamp",
        "resultTimestamp",
    ]  # fmt: skip
    [frontier] = data(session, "frontier")
    assert frontier == {
        "lastAttemptedToolCallId": "b",
        "lastAttemptedToolName": "bash",
        "lastAttemptedTurnIndex": 0,
        "lastAttemptedTimestamp": summary["details"]["timestamp"],
        "attemptedBatchCount": 1,
        "attemptedToolCallCount": 2,
        "rawCharCount": 2 * BIG,
        "summaryCharCount": jsjson.utf16_len(summary["content"]),
        "outcome": "summarized",
    }
    [stats] = data(session, "stats")
    assert stats == {
        "totalInputTokens": 10,
        "totalOutputTokens": 5,
        "totalCost": 0.5,
        "callCount": 1,
        "chainsCompressed": 0,
        "rangesSummarized": 0,
    }
    [metrics] = data(session, "flush-metrics")
    assert list(metrics) == [
        "ts",
        "trigger",
        "capturedBatches",
        "processedBatches",
        "stubCount",
        "outcome",
        "metrics",
    ]
    assert metrics["stubCount"] == 2  # 2.10.5: the calls this flush stubbed
    assert (metrics["trigger"], metrics["capturedBatches"], metrics["processedBatches"]) == (
        "message-end",
        1,
        1,
    )
    assert metrics["outcome"] == "summarized"
    assert outcome == FlushResult(True, "flushed", 1, 2, 2 * BIG, frontier["summaryCharCount"], 0)
    assert len(summarizer.prompts) == 1
    assert (
        "pruner: 1 turn queued \u2014 will summarize on agent's next text response",
        "info",
    ) in notes


def test_empty_flush_writes_one_metrics_entry() -> None:
    agent, summarizer, _ = setup(config())

    async def scenario() -> Any:
        await agent.prompt("hi")
        return await agent.reply("hello")

    assert run(scenario()) == FlushResult(False, "empty")
    [metrics] = data(agent.session, "flush-metrics")
    assert (metrics["capturedBatches"], metrics["processedBatches"], metrics["outcome"]) == (
        0,
        0,
        "empty",
    )
    assert summarizer.prompts == []


def test_already_flushing_returns_at_once_without_an_entry() -> None:
    agent, _, _ = setup(config())
    runtime = agent.condenser.runtime
    runtime.flushing = True
    assert run(flush_pending(runtime, FlushOptions())) == FlushResult(False, "already-flushing")
    assert pruner_types(agent.session) == []


# ---------------------------------------------------------------------------- skips


def test_trivial_batch_makes_no_llm_call_and_advances_the_frontier() -> None:
    agent, summarizer, notes = setup(config())

    async def scenario() -> Any:
        await agent.prompt("go")
        await agent.tools([("a", "read", {}, "tiny")])
        return await agent.reply()

    outcome = run(scenario())
    assert outcome.reason == "skipped-trivial"
    assert summarizer.prompts == []
    assert pruner_types(agent.session) == ["frontier", "stats", "flush-metrics"]
    assert data(agent.session, "frontier")[0]["outcome"] == "skipped-trivial"
    assert (
        "pruner: skipped pruning turn 0 (1 tool call) \u2014 only 4 raw chars "
        "(< minBatchChars=1000); no LLM call made; frontier advanced past this range",
        "info",
    ) in notes
    assert agent.condenser.capture_pending() == []  # the frontier trims it from now on


def test_oversized_summary_is_dropped_but_burns_its_refs() -> None:
    long_text = "x" * (BIG + 500)
    answers = iter([long_text, None])
    agent, _summarizer, notes = setup(
        config(), lambda prompt: next(answers) or label_bullets(prompt)
    )

    async def scenario() -> Any:
        await agent.prompt("go")
        await agent.tools([("a", "read", {}, "A" * BIG)])
        first = await agent.reply()
        await agent.prompt("more")
        await agent.tools([("b", "read", {}, "B" * BIG)])
        return first, await agent.reply()

    first, second = run(scenario())
    assert first.reason == "skipped-oversized"
    assert (
        f"pruner: skipped pruning turn 0 (1 tool call) \u2014 summary was {len(long_text)} chars "
        f"vs {BIG} raw chars; frontier advanced past this range",
        "info",
    ) in notes
    assert second.reason == "flushed"
    [summary] = custom_entries(agent.session, "context-prune-summary")
    assert summary["details"]["toolCallRefs"][0]["shortId"] == "t2"  # t1 was burned
    frontiers = data(agent.session, "frontier")
    assert [f["outcome"] for f in frontiers] == ["skipped-oversized", "summarized"]
    assert data(agent.session, "stats")[0]["callCount"] == 1  # oversized usage still counts


def test_dedup_alias_entries_come_first_and_fully_deduped_batches_skip() -> None:
    agent, _summarizer, notes = setup(config())
    same = "S" * BIG

    async def scenario() -> Any:
        await agent.prompt("one")
        await agent.tools([("a", "bash", {}, same)])
        await agent.reply()
        await agent.prompt("two")
        await agent.tools([("b", "bash", {}, same + "  \n")])  # normalizes to the same hash
        await agent.tools([("c", "bash", {}, same), ("d", "read", {}, "D" * BIG)])
        return await agent.reply()

    outcome = run(scenario())
    types = pruner_types(agent.session)
    second = types[types.index("flush-metrics") + 1 :]
    assert second == [
        "dedup-alias", "dedup-alias", "summary", "index", "frontier", "stats", "flush-metrics",
    ]  # fmt: skip
    aliases = data(agent.session, "dedup-alias")
    a_ts = agent.condenser.state.get_record("a")["resultTimestamp"]  # type: ignore[index]
    assert [
        (x["newToolCallId"], x["originalToolCallId"], x["originalResultTimestamp"]) for x in aliases
    ] == [
        ("b", "a", a_ts),
        ("c", "a", a_ts),
    ]
    assert outcome.reason == "flushed"
    assert outcome.deduped_count == 2
    [index] = data(agent.session, "index")[1:]
    assert [r["toolCallId"] for r in index["toolCalls"]] == ["d"]
    assert (
        f"pruner: deduplicated 1 tool call (turn 2, {BIG + 3} raw chars) against earlier prunes; "
        "no LLM call made; frontier advanced past this range",
        "info",
    ) in notes
    assert data(agent.session, "frontier")[-1]["attemptedToolCallCount"] == 3
    assert agent.condenser.state.short_ref(occ_key("b", aliases[0]["newResultTimestamp"])) == "t1"


def test_partial_dedup_notice() -> None:
    agent, _, notes = setup(config())
    same = "S" * BIG

    async def scenario() -> Any:
        await agent.prompt("one")
        await agent.tools([("a", "bash", {}, same)])
        await agent.reply()
        await agent.prompt("two")
        await agent.tools([("c", "bash", {}, same), ("d", "read", {}, "D" * BIG)])
        return await agent.reply()

    run(scenario())
    assert (
        "pruner: deduplicated 1 tool call against earlier prunes (no LLM call for those); "
        "remaining tool calls were summarized normally.",
        "info",
    ) in notes


# ---------------------------------------------------------------------------- failures


def test_failure_stops_the_loop_and_restores_later_batches() -> None:
    def answer(prompt: str) -> Optional[str]:
        return None if "[[1:second]]" in prompt else label_bullets(prompt)

    agent, summarizer, notes = setup(config(), answer)

    async def scenario() -> Any:
        await agent.prompt("go")
        await agent.tools([("a", "first", {}, "A" * BIG)])
        await agent.tools([("b", "second", {}, "B" * BIG)])
        await agent.tools([("c", "third", {}, "C" * BIG)])
        return await agent.reply()

    outcome = run(scenario())
    assert len(summarizer.prompts) == 3  # every call was made before the loop stopped
    assert outcome.reason == "flushed"
    assert outcome.batch_count == 1
    [summary] = custom_entries(agent.session, "context-prune-summary")
    assert summary["details"]["toolNames"] == ["first"]
    assert data(agent.session, "stats")[0]["callCount"] == 1  # the third result is discarded
    assert data(agent.session, "frontier")[0]["lastAttemptedToolCallId"] == "a"
    assert [b.tool_calls[0]["toolCallId"] for b in agent.condenser.runtime.pending] == ["b", "c"]
    assert ("pruner: summarization failed: scripted failure", "error") in notes


def test_all_failures_report_summarizer_failed() -> None:
    agent, _, _ = setup(config(), lambda prompt: None)

    async def scenario() -> Any:
        await agent.prompt("go")
        await agent.tools([("a", "x", {}, "A" * BIG)])
        return await agent.reply()

    assert run(scenario()) == FlushResult(False, "summarizer-failed")
    assert pruner_types(agent.session) == ["flush-metrics"]
    assert data(agent.session, "flush-metrics")[0]["outcome"] == "error"


# ---------------------------------------------------------------------------- modes


def test_agent_message_batching_merges_the_turns_of_one_prompt() -> None:
    agent, summarizer, _ = setup(config(batchingMode="agent-message"))

    async def scenario() -> Any:
        await agent.prompt("go")
        await agent.tools([("a", "read", {}, "A" * BIG)], text="first")
        await agent.tools([("b", "read", {}, "B" * BIG)], text="second")
        return await agent.reply()

    outcome = run(scenario())
    assert outcome.batch_count == 1
    assert len(summarizer.prompts) == 1
    assert "Assistant said: first\n\nsecond\n" in summarizer.prompts[0]
    [summary] = custom_entries(agent.session, "context-prune-summary")
    assert summary["details"]["turnIndex"] == 1
    assert [r["shortId"] for r in summary["details"]["toolCallRefs"]] == ["t1", "t2"]


def test_flush_now_summarizes_sequentially_with_progress() -> None:
    agent, _summarizer, _ = setup(config(pruneOn="on-demand"))
    events: list[tuple[int, int, str]] = []

    async def scenario() -> Any:
        await agent.prompt("go")
        await agent.tools([("a", "read", {}, "A" * BIG)])
        await agent.tools([("b", "read", {}, "tiny")])
        await agent.reply()
        return await agent.condenser.flush_now(
            on_progress=lambda i, n, b, s: events.append((i, n, s))
        )

    outcome = run(scenario())
    assert events == [(0, 2, "start"), (0, 2, "done"), (1, 2, "skipped")]
    assert outcome.reason == "flushed"
    assert outcome.batch_count == 2
    assert data(agent.session, "flush-metrics")[0]["trigger"] == "manual"


# ---------------------------------------------------------------------------- crash safety


class Crash(Exception):
    pass


def crash_after(session: SessionFile, n: int) -> Callable[[], int]:
    """Make the n-th pruner append (1-based, counted from now) raise after it was written."""
    count = [0]
    originals = (session.append_custom, session.append_custom_message)

    def wrap(original: Callable[..., str]) -> Callable[..., str]:
        def appended(*args: Any, **kwargs: Any) -> str:
            entry_id = original(*args, **kwargs)
            count[0] += 1
            if count[0] == n:
                raise Crash(f"injected crash after append {n}")
            return entry_id

        return appended

    session.append_custom = wrap(originals[0])  # type: ignore[method-assign]
    session.append_custom_message = wrap(originals[1])  # type: ignore[method-assign]
    return lambda: count[0]


def covered_keys(session: SessionFile) -> tuple[Counter[str], Counter[str], Counter[str]]:
    summaries: Counter[str] = Counter()
    for entry in custom_entries(session, "context-prune-summary"):
        for ref in entry["details"]["toolCallRefs"]:
            summaries[occ_key(ref["toolCallId"], ref.get("resultTimestamp"))] += 1
    records: Counter[str] = Counter()
    for index in data(session, "index"):
        for rec in index["toolCalls"]:
            records[occ_key(rec["toolCallId"], rec.get("resultTimestamp"))] += 1
    aliases: Counter[str] = Counter(
        occ_key(a["newToolCallId"], a.get("newResultTimestamp"))
        for a in data(session, "dedup-alias")
    )
    return summaries, records, aliases


async def crash_scenario(agent: Agent, crash_at: int) -> int:
    same = "S" * BIG
    await agent.prompt("one")
    await agent.tools([("a", "bash", {}, same)])
    await agent.reply()  # first flush: summary, index, frontier, stats, metrics
    await agent.prompt("two")
    await agent.tools([("b", "bash", {}, same), ("c", "read", {}, "C" * BIG)])
    await agent.tools([("d", "read", {}, "D" * BIG)])
    appends = crash_after(agent.session, crash_at)
    await agent.reply()  # alias, summary, index, summary, index, frontier, stats, metrics
    return appends()


@pytest.mark.parametrize("reload", [False, True], ids=["same-process", "reloaded"])
@pytest.mark.parametrize("crash_at", range(1, 9))
def test_a_crash_after_any_append_converges_without_duplicates(
    tmp_path: Path, crash_at: int, reload: bool
) -> None:
    cfg = config(minBatchChars=0)
    agent, _, _ = setup(cfg, tmp=tmp_path)
    assert run(crash_scenario(agent, crash_at)) >= crash_at  # the crash did happen
    path = agent.session.path
    assert path is not None
    condenser = agent.condenser
    session = agent.session
    if reload:
        # A new process: the file loads and renders, then the next flush converges.
        session = SessionFile.load(path)
        condenser = Condenser(session, cfg, summarizer=ScriptedSummarizer())
        condenser.session_start()
        assert condenser.render().messages
    run(condenser.flush_now())
    expected = {
        occ_key(m["toolCallId"], m["timestamp"])
        for m in session.build_context().messages
        if m.get("role") == "toolResult"
    }
    summaries, records, aliases = covered_keys(session)
    assert max(summaries.values()) == 1
    assert max(records.values()) == 1
    assert max(aliases.values()) == 1
    assert set(records) | set(aliases) == expected
    assert set(summaries) == set(records)
    assert not set(aliases) & set(records)
    # a further flush finds nothing to do
    assert run(condenser.flush_now()).reason == "empty"
