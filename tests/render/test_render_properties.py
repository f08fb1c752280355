"""Render properties over generated sessions (hypothesis).

A generated session is a run of chains (user message -> tool rounds -> final answer, or left
open), with reused or unique tool-call ids, errored results, ``context_tree_query`` results,
protected reads, large and small arguments, and optionally the damage real sessions carry
(a missing result, a message spliced between a call and its result, a duplicated result).
Its pruner state summarizes a random subset of the results (index records plus the summary
messages that name them, also present in the context) and compresses a random subset of the
closed chains, sometimes with an entry that no longer resolves.

Properties (spec 04):

- every toolResult of the output answers a call of the assistant message right before its
  run of results (phase 4 leaves no orphan);
- rendering the output again with the same state gives the same messages;
- a render that changes nothing returns the very input list (``pruned`` false, sizes 0); a
  render that changes something returns a new list whose sizes are the JS lengths of the
  input and the output; no input object is mutated.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import render
from pi_condense.state import PrunerState
from support.render_cases import SETTINGS, Case, _text, cases


def _orphans(messages: list[Any]) -> list[int]:
    """Indices of toolResults without an open call (spec 04 section 6's barrier rule)."""
    open_ids: set[Any] = set()
    orphans = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            open_ids = {
                b.get("id")
                for b in message["content"]
                if isinstance(b, dict) and b.get("type") == "toolCall"
            }
        elif role == "toolResult":
            if message.get("toolCallId") in open_ids:
                open_ids.discard(message["toolCallId"])
            else:
                orphans.append(i)
        else:
            open_ids = set()
    return orphans


@SETTINGS
@given(cases())
def test_no_tool_result_without_an_open_call(case: Case) -> None:
    result = render(case.messages, case.state, case.config)
    assert not result.threw
    assert _orphans(result.messages) == []


@SETTINGS
@given(cases())
def test_render_is_idempotent_for_the_same_state(case: Case) -> None:
    # Without the recovery grace window: a synthetic chain message is a user message, so it
    # moves the window on a second render (see the test below). Without error purge: the
    # orphan sweep of the first render can drop an errored result, which changes the turn
    # ages error purge counts on a second render (the reference behaves the same way).
    config = case.config.with_value("recoveryGraceTurns", 0).with_value(
        "purgeErrors.enabled", False
    )
    state = case.state
    once = render(case.messages, state, config)
    twice = render(once.messages, state, config)
    assert not twice.threw
    assert twice.messages == once.messages


def _msg(role: str, ts: int, content: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **extra, "timestamp": ts}


def test_a_second_render_can_move_the_grace_window() -> None:
    """Spec 04 section 3.1 counts every ``user`` message, the synthetic chain message of
    phase 3 included: re-rendering an output counts one more turn after each synthetic, so a
    recovery output at the edge of the window is stubbed the second time. (Render output is
    never rendered again in a live session; this pins the one known non-idempotence.)"""
    go = [_text("go")]

    def call(tool_call_id: str, name: str) -> list[dict[str, Any]]:
        return [{"type": "toolCall", "id": tool_call_id, "name": name, "arguments": {}}]

    def result(tool_call_id: str, name: str, ts: int) -> dict[str, Any]:
        return _msg(
            "toolResult", ts, [_text("out")], toolCallId=tool_call_id, toolName=name, isError=False
        )

    def record(tool_call_id: str, name: str, ts: int) -> dict[str, Any]:
        return {
            "toolCallId": tool_call_id,
            "toolName": name,
            "args": {},
            "resultText": "out",
            "isError": False,
            "turnIndex": 0,
            "timestamp": ts,
            "resultTimestamp": ts,
        }

    messages = [
        _msg("user", 100, go),
        _msg("assistant", 110, call("q", "context_tree_query")),
        result("q", "context_tree_query", 120),
        _msg("assistant", 130, [_text("ok")]),
        _msg("user", 200, go),
        _msg("assistant", 210, call("x", "bash")),
        result("x", "bash", 220),
        _msg("assistant", 230, [_text("ok")]),
    ]
    refs = [
        {"shortId": "t1", "toolCallId": "q", "resultTimestamp": 120},
        {"shortId": "t2", "toolCallId": "x", "resultTimestamp": 220},
    ]
    chain = {
        "blockId": "b1",
        "startUserTimestamp": 200,
        "droppedToolCallIds": ["x"],
        "finalAssistantTimestamp": 230,
        "toolRefs": ["t2"],
        "compressedAt": 9000,
    }
    state = PrunerState.from_branch(
        [
            {
                "type": "custom",
                "customType": "context-prune-index",
                "data": {
                    "toolCalls": [
                        record("q", "context_tree_query", 120),
                        record("x", "bash", 220),
                    ]
                },
            },
            {
                "type": "custom_message",
                "customType": "context-prune-summary",
                "content": "s",
                "display": False,
                "details": {"toolCallRefs": refs},
            },
            {"type": "custom", "customType": "context-prune-chain", "data": chain},
        ]
    )
    config = Config.from_settings_dict(
        {"enabled": True, "recoveryGraceTurns": 1, "chainCompression": {"enabled": True}}
    )
    once = render(messages, state, config)
    # Turn 1 of 2: inside a 1-turn window, the recovery output stays raw.
    assert once.messages[2] is messages[2]
    assert once.messages[5]["content"][0]["text"].startswith('<compressed-chain id="b1"')
    twice = render(once.messages, state, config)
    # Turn 1 of 3 now: outside the window, stubbed with its ref.
    assert twice.messages[2]["content"][0]["text"] == (
        "[Summarized in pruner summary, ref `t1`. Use context_tree_query to retrieve full output.]"
    )
    assert twice.messages[:2] == once.messages[:2]
    assert twice.messages[3:] == once.messages[3:]


@SETTINGS
@given(cases(quiet=True))
def test_noop_returns_the_very_same_list(case: Case) -> None:
    result = render(case.messages, case.state, case.config)
    assert result.messages is case.messages
    assert not result.pruned
    assert (result.before_chars, result.after_chars) == (0, 0)
    assert result.diagnostics == ()


@SETTINGS
@given(cases())
def test_identity_sizes_and_no_mutation(case: Case) -> None:
    before = copy.deepcopy(case.messages)
    result = render(case.messages, case.state, case.config)
    assert case.messages == before
    if not result.pruned:
        assert result.messages is case.messages
        assert (result.before_chars, result.after_chars) == (0, 0)
        return
    assert result.messages is not case.messages
    assert result.before_chars == jsjson.length(case.messages)
    assert result.after_chars == jsjson.length(result.messages)
    inputs = {id(m) for m in case.messages}
    for message in result.messages:
        if id(message) not in inputs:
            # A new message is a stub, an assistant copy or a synthetic chain message.
            assert message["role"] in ("toolResult", "assistant", "user")


@given(cases(), st.data())
def test_a_state_that_remembers_renders_like_a_fresh_one(case: Case, data: st.DataObject) -> None:
    # The size memo reuses the lengths and views of messages made of the same objects: a
    # render after renders of this list, of a shorter list and of an edited list must equal
    # the render against a state that remembers nothing.
    state = case.state
    render(case.messages, state, case.config)
    cut = data.draw(st.integers(0, len(case.messages)), label="cut")
    render(case.messages[:cut], state, case.config)
    messages = copy.deepcopy(case.messages) if data.draw(st.booleans(), label="copy") else None
    for message in case.messages if messages is None else []:
        if message.get("role") == "toolResult" and data.draw(st.booleans(), label="edit"):
            message["content"] = [_text("edited")]
    current = case.messages if messages is None else messages
    remembered = render(current, state, case.config)
    fresh = render(current, case.state, case.config)
    assert remembered.messages == fresh.messages
    assert (remembered.pruned, remembered.before_chars, remembered.after_chars) == (
        fresh.pruned,
        fresh.before_chars,
        fresh.after_chars,
    )
    assert remembered.diagnostics == fresh.diagnostics
