"""The live Condenser: event handling, delivery, triggers, rearm, diagnostics (spec 08)."""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from pathlib import Path
from typing import Any, Optional

import pytest

from pi_condense import replay as replay_module
from pi_condense.condenser import Condenser
from pi_condense.config import Config
from pi_condense.errors import CondenseWarning
from pi_condense.js import json as jsjson
from pi_condense.replay_log import counter_ids
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.summarize.conformance import ConformanceSummarizer
from pi_condense.tools import ContextTreeQuery
from pi_condense.triggers import ContextUsage
from support.agent import (
    Agent,
    Clock,
    ScriptedSummarizer,
    assistant,
    config,
    custom_entries,
    new_session,
    pruner_types,
    read_gz,
    result,
    user,
)

BIG = 1200


class Host:
    """Collects what a condenser shows the user."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []
        self.statuses: list[Optional[str]] = []
        self.events: list[tuple[str, Any]] = []
        self.usage: Optional[ContextUsage] = None


def make(
    cfg: Config,
    session: Optional[SessionFile] = None,
    clock: Optional[Clock] = None,
    summarizer: Any = "scripted",
) -> tuple[Agent, Host]:
    clock = clock or Clock()
    session = session if session is not None else new_session(clock=clock)
    host = Host()
    condenser = Condenser(
        session,
        cfg,
        summarizer=ScriptedSummarizer() if summarizer == "scripted" else summarizer,
        clock=clock,
        context_usage=lambda: host.usage,
        notify=lambda message, level: host.notes.append((message, level)),
        status=host.statuses.append,
        emit=lambda channel, payload: host.events.append((channel, payload)),
    )
    condenser.session_start()
    return Agent(session, condenser, clock), host


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def one_prompt(agent: Agent, *outputs: str, prompt: str = "go") -> Any:
    await agent.prompt(prompt)
    calls = [(f"{prompt}{i}", "read", {"path": f"f{i}"}, text) for i, text in enumerate(outputs)]
    await agent.tools(calls)
    return await agent.reply()


def summaries_in(messages: list[Any]) -> list[Any]:
    return [m for m in messages if m.get("customType") == "context-prune-summary"]


def stubbed(messages: list[Any], call_id: str) -> bool:
    return any(
        m.get("role") == "toolResult"
        and m.get("toolCallId") == call_id
        and "A" * 50 not in jsjson.dumps(m["content"])
        for m in messages
    )


# ---------------------------------------------------------------------------- delivery


def test_reference_delivery_keeps_summaries_out_of_the_live_context() -> None:
    agent, _ = make(config(compat="reference"))
    run(one_prompt(agent, "A" * BIG))
    live_messages = [m for m in agent.messages if m.get("role") != "custom"]  # the host's list
    live = agent.condenser.context(live_messages)
    assert live.pruned
    assert stubbed(live.messages, "go0")
    assert summaries_in(live.messages) == []
    # after a reload the host's list (rebuilt from the session) holds the summary
    reloaded, _ = make(config(compat="reference"), session=agent.session)
    cold = reloaded.condenser.context(list(agent.session.build_context().messages))
    assert len(summaries_in(cold.messages)) == 1


def test_default_delivery_shows_summaries_live_exactly_as_a_reload_does() -> None:
    agent, _ = make(config())
    run(one_prompt(agent, "A" * BIG))
    live_messages = [m for m in agent.messages if m.get("role") != "custom"]
    live_messages.append(user("next", agent.clock.tick()))
    live = agent.condenser.context(live_messages)
    assert len(summaries_in(live.messages)) == 1
    reloaded, _ = make(config(), session=agent.session)
    host_list = [*agent.session.build_context().messages, live_messages[-1]]
    cold = reloaded.condenser.context(host_list)
    assert jsjson.dumps(live.messages) == jsjson.dumps(cold.messages)
    # a list that already holds the summary is not given a second copy
    again = agent.condenser.context(host_list)
    assert len(summaries_in(again.messages)) == 1


# ---------------------------------------------------------------------------- turn index


def second_prompt_pending(compat: str) -> tuple[int, list[str]]:
    agent, host = make(config(compat=compat))

    async def scenario() -> None:
        await agent.prompt("first")
        await agent.tools([("a", "read", {}, "A" * BIG)])
        await agent.tools([("b", "read", {}, "B" * BIG)])
        await agent.reply()  # flush: the frontier holds global turn 1
        await agent.prompt("again")
        await agent.tools([("x", "read", {}, "X" * BIG)])  # per-prompt turn 0, global turn 3

    run(scenario())
    queued = [m for m, _ in host.notes if "queued" in m]
    return agent.condenser.pending_count, queued


@pytest.mark.parametrize("compat", ["default", "reference"])
def test_live_turn_index_is_branch_global(compat: str) -> None:
    # pi-condense 2.10.5 (#16) numbers live batches session-wide; 2.9.1 used the per-prompt
    # event index, so this batch (event index 0 < frontier index 1) was trimmed away.
    pending, queued = second_prompt_pending(compat)
    assert pending == 1
    assert len(queued) == 3


# ---------------------------------------------------------------------------- triggers


def test_budget_gate_flushes_at_turn_end() -> None:
    agent, host = make(config(autoBudgetThreshold=0.5, pruneOn="on-demand"))
    host.usage = ContextUsage(150_000, 200_000)

    async def scenario() -> Any:
        await agent.prompt("go")
        return await agent.tools([("a", "read", {}, "A" * BIG)])

    outcome = run(scenario())
    assert outcome.reason == "flushed"
    assert ("pruner: context budget reached \u2014 compacting 1 pending turn", "info") in host.notes
    metrics = custom_entries(agent.session, "context-prune-flush-metrics")[-1]["data"]
    assert metrics["trigger"] == "budget"
    assert (
        "cost:external",
        {"source": "pi-condense", "totalCost": 0.5, "inputTokens": 10, "outputTokens": 5},
    ) in host.events
    assert "\u2502 prune: summarizing\u2026" in host.statuses
    assert "\u2502 prune: 1 pending" in host.statuses


def test_delta_gate_needs_a_baseline() -> None:
    agent, host = make(config(budgetTurnDelta=0.2, pruneOn="on-demand"))

    async def scenario() -> list[Any]:
        await agent.prompt("go")
        host.usage = ContextUsage(20_000, 200_000)
        first = await agent.tools([("a", "read", {}, "A" * BIG)])
        host.usage = ContextUsage(70_000, 200_000)
        second = await agent.tools([("b", "read", {}, "B" * BIG)])
        return [first, second]

    first, second = run(scenario())
    assert first is None
    assert second.reason == "flushed"
    assert second.batch_count == 2
    assert (
        custom_entries(agent.session, "context-prune-flush-metrics")[-1]["data"]["trigger"]
        == "delta"
    )


def test_reload_rearm_flushes_recovered_work_once(tmp_path: Path) -> None:
    clock = Clock()
    session = new_session(tmp_path, clock)
    agent, _ = make(config(pruneOn="on-demand"), session, clock)
    run(one_prompt(agent, "A" * BIG))
    assert custom_entries(session, "context-prune-summary") == []

    reopened = SessionFile.load(session.path, clock=clock, id_source=counter_ids(100))  # type: ignore[arg-type]
    agent2, host = make(config(pruneOn="on-demand", autoBudgetThreshold=0.5), reopened, clock)
    assert agent2.condenser.rearmed
    agent2.condenser.agent_end()
    assert host.statuses[-1] == "\u2502 prune: recovered pending (reload)"
    host.usage = ContextUsage(180_000, 200_000)
    message = assistant(clock.tick(), text="still thinking")
    outcome = run(agent2.condenser.turn_end(message, [], 0))
    assert outcome.reason == "flushed"
    assert (
        "pruner: context budget reached \u2014 compacting work recovered after reload",
        "info",
    ) in host.notes
    assert (
        custom_entries(reopened, "context-prune-flush-metrics")[-1]["data"]["trigger"] == "rearmed"
    )
    assert not agent2.condenser.rearmed
    assert run(agent2.condenser.turn_end(message, [], 1)) is None


def test_disabled_condenser_does_nothing_and_says_so_once() -> None:
    agent, host = make(Config())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # a second warning would be recorded, not deduplicated
        run(one_prompt(agent, "A" * BIG))
        messages = list(agent.messages)
        rendered = agent.condenser.context(messages)
        run(one_prompt(agent, "B" * BIG))
    assert rendered.messages is messages
    assert not rendered.pruned
    assert pruner_types(agent.session) == []
    # Many events, one warning: to Python's warnings and to the host's UI.
    [warning] = [w for w in caught if issubclass(w.category, CondenseWarning)]
    assert "pruning is disabled (contextPrune.enabled is false)" in str(warning.message)
    assert "enabled: true" in str(warning.message)
    assert [n for n in host.notes if "pruning is disabled" in n[0]] == [
        (str(warning.message), "warning")
    ]


def test_without_a_summarizer_the_flush_fails_loudly() -> None:
    agent, host = make(config(), summarizer=None)
    assert run(one_prompt(agent, "A" * BIG)).reason == "summarizer-failed"
    assert ("pruner: summarization failed: no summarizer model configured", "error") in host.notes


# ---------------------------------------------------------------------------- diagnostics


def test_render_diagnostics_are_written_once_per_session() -> None:
    agent, host = make(config())
    orphan = [user("q", 1), result("ghost", "read", "lost", 2), assistant(3, text="a")]
    first = agent.condenser.context(list(orphan))
    assert first.pruned
    assert [m["role"] for m in first.messages] == ["user", "assistant"]
    agent.condenser.context(list(orphan))
    [entry] = custom_entries(agent.session, "context-prune-diagnostic")
    assert entry["data"]["kind"] == "orphan-sweep"
    assert "diag o1" in str(host.statuses[-1])
    agent.condenser.session_start()
    agent.condenser.context(list(orphan))
    assert len(custom_entries(agent.session, "context-prune-diagnostic")) == 2


# ---------------------------------------------------------------------------- spill


@pytest.mark.parametrize("compat", ["default", "reference"])
def test_turn_end_spills_huge_results(tmp_path: Path, compat: str) -> None:
    clock = Clock()
    session = new_session(tmp_path, clock)
    agent, _ = make(
        config(compat=compat, spillThreshold=2000, spillPreviewBytes=16), session, clock
    )
    big = "line\n" * 500

    async def scenario() -> None:
        await agent.prompt("go")
        await agent.tools([("a", "read", {}, big), ("b", "read", {}, "B" * BIG)])

    run(scenario())
    index, *refs = custom_entries(session, "context-prune-index")
    [rec] = index["data"]["toolCalls"]
    blob = tmp_path / "s1-blobs" / f"a_{rec['resultTimestamp']}.txt"
    assert rec["spillPath"] == str(blob)
    assert blob.read_text() == big
    assert rec["resultPreview"] == "line\nline\nline"
    assert agent.condenser.pending_count == 1  # only "b" is still queued
    rendered = agent.condenser.context(list(agent.messages))
    assert str(blob) in jsjson.dumps(rendered.messages)
    if compat == "reference":
        # the reference gives a spilled record no short ref: its stub names the bare id
        assert refs == []
        assert "ref `a`" in jsjson.dumps(rendered.messages)
    else:
        # ours: a ref of its own at once, in the entry shape the reference reads refs from
        ref = {"shortId": "t1", "toolCallId": "a", "resultTimestamp": rec["resultTimestamp"]}
        assert [e["data"] for e in refs] == [{"toolCalls": [], "backfilled": True, "refs": [ref]}]
        assert "ref `t1`" in jsjson.dumps(rendered.messages)
    # a host whose model cannot read local files: the stub names only the ref (ours), and
    # compat "reference" keeps the reference's stub, path and all
    agent.condenser.spill_paths = False
    stubbed = jsjson.dumps(agent.condenser.context(list(agent.messages)).messages)
    assert (str(blob) in stubbed) == (compat == "reference")
    assert ("read this file" in stubbed) == (compat == "reference")
    if compat != "reference":
        assert "Full output \u2014 use context_tree_query with ref `t1` (an answer" in stubbed


def test_spilled_records_written_without_a_ref_get_one_at_the_next_turn(tmp_path: Path) -> None:
    """A session whose spill has no short ref (written in compat "reference", or by an earlier
    version): in default mode the next turn gives it one, so its stub stops naming the bare
    id, which with reused ids stands for several outputs."""
    clock = Clock()
    session = new_session(tmp_path, clock)
    old, _ = make(config(compat="reference", spillThreshold=2000), session, clock)
    big = "line\n" * 500

    async def spill(agent: Agent, n: int) -> None:
        await agent.prompt(f"go {n}")
        await agent.tools([("a", "read", {"n": n}, big + str(n))])
        await agent.reply()

    run(spill(old, 1))
    assert "ref `a`" in jsjson.dumps(old.condenser.context(list(old.messages)).messages)
    path = session.path
    assert path is not None
    reopened = SessionFile.load(path, clock=clock)
    agent, _ = make(config(spillThreshold=2000), reopened, clock)
    agent.condenser.session_start()
    run(spill(agent, 2))  # the same id again, a second spill
    rendered = jsjson.dumps(agent.condenser.context(list(agent.messages)).messages)
    assert "ref `a`" not in rendered
    refs = re.findall(r"ref `(t\d+)`", rendered)
    assert len(refs) == 2
    assert len(set(refs)) == 2
    state = PrunerState.from_session(SessionFile.load(path))
    answers = [ContextTreeQuery(state, str(tmp_path), "s1").query([r]).text for r in refs]
    assert [big + "1" in answers[0], big + "2" in answers[1]] == [True, True]
    assert big + "2" not in answers[0]


def test_in_memory_sessions_do_not_spill_by_default() -> None:
    agent, _ = make(config(spillThreshold=100))
    run(one_prompt(agent, "A" * BIG))
    indexes = custom_entries(agent.session, "context-prune-index")
    assert all("spillPath" not in r for e in indexes for r in e["data"]["toolCalls"])


# ---------------------------------------------------------------------------- open, render, compact


def test_open_and_render_other_leaves(tmp_path: Path) -> None:
    clock = Clock()
    session = new_session(tmp_path, clock)
    agent, _ = make(config(), session, clock)
    run(one_prompt(agent, "A" * BIG))
    branch_point = agent.session.entries[1]["id"]  # the first assistant
    opened = Condenser.open(session.path, config(), clock=clock)  # type: ignore[arg-type]
    opened.session_start()
    current = opened.render()
    assert current.pruned
    assert len(summaries_in(current.messages)) == 1
    earlier = opened.render(branch_point)
    assert not earlier.pruned
    assert summaries_in(earlier.messages) == []
    assert custom_entries(opened.session, "context-prune-diagnostic") == []


def test_compact_compresses_closed_chains_and_writes_stats() -> None:
    agent, _ = make(config(pruneOn="on-demand"))

    async def scenario() -> Any:
        await one_prompt(agent, "A" * BIG, prompt="p1")
        await one_prompt(agent, "B" * BIG, prompt="p2")
        await agent.condenser.flush_now()
        return await agent.condenser.compact()

    result_ = run(scenario())
    assert result_.compressed == 2
    assert pruner_types(agent.session)[-3:] == ["chain", "chain", "stats"]
    assert agent.condenser.stats["chainsCompressed"] == 2


# ---------------------------------------------------------------------------- vectors


def test_user_visible_output_matches_the_vector(
    conformance_dir: Path, fixtures_dir: Path, tmp_path: Path
) -> None:
    """Status line, notifications and cost events of a replay's first 400 source entries are
    the reference's, in order (`ui.jsonl`; the boot widget aside)."""
    root = conformance_dir / "replay" / "large-default"  # no spills: no paths in sizes
    settings = json.loads((root / "config.json").read_text())
    cfg = Config.from_settings_dict(settings, compat="reference")
    source = SessionFile.load(fixtures_dir / "large-session.jsonl")
    leaf = source.branch()[400]["id"]
    shown: list[tuple[Any, ...]] = []

    def condenser_for(self: Any) -> Condenser:
        return Condenser(
            self.session,
            self.config,
            summarizer=self.summarizer,
            session_model=self.summarizer,
            clock=self.clock,
            context_usage=self._context_usage,
            notify=lambda message, level: shown.append(("notify", message, level)),
            status=lambda text: shown.append(("setStatus", text)),
            emit=lambda channel, payload: shown.append(("emit", channel, jsjson.dumps(payload))),
        )

    original = replay_module._Replayer._new_condenser
    replay_module._Replayer._new_condenser = condenser_for  # type: ignore[method-assign]
    try:
        options = replay_module.ReplayOptions(
            session_dir=str(tmp_path), leaf=leaf, record_contexts=False
        )
        replay_module.replay(source, cfg, ConformanceSummarizer(), options)
    finally:
        replay_module._Replayer._new_condenser = original  # type: ignore[method-assign]
    want: list[tuple[Any, ...]] = []
    for line in read_gz(root / "ui.jsonl.gz").decode("utf-8").splitlines():
        item = json.loads(line)
        if item["kind"] == "setStatus":
            want.append(("setStatus", item.get("text")))
        elif item["kind"] == "notify":
            want.append(("notify", item["message"], item["type"]))
        elif item["kind"] == "events.emit":
            want.append(("emit", item["channel"], jsjson.dumps(item["payload"])))
    assert len(shown) > 300
    assert shown == want[: len(shown)]
    assert any(kind == "notify" and "compressed" in str(rest) for kind, *rest in shown)


