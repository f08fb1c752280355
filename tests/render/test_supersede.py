"""Protected-path supersession (pi-condense 2.10.2-2.10.3).

Of the reads of one protected path, only the newest stays verbatim; an earlier one becomes a
one-line stub, but only where the pruner rewrites the context anyway (a flush, a chain
compression) or the prompt cache is cold (session start, leaf move, compaction, model or
thinking-level change). The texts below are the reference's (``src/supersede.ts``); the
byte-for-byte check against pi-condense 2.11.3 itself is
``conformance/test_reference_differential.py``.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

from pi_condense._core import RenderCache
from pi_condense.condenser import Condenser
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import RenderResult, render
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.supersede import cold_state
from support import builders
from support.agent import (
    Agent,
    Clock,
    ScriptedSummarizer,
    assistant,
    config,
    new_session,
    result,
    user,
)

OVERRIDES = ".pi/gauntlet-overrides.md"


def stub(path: str) -> str:
    return (
        f"[Superseded: {path} was read again later in this conversation - see the newer read. "
        "Re-read the file if this earlier content is needed.]"
    )


def results_of(messages: list[Any], call_id: str) -> list[Any]:
    return [m for m in messages if m.get("role") == "toolResult" and m.get("toolCallId") == call_id]


def only_text(message: Any) -> str:
    content = message["content"]
    assert len(content) == 1
    assert content[0]["type"] == "text"
    text: str = content[0]["text"]
    return text


def reads_session(
    path: Path, reads: list[tuple[str, dict[str, Any], bool]], *, prompts: bool = False
) -> SessionFile:
    """A session file with one user prompt (one per read with ``prompts``) and a tool turn
    per read ``(id, args, errored)``: each result's text is ``body of <id>``."""
    clock = Clock()
    session = new_session(path, clock=clock)
    session.append_message(user("go", clock.tick()))
    for call_id, args, errored in reads:
        if prompts and call_id != reads[0][0]:
            session.append_message(user(f"then {call_id}", clock.tick()))
        session.append_message(assistant(clock.tick(), (call_id, "read", args)))
        message = result(call_id, "read", f"body of {call_id}", clock.tick(), is_error=errored)
        message["details"] = {"lines": 3}
        session.append_message(message)
    session.append_message(assistant(clock.tick(), text="done"))
    return SessionFile.load(session.path)


def cold_render(session: SessionFile, cfg: Config) -> list[Any]:
    state = PrunerState.from_session(session)
    return render(list(session.build_context().messages), state, cfg).messages


def test_a_cold_render_stubs_every_earlier_read_of_a_protected_path(tmp_path: Path) -> None:
    session = reads_session(
        tmp_path,
        [
            ("r1", {"path": OVERRIDES}, True),
            ("r2", {"path": "src/app.py"}, False),
            ("r3", {"path": "doc\\gauntlet-overrides.md"}, False),
            ("r4", {"path": OVERRIDES}, False),
            ("r5", {"path": "doc/gauntlet-overrides.md"}, False),
            ("r6", {"path": "src/app.py"}, False),
        ],
    )
    source = session.build_context().messages
    out = cold_render(session, config())
    (r1,) = results_of(out, "r1")
    # The earlier read: one text block, no longer an error, every other member kept in place.
    assert only_text(r1) == stub(OVERRIDES)
    assert r1["isError"] is False
    original = results_of(source, "r1")[0]
    assert list(r1) == list(original)
    assert r1["details"] == {"lines": 3}
    assert r1["timestamp"] == original["timestamp"]
    # A Windows path is the same file; the stub names it with forward slashes.
    assert only_text(results_of(out, "r3")[0]) == stub("doc/gauntlet-overrides.md")
    # The newest reads stay verbatim (the very objects), and unprotected paths are not touched.
    for call_id in ("r2", "r4", "r5", "r6"):
        assert results_of(out, call_id)[0] is results_of(source, call_id)[0]


