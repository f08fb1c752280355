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
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.keys import occ_key
from pi_condense.render import render
from pi_condense.state import PrunerState

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOOLS = ("bash", "read", "edit", "context_tree_query")


@dataclass
class Case:
    """A generated context, the branch entries its state is rebuilt from, and a config."""

    messages: list[Any]
    entries: list[dict[str, Any]]
    config: Config
    notes: list[str] = field(default_factory=list)

    @property
    def state(self) -> PrunerState:
        return PrunerState.from_branch(self.entries)


@dataclass
class _Builder:
    messages: list[Any] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    ts: int = 1_000
    next_id: int = 0
    next_ref: int = 0
    next_block: int = 0

    def tick(self) -> int:
        self.ts += 10
        return self.ts


def _text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def _assistant(ts: int, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    calls = any(b["type"] == "toolCall" for b in blocks)
    return {
        "role": "assistant",
        "content": blocks,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude",
        "usage": {"input": 1, "output": 1},
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": ts,
    }


def _barrier(kind: str, ts: int) -> dict[str, Any]:
    if kind == "user":
        return {"role": "user", "content": [_text("interrupt")], "timestamp": ts}
    if kind == "bash":
        return {
            "role": "bashExecution",
            "command": "ls",
            "output": "a\nb",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "timestamp": ts,
        }
    return {
        "role": "custom",
        "customType": "note",
        "content": "foreign",
        "display": True,
        "timestamp": ts,
    }


@st.composite
def cases(draw: st.DrawFn, *, quiet: bool = False) -> Case:
    """A session; ``quiet`` ones give render nothing to do (no state, no errors, no damage, no
    protected path read again)."""
    b = _Builder()
    reuse_ids = draw(st.booleans())
    chain_spans: list[tuple[int, int, list[str], list[str], list[str]]] = []
    for _ in range(draw(st.integers(1, 6))):
        start = b.tick()
        b.messages.append({"role": "user", "content": [_text("do it")], "timestamp": start})
        chain_ids: list[str] = []
        chain_keys: list[str] = []
        chain_refs: list[str] = []
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            count = draw(st.integers(1, 3))
            if reuse_ids:
                # Ids repeat across responses, never within one (providers number per response).
                pool = draw(st.permutations(range(4)))[:count]
                ids = [f"call_{n}" for n in pool]
            else:
                ids = [f"toolu_{b.next_id + n}" for n in range(1, count + 1)]
                b.next_id += count
            for tool_call_id in ids:
                name = draw(st.sampled_from(TOOLS))
                size = draw(st.sampled_from((5, 40, 700)))
                # A quiet session reads no protected path (a re-read would be superseded;
                # no tool is protected by name either).
                paths = ("src/a.ts",) if quiet else ("src/a.ts", "docs/skills/x/SKILL.md")
                path = draw(st.sampled_from(paths))
                args = {"path": path, "command": "x" * size}
                calls.append((tool_call_id, name, args))
            blocks = [{"type": "toolCall", "id": i, "name": n, "arguments": a} for i, n, a in calls]
            if draw(st.booleans()):
                blocks.insert(0, {"type": "thinking", "thinking": "hmm", "thinkingSignature": "s"})
            b.messages.append(_assistant(b.tick(), blocks))
            if not quiet and draw(st.integers(0, 9)) == 0:
                b.messages.append(
                    _barrier(draw(st.sampled_from(("user", "bash", "custom"))), b.tick())
                )
            batch: list[tuple[dict[str, Any], dict[str, Any]]] = []
            for tool_call_id, name, args in calls:
                if not quiet and draw(st.integers(0, 14)) == 0:
                    continue  # the result never came
                errored = not quiet and draw(st.integers(0, 4)) == 0
                result: dict[str, Any] = {
                    "role": "toolResult",
                    "toolCallId": tool_call_id,
                    "toolName": name,
                    "content": [
                        _text(f"output of {tool_call_id} " + "y" * draw(st.integers(0, 50)))
                    ],
                    "details": {"exitCode": 1 if errored else 0},
                    "isError": errored,
                    "timestamp": b.tick(),
                }
                b.messages.append(result)
                if not quiet and draw(st.integers(0, 19)) == 0:
                    b.messages.append(copy.deepcopy(result))  # a duplicated result
                chain_ids.append(tool_call_id)
                if not quiet and draw(st.integers(0, 2)) > 0:
                    record = {
                        "toolCallId": tool_call_id,
                        "toolName": name,
                        "args": args,
                        "resultText": result["content"][0]["text"],
                        "isError": errored,
                        "turnIndex": 0,
                        "timestamp": result["timestamp"],
                        "resultTimestamp": result["timestamp"],
                    }
                    batch.append((record, result))
            if batch:
                refs = []
                for record, _ in batch:
                    b.next_ref += 1
                    refs.append(
                        {
                            "shortId": f"t{b.next_ref}",
                            "toolCallId": record["toolCallId"],
                            "resultTimestamp": record["resultTimestamp"],
                        }
                    )
                    chain_keys.append(occ_key(record["toolCallId"], record["resultTimestamp"]))
                    chain_refs.append(f"t{b.next_ref}")
                body = "\n".join(f"- `{r['shortId']}` done" for r in refs)
                details = {
                    "toolCallRefs": refs,
                    "toolNames": [r["toolName"] for r, _ in batch],
                    "turnIndex": 0,
                    "timestamp": batch[0][0]["timestamp"],
                }
                summary_ts = b.tick()
                b.entries.append(
                    {
                        "type": "custom_message",
                        "customType": "context-prune-summary",
                        "content": body,
                        "display": False,
                        "details": details,
                    }
                )
                b.entries.append(
                    {
                        "type": "custom",
                        "customType": "context-prune-index",
                        "data": {"toolCalls": [r for r, _ in batch]},
                    }
                )
                b.messages.append(
                    {
                        "role": "custom",
                        "customType": "context-prune-summary",
                        "content": body,
                        "display": False,
                        "details": details,
                        "timestamp": summary_ts,
                    }
                )
        if draw(st.integers(0, 4)) > 0:
            final = b.tick()
            blocks = [_text("done")]
            if draw(st.booleans()):
                blocks.insert(0, {"type": "thinking", "thinking": "so", "thinkingSignature": "s"})
            b.messages.append(_assistant(final, blocks))
            chain_spans.append((start, final, chain_ids, chain_keys, chain_refs))
    if not quiet:
        for start, final, ids, keys, chain_refs in chain_spans:
            if draw(st.booleans()):
                continue
            b.next_block += 1
            stale = draw(st.integers(0, 9)) == 0
            data: dict[str, Any] = {
                "blockId": f"b{b.next_block}",
                "startUserTimestamp": start,
                "droppedToolCallIds": list(dict.fromkeys(ids)),
                "finalAssistantTimestamp": final + 1 if stale else final,
                "toolRefs": chain_refs,
                "compressedAt": 10**12 + b.next_block,
            }
            if draw(st.booleans()):
                data["rangeSummaryText"] = f"range {b.next_block}: {', '.join(chain_refs) or '-'}"
            if keys:
                data["droppedOccurrenceKeys"] = keys
            b.entries.append({"type": "custom", "customType": "context-prune-chain", "data": data})
    settings_block = {
        "enabled": True,
        "recoveryGraceTurns": draw(st.integers(0, 3)),
        "protectedTools": [] if quiet else draw(st.sampled_from(([], ["edit"]))),
        "purgeErrors": {
            "enabled": draw(st.booleans()),
            "cooldownTurns": draw(st.integers(1, 3)),
            # A purge marker is about 50 chars: it is never purged again (idempotence).
            "minArgChars": draw(st.sampled_from((100, 500))),
        },
        "chainCompression": {
            "enabled": draw(st.booleans()),
            "stripFinalAssistantThinking": draw(st.booleans()),
        },
    }
    return Case(b.messages, b.entries, Config.from_settings_dict(settings_block))


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
