"""What the pipeline keeps incrementally equals what a full scan computes (issue 18).

The branch path (``SessionFile.branch_path``), the branch facts (turn indices, the last
anchor, the compaction usage check, the rescan from the frontier's turn, the context
metrics) and the live-summary placer are each checked against the from-scratch computation:
a freshly loaded session's walk, the full-branch functions of ``capture`` / ``metrics`` /
``runtime``, a new placer.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import pytest

from pi_condense.branch_facts import BranchFacts, branch_facts
from pi_condense.capture import (
    _less,
    branch_turn_index,
    first_pending_turn,
    group_batches,
    protection_predicate,
    rescan_branch,
    rescan_turns,
    trim_batch,
)
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.live_state import LiveSummary, LiveSummaryPlacer, last_message_anchor
from pi_condense.metrics import ContextMetrics, project_branch_messages, project_custom_message
from pi_condense.replay import ReplayOptions, replay
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.summarize.factory import make_summarizer

EXAMPLE = Path(__file__).resolve().parents[2] / "python/pi_condense/examples/example-session.jsonl"


def _text(session: SessionFile) -> str:
    return "".join(jsjson.dumps(row) + "\n" for row in [session.header, *session.entries])


def _ids(entries: Any) -> list[Any]:
    return [e.get("id") for e in entries]


def _message(role: str, stamp: int, text: str = "x") -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}], "timestamp": stamp}


def test_branch_path_grows_in_place_and_starts_over_when_the_leaf_moves() -> None:
    session = SessionFile.in_memory("/w", session_id="s1")
    first = session.append_message(_message("user", 1))
    epoch, path = session.branch_path()
    for n in range(2, 6):
        session.append_message(_message("assistant" if n % 2 else "user", n))
        session.append_custom("note", {"n": n})  # several entries between two looks
        again, grown = session.branch_path()
        assert again == epoch
        assert grown is path
    assert _ids(path) == _ids(session.entries)
    session.set_leaf(first)
    moved, short = session.branch_path()
    assert moved != epoch
    assert _ids(short) == [first]
    session.branch_with_summary(first, "went back")
    session.append_message(_message("user", 9))
    fresh = SessionFile.parse(_text(session))
    fresh.set_leaf(session.leaf_id)
    assert _ids(session.branch()) == _ids(fresh.branch())
    assert session.branch() is not session.branch_path()[1]  # branch() hands out copies


def test_branch_path_follows_entries_another_writer_adds(tmp_path: Path) -> None:
    # The root names a parent that is not in the file yet; a later line supplies it, and an
    # entry reusing an id on the branch changes how that id resolves: both redo the walk.
    lines = [
        {"type": "session", "version": 3, "id": "s2", "timestamp": "2025-01-01T00:00:00Z"},
        {"type": "message", "id": "a", "parentId": "zz", "timestamp": "2025-01-01T00:00:01Z"},
        {"type": "message", "id": "b", "parentId": "a", "timestamp": "2025-01-01T00:00:02Z"},
    ]
    for line, n in zip(lines[1:], (1, 2), strict=False):
        line["message"] = _message("user", n)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(jsjson.dumps(x) + "\n" for x in lines), encoding="utf-8")
    session = SessionFile.load(path)
    assert _ids(session.branch()) == ["a", "b"]
    extra = [
        {"type": "message", "id": "zz", "parentId": None, "timestamp": "2025-01-01T00:00:03Z"},
        {"type": "message", "id": "c", "parentId": "b", "timestamp": "2025-01-01T00:00:04Z"},
    ]
    for line, n in zip(extra, (3, 4), strict=False):
        line["message"] = _message("user", n)
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(jsjson.dumps(x) + "\n" for x in extra))
    session.refresh()
    session.set_leaf("c")
    assert _ids(session.branch()) == ["zz", "a", "b", "c"]
    dup = {"type": "message", "id": "a", "parentId": None, "timestamp": "2025-01-01T00:00:05Z"}
    dup["message"] = _message("user", 5)
    with open(path, "a", encoding="utf-8") as f:
        f.write(jsjson.dumps(dup) + "\n")
    session.refresh()
    session.set_leaf("c")
    fresh = SessionFile.load(path)
    fresh.set_leaf("c")
    assert _ids(session.branch()) == _ids(fresh.branch()) == ["a", "b", "c"]


@pytest.fixture(scope="module")
def condensed() -> SessionFile:
    """The bundled example session condensed (summaries, chains, frontier on its branch)."""
    config = Config.from_settings_dict({"enabled": True})
    source = SessionFile.load(EXAMPLE)
    result = replay(source, config, make_summarizer("default", config=config), ReplayOptions())
    assert result.counts["llmCalls"] == 453
    return result.session


def test_branch_facts_equal_the_full_scans(condensed: SessionFile) -> None:
    session = SessionFile.parse(_text(condensed))
    entries = session.entries
    facts = BranchFacts(session)
    config = Config()
    protected = protection_predicate(config)
    checkpoints = [*range(0, len(entries), 37), len(entries) - 1, 300, 301, 1200]
    for at in checkpoints:  # forward along the branch, then back (a new epoch)
        session.set_leaf(entries[at]["id"])
        facts.update()
        branch = session.branch()
        state = PrunerState.from_session(session)
        assistants = [
            e["message"]
            for e in branch
            if e.get("type") == "message"
            and isinstance(e.get("message"), dict)
            and e["message"].get("role") == "assistant"
        ]
        for message in assistants[-3:]:
            assert facts.turn_index(message) == branch_turn_index(branch, message)
        assert facts.turn_index(_message("assistant", -5)) == len(assistants)
        assert facts.last_anchor == last_message_anchor(branch)
        full = ContextMetrics().compute(
            project_branch_messages(branch), state.frontier, state.is_summarized, protected
        )
        index = state.index
        version = (index.record_count, index.alias_count)
        for _ in range(2):  # the second snapshot reuses the first's gap
            kept = facts.metrics.snapshot(
                state.frontier, state.is_summarized, protected, owner=state, version=version
            )
            assert kept == full
        now = lambda: 0  # noqa: E731
        expected = [
            t
            for t in (trim_batch(b, state) for b in rescan_branch(branch, state, protected, now))
            if t
        ]
        first = first_pending_turn(state.frontier, len(facts.assistants))
        got = rescan_turns(
            facts.message_entries,
            facts.messages,
            facts.assistants,
            facts.user_groups,
            first,
            state,
            protected,
            now,
        )
        trimmed = [t for t in (trim_batch(b, state) for b in got) if t]
        assert group_batches(trimmed, "agent-message") == group_batches(expected, "agent-message")
        # What chain compression scans: the truthy messages and, since pi-condense 2.10.0
        # (custom messages can open a chain), the projected custom_message entries.
        assert facts.chain_messages() == [
            project_custom_message(e) if e.get("type") == "custom_message" else e["message"]
            for e in branch
            if e.get("type") == "custom_message"
            or (e.get("type") == "message" and e.get("message"))
        ]


def _summary(n: int, anchor: Any) -> LiveSummary:
    refs = [f"t{n}"]
    message = {
        "role": "custom",
        "customType": "context-prune-summary",
        "content": f"summary {n}",
        "details": {"toolCallRefs": refs},
        "timestamp": 1000 + n,
    }
    return LiveSummary(anchor, message, jsjson.dumps(refs))


def test_a_session_whose_facts_were_asked_for_is_freed(condensed: SessionFile) -> None:
    # The shared table of facts must not keep its sessions alive: a corpus run condenses
    # thousands of sessions in one worker (each held its entries for the worker's life).
    session = SessionFile.parse(_text(condensed))
    gone = weakref.ref(session)
    assert branch_facts(session).messages
    del session
    # No cycle is involved: reference counting alone frees the session.
    assert gone() is None


def test_the_kept_placer_places_as_a_new_one() -> None:
    placer = LiveSummaryPlacer()
    messages: list[Any] = []
    live: list[LiveSummary] = []

    def check() -> None:
        assert placer.place(messages, live) == LiveSummaryPlacer().place(list(messages), live)

    for n in range(40):
        role = ("user", "assistant", "toolResult")[n % 3]
        stamp = n // 2  # pairs share a (role, timestamp) now and then
        messages.append(_message(role, stamp))
        if n % 5 == 0:
            live.append(_summary(n, (role, stamp)))  # anchored at the newest message
        if n % 7 == 0:
            live.append(_summary(100 + n, ("user", 10**6)))  # anchor not in the list (yet)
        if n == 12:
            live.append(_summary(200, None))  # before everything
        if n == 20:
            messages.append(_message("user", 10**6))  # that anchor arrives
        if n == 25:
            messages.append(dict(live[1].message))  # a summary the host holds now
        if n == 30:
            messages.append(_message("toolResult", 2))  # an anchor's last match moves
        check()
    live.clear()
    check()
    live.append(_summary(300, ("user", 0)))
    messages = [dict(m) for m in messages]  # a new list of new objects
    check()


def test_the_kept_placer_follows_messages_replaced_in_the_list() -> None:
    placer = LiveSummaryPlacer()
    messages: list[Any] = [_message(("user", "assistant")[n % 2], n) for n in range(12)]
    live = [_summary(1, ("assistant", 3)), _summary(2, ("user", 8)), _summary(3, ("user", 0))]

    def check() -> list[Any]:
        got = placer.place(list(messages), live)
        assert got == LiveSummaryPlacer().place(list(messages), live)
        # the host's objects come back, not the ones an earlier call saw
        assert [m for m in got if m.get("role") != "custom"] == messages
        assert all(
            a is b
            for a, b in zip([m for m in got if m.get("role") != "custom"], messages, strict=False)
        )
        return got

    first = check()
    assert [m["content"] for m in first if m["role"] == "custom"] == [
        "summary 3",
        "summary 1",
        "summary 2",
    ]
    messages[3] = dict(messages[3])  # an equal copy: the same placement, the new object
    check()
    messages[3] = _message("assistant", 99)  # the anchor is gone: summary 1 goes nowhere
    got = check()
    assert "summary 1" not in [m["content"] for m in got if m["role"] == "custom"]
    messages.append(_message("assistant", 3))  # and comes back at the end
    got = check()
    assert got[-1]["content"] == "summary 1"


@pytest.mark.parametrize(
    "boundary", [-1, 0, 2, 2.5, 3.0, 9, 10**9, float("inf"), float("nan"), True, "3", None]
)
def test_the_rescan_starts_at_the_first_turn_trim_keeps(boundary: Any) -> None:
    turns = 5
    frontier: Any = {"lastAttemptedTurnIndex": boundary, "lastAttemptedToolCallId": "x"}
    # trim_batch drops a batch whose turn is < the boundary (JS <), whatever its calls
    kept = [t for t in range(turns) if not _less(t, boundary)]
    assert first_pending_turn(frontier, turns) == (kept[0] if kept else turns)
    assert all(t in kept for t in range(kept[0] if kept else turns, turns))
    assert first_pending_turn(None, turns) == 0