def test_no_protection_no_supersession(tmp_path: Path) -> None:
    session = reads_session(
        tmp_path, [("r1", {"path": OVERRIDES}, False), ("r2", {"path": OVERRIDES}, False)]
    )
    messages = list(session.build_context().messages)
    rendered = render(messages, PrunerState.from_session(session), config(protectedPaths=[]))
    assert not rendered.pruned
    assert rendered.messages is messages
    # A read protected by tool name alone takes part too (its path is still the identity).
    out = cold_render(session, config(protectedPaths=[], protectedTools=["read"]))
    assert only_text(results_of(out, "r1")[0]) == stub(OVERRIDES)


def test_the_path_may_come_as_input_or_args(tmp_path: Path) -> None:
    session = reads_session(tmp_path, [("r1", {"path": "x.py"}, False), ("r2", {}, False)])
    messages = list(session.build_context().messages)
    # `block.input ?? block.args ?? block.arguments`: the first present one names the path.
    messages[1] = {**messages[1], "content": [{**messages[1]["content"][0], "input": None}]}
    messages[1]["content"][0]["args"] = {"path": OVERRIDES}
    messages[3]["content"][0]["input"] = {"path": OVERRIDES}
    out = render(messages, PrunerState.from_session(session), config()).messages
    assert only_text(results_of(out, "r1")[0]) == stub(OVERRIDES)
    assert results_of(out, "r2")[0] is messages[4]


NO = object()  # the member is missing


def with_args(message: Any, input_: Any, args: Any, arguments: Any) -> Any:
    """``message`` (an assistant with one toolCall) with its block's argument members set
    (``NO``: missing)."""
    block = {
        k: v for k, v in message["content"][0].items() if k not in ("input", "args", "arguments")
    }
    for key, value in (("input", input_), ("args", args), ("arguments", arguments)):
        if value is not NO:
            block[key] = value
    return {**message, "content": [block]}


def test_the_first_member_neither_missing_nor_null_is_the_args(tmp_path: Path) -> None:
    # `args = block.input ?? block.args ?? block.arguments ?? {}`, then `args.path` when it is a
    # string: a member that is there and not null decides, with a path or without one.
    session = reads_session(
        tmp_path, [("r1", {"path": OVERRIDES}, False), ("r2", {"path": OVERRIDES}, False)]
    )
    messages = list(session.build_context().messages)
    p = {"path": OVERRIDES}
    cases = [
        ((NO, NO, p), True),
        ((None, None, p), True),
        ((None, p, NO), True),
        ((NO, p, None), True),
        ((p, "x", 1), True),
        (("x", p, p), False),
        (({}, p, p), False),
        (({"path": 5}, p, p), False),
        ((NO, [], p), False),
        ((NO, None, None), False),
        ((NO, NO, OVERRIDES), False),
        ((NO, NO, NO), False),
    ]
    for compat in ("extension", "reference"):
        # By glob, and (reference mode) by a string `protectedTools` matched by substring:
        # either way the path is the identity of the read.
        cfg = (
            config()
            if compat == "extension"
            else config(compat="reference", protectedTools="read,bash", protectedPaths=[])
        )
        for members, superseded in cases:
            case = list(messages)
            case[1] = with_args(messages[1], *members)
            out = render(case, PrunerState.from_session(session), cfg).messages
            r1 = results_of(out, "r1")[0]
            if superseded:
                assert only_text(r1) == stub(OVERRIDES), (compat, members)
            else:
                assert r1 is case[2], (compat, members)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def live(tmp_path: Path, cfg: Config) -> Agent:
    clock = Clock()
    session = new_session(tmp_path, clock=clock)
    condenser = Condenser(session, cfg, summarizer=ScriptedSummarizer(), clock=clock)
    condenser.session_start()
    return Agent(session, condenser, clock)


def overrides_text(messages: list[Any], call_id: str) -> str:
    return only_text(results_of(messages, call_id)[0])