def test_unsafe_session_ids_do_not_spill_by_default(tmp_path: Path) -> None:
    clock = Clock()
    session = SessionFile.create(
        tmp_path / "x.jsonl", "/w", session_id="../up", clock=clock, id_source=counter_ids()
    )
    agent, _ = make(config(spillThreshold=100), session, clock)
    run(one_prompt(agent, "A" * BIG))
    assert not (tmp_path.parent / "up-blobs").exists()
    records = [
        r for e in custom_entries(session, "context-prune-index") for r in e["data"]["toolCalls"]
    ]
    assert records
    assert all("spillPath" not in r for r in records)


def test_session_start_loads_the_settings_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "settings.json").write_text(
        json.dumps({"contextPrune": {"enabled": True, "minBatchChars": 7}})
    )
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    condenser = Condenser(new_session())
    assert not condenser.config.enabled  # nothing loaded before session_start
    condenser.session_start()
    assert condenser.config.enabled
    assert condenser.config.min_batch_chars == 7


def test_session_tree_rebuilds_the_state_of_the_new_branch() -> None:
    agent, _ = make(config())
    run(one_prompt(agent, "A" * BIG))
    assert agent.condenser.state.get_record("go0") is not None
    first_user = agent.session.entries[0]["id"]
    agent.session.set_leaf(first_user)
    agent.condenser.session_tree()
    assert agent.condenser.state.get_record("go0") is None
    assert agent.condenser.state.frontier is None