def test_live_supersession_waits_for_a_flush_or_a_cold_cache(tmp_path: Path) -> None:
    agent = live(tmp_path, config())

    async def first_prompt() -> None:
        await agent.prompt("task 1")
        # An unprotected read, then the protected one, then its re-read.
        await agent.tools(
            [
                ("x1", "read", {"path": "src/big.py"}, "X" * 3000),
                ("o1", "read", {"path": OVERRIDES}, "v1"),
            ]
        )
        await agent.tools([("o2", "read", {"path": OVERRIDES}, "v2")])
        # The reply's context: o1 is superseded, but nothing else changes there, so it stays.
        await agent.reply()

    run(first_prompt())
    before_flush = agent.contexts[-1].messages
    assert overrides_text(before_flush, "o1") == "v1"
    # The reply flushed x1 (earlier than o1): the next render rewrites from there anyway.
    run(agent.prompt("task 2"))
    after = agent.context().messages
    assert overrides_text(after, "o1") == stub(OVERRIDES)
    assert overrides_text(after, "o2") == "v2"
    # Once stubbed, it stays stubbed.
    assert overrides_text(agent.context().messages, "o1") == stub(OVERRIDES)

    # A re-read with no rewrite: o2 stays verbatim until the cache is cold.
    run(agent.tools([("o3", "read", {"path": OVERRIDES}, "v3")]))
    assert overrides_text(agent.context().messages, "o2") == "v2"
    agent.condenser.session_compact()
    cold = agent.context().messages
    assert overrides_text(cold, "o2") == stub(OVERRIDES)
    assert overrides_text(cold, "o3") == "v3"

    # A restart (session_start) renders as cold as a fresh render of the session file.
    agent.condenser.session_start()
    again = agent.context().messages
    fresh = cold_render(SessionFile.load(agent.session.path), config())
    assert jsjson.dumps(again[: len(fresh)]) == jsjson.dumps(fresh)


def test_a_frozen_render_supersedes_as_a_plain_one(tmp_path: Path) -> None:
    reads = [(f"r{i}", {"path": OVERRIDES if i % 2 else f"src/f{i}.py"}, False) for i in range(8)]
    session = reads_session(tmp_path, reads)
    messages = list(session.build_context().messages)
    cfg = config()
    for size in (4, 8, 12, len(messages)):
        state = PrunerState.from_session(session)
        plain = render(messages[:size], state, cfg)
        frozen_state = PrunerState.from_session(session)
        for upto in range(2, size + 1, 2):
            frozen = render(messages[:upto], frozen_state, cfg, frozen=True)
        assert jsjson.dumps(frozen.messages) == jsjson.dumps(plain.messages)
        assert (frozen.before_chars, frozen.after_chars) == (plain.before_chars, plain.after_chars)
    assert only_text(results_of(plain.messages, "r1")[0]) == stub(OVERRIDES)


def fresh_render(session: SessionFile, messages: list[Any], cfg: Config) -> RenderResult:
    """A render of a copy of ``messages`` against a fresh state, as a fresh extension's
    (a cold cache: every superseded read is stubbed)."""
    return render(copy.deepcopy(messages), PrunerState.from_session(session), cfg)


def test_a_frozen_render_after_a_superseded_read_resumes(tmp_path: Path) -> None:
    reads = [("r0", {"path": OVERRIDES}, False), ("r1", {"path": OVERRIDES}, True)]
    reads += [(f"r{i}", {"path": f"src/f{i}.py"}, False) for i in range(2, 10)]
    session = reads_session(tmp_path, reads)
    messages = list(session.build_context().messages)
    cfg = config()
    state = PrunerState.from_session(session)
    live = cold_state()
    renders = 0
    for upto in range(6, len(messages) + 1, 2):
        got = render(messages[:upto], state, cfg, frozen=True, supersede=live)
        renders += 1
        want = fresh_render(session, messages[:upto], cfg)
        assert jsjson.dumps(got.messages) == jsjson.dumps(want.messages)
        assert (got.before_chars, got.after_chars) == (want.before_chars, want.after_chars)
        assert only_text(results_of(got.messages, "r0")[0]) == stub(OVERRIDES)
    # The first render decides the whole list; each later one only its new messages.
    stats = state.render_cache.resume_stats
    assert (stats["full"], stats["resumed"]) == (1, renders - 1), stats