def test_flush_now_summarizes_nothing_while_pruning_is_disabled() -> None:
    agent, _ = make(config(pruneOn="on-demand"))
    run(one_prompt(agent, "A" * BIG))  # a raw call waits for a flush
    before = pruner_types(agent.session)
    summarizer = ScriptedSummarizer()
    off, host = make(config(enabled=False), session=agent.session, summarizer=summarizer)
    with pytest.warns(CondenseWarning, match="pruning is disabled"):
        result_ = run(off.condenser.flush_now())
    assert (result_.ok, result_.reason) == (False, "disabled")
    assert summarizer.prompts == []
    assert pruner_types(agent.session) == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: a second call is quiet
        assert run(off.condenser.flush_now()).reason == "disabled"
    assert [level for _, level in host.notes] == ["warning"]


@pytest.mark.parametrize(("threshold", "flushes"), [(None, False), (200, True), (10**6, False)])
def test_frontier_gap_gate_flushes_at_turn_end(threshold: Optional[int], flushes: bool) -> None:
    # pi-condense 2.10.0: opt-in, fires once the unsummarized tail reaches the token count
    # (a 1200-char result is about 300 tokens), with trigger "frontier-gap".
    agent, host = make(config(frontierGapThresholdTokens=threshold, pruneOn="on-demand"))

    async def scenario() -> Any:
        await agent.prompt("go")
        return await agent.tools([("a", "read", {}, "A" * BIG)])

    outcome = run(scenario())
    assert (outcome is not None and outcome.reason == "flushed") == flushes
    notice = (
        "pruner: un-pruned tail exceeded frontier gap threshold \u2014 compacting 1 pending turn"
    )
    assert ((notice, "info") in host.notes) == flushes
    triggers = [
        e["data"]["trigger"] for e in custom_entries(agent.session, "context-prune-flush-metrics")
    ]
    assert triggers == (["frontier-gap"] if flushes else [])