def test_a_read_superseded_by_a_new_one_restarts_the_render_before_it(tmp_path: Path) -> None:
    # Cold renders (no live state): each new read of the path supersedes the previous one,
    # which the previous renders kept verbatim; the render restarts at the user message
    # before it.
    reads = [
        (f"r{i}", {"path": OVERRIDES if i % 3 == 0 else f"src/f{i}.py"}, False) for i in range(12)
    ]
    session = reads_session(tmp_path, reads, prompts=True)
    messages = list(session.build_context().messages)
    cfg = config()
    state = PrunerState.from_session(session)
    # Two messages at a time: some renders end between a protected call and its result.
    for upto in range(3, len(messages) + 1, 2):
        got = render(messages[:upto], state, cfg, frozen=True)
        want = fresh_render(session, messages[:upto], cfg)
        assert jsjson.dumps(got.messages) == jsjson.dumps(want.messages)
        assert (got.before_chars, got.after_chars) == (want.before_chars, want.after_chars)
    assert only_text(results_of(got.messages, "r6")[0]) == stub(OVERRIDES)
    stats = state.render_cache.resume_stats
    # The first new read supersedes the first read, before every restart point.
    assert (stats["full"], stats["restarted"]) == (2, 2), stats


def protected_reads(turns: int) -> tuple[list[Any], PrunerState]:
    """``builders.example()`` (a state that can stub: its render measures every message
    through the size memo) followed by ``turns`` tool turns, every other one a read of the
    protected ``OVERRIDES`` (fresh objects each call)."""
    messages, state = builders.example()
    for i in range(turns):
        ts = 1000 + 10 * i
        path = OVERRIDES if i % 2 else f"src/f{i}.py"
        messages += [
            builders.user(ts, f"step {i}"),
            builders.assistant(ts + 1, builders.call(f"r{i}", "read", path=path)),
            builders.result(f"r{i}", ts + 2, f"body of r{i}", name="read"),
        ]
    return messages, state


def stubbed(messages: list[Any]) -> list[str]:
    """The ids of the results that are a superseded stub."""
    return [
        m["toolCallId"]
        for m in messages
        if m.get("role") == "toolResult" and m["content"][0].get("text") == stub(OVERRIDES)
    ]


def fresh_of(messages: list[Any]) -> RenderResult:
    """A render of a copy of ``messages`` against a fresh ``example()`` state."""
    return render(copy.deepcopy(messages), builders.example()[1], builders.cfg())


def test_reads_in_a_lent_prefix_are_still_scanned() -> None:
    # A render reads the protected paths while it reads its views; the views a frozen
    # render's size memo lends (its prefix) are not read, and their paths count all the same.
    messages, state = protected_reads(8)
    state.render_cache = RenderCache(resume=False)
    lent = 0
    for upto in range(7, len(messages) + 1, 3):
        got = render(messages[:upto], state, builders.cfg(), frozen=True)
        lent = max(lent, state.render_cache.prefix)
        builders.assert_same_render(got, fresh_of(messages[:upto]))
    assert lent > 0, "the frozen renders lent a prefix"
    assert stubbed(got.messages) == ["r1", "r3", "r5"]


def test_reads_in_kept_views_are_still_scanned() -> None:
    # Plain renders of the very same objects: from the third on, the size memo hands over
    # the views it kept instead of reading the messages.
    messages, state = protected_reads(8)
    want = fresh_of(messages)
    assert stubbed(want.messages) == ["r1", "r3", "r5"]
    for _ in range(4):
        got = render(messages, state, builders.cfg(), supersede=cold_state())
        builders.assert_same_render(got, want)
    assert state.render_cache.stats[0] > 0
