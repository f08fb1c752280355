"""OpenAIChatCodec: Chat Completions messages <-> Pi messages, both ways."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_condense.adapters import OpenAIChatCodec, Out
from pi_condense.js import json as jsjson
from support.adapters import (
    PNG,
    PNG_URL,
    big_plan,
    chat_history,
    check_chat,
    drive,
    essentials,
    pi_history,
    stub_texts,
    turns,
    untouched_outs,
)

codec = OpenAIChatCodec()
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in these?"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}},
        ],
    },
    {
        "role": "assistant",
        "content": "Looking.",
        "reasoning_content": "two files",
        "tool_calls": [
            call("call_0", "read", '{"path": "a.py"}'),
            call("call_1", "bash", "{not json"),
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "print(1)"},
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "err"}]},
    {"role": "assistant", "content": "a.py prints 1"},
    {"role": "developer", "content": "next"},
    {"role": "user", "content": "and b?"},
    {"role": "assistant", "content": None, "tool_calls": [call("call_0", "grep", "{}")]},
    {"role": "tool", "tool_call_id": "call_0", "content": "b: none"},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
]


def test_decode_maps_every_message_to_pi_shapes() -> None:
    units = codec.decode(HISTORY)
    assert [(u.start, u.stop) for u in units] == [(i, i + 1) for i in range(len(HISTORY))]
    messages = [u.message for u in units]
    assert messages[0] is None
    assert messages[6] is None
    assert messages[1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in these?"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            HISTORY[1]["content"][2],  # not a data URL, detail set: kept as it is
        ],
    }
    assistant = messages[2]
    assert assistant is not None
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "two files", "thinkingSignature": "reasoning_content"},
        {"type": "text", "text": "Looking."},
        {"type": "toolCall", "id": "call_0", "name": "read", "arguments": {"path": "a.py"}},
        {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": "{not json"},
    ]
    assert assistant["stopReason"] == "toolUse"
    assert messages[5] is not None
    assert messages[5]["stopReason"] == "stop"
    assert messages[3] == {
        "role": "toolResult",
        "toolCallId": "call_0",
        "toolName": "read",
        "content": [{"type": "text", "text": "print(1)"}],
        "isError": False,
    }
    assert messages[4] is not None
    assert messages[4]["toolName"] == "bash"
    # call_0 is reused by the second turn: its result is named after the latest call
    assert messages[9] is not None
    assert messages[9]["toolName"] == "grep"
    assert messages[10] is not None
    assert messages[10]["content"] == [{"type": "refusal", "refusal": "no"}]


def test_decode_from_a_start_looks_back_for_tool_names() -> None:
    whole = codec.decode(HISTORY)
    for start in range(len(HISTORY)):
        assert codec.decode(HISTORY, start) == whole[start:]


def test_untouched_history_comes_back_as_the_same_objects() -> None:
    units = codec.decode(HISTORY)
    out = codec.encode(untouched_outs(HISTORY, units))
    assert len(out) == len(HISTORY)
    assert all(a is b for a, b in zip(out, HISTORY, strict=False))


def test_invalid_json_arguments_keep_their_text() -> None:
    units = codec.decode(HISTORY)
    out = codec.encode([Out(units[2].message, ()), *untouched_outs(HISTORY, units[3:5])])
    assert out[0]["tool_calls"][1]["function"]["arguments"] == "{not json"
    assert out[0]["tool_calls"][0]["function"]["arguments"] == '{"path":"a.py"}'
    assert out[0]["reasoning_content"] == "two files"
    assert out[0]["content"] == "Looking."


@SETTINGS
@given(turns())
def test_generated_histories_round_trip_untouched(plan: Any) -> None:
    items = chat_history(plan)
    check_chat(items)
    units = codec.decode(items)
    out = codec.encode(untouched_outs(items, units))
    assert len(out) == len(items)
    assert all(a is b for a, b in zip(out, items, strict=False))


@SETTINGS
@given(turns())
def test_decode_is_deterministic_and_json_shaped(plan: Any) -> None:
    items = chat_history(plan)
    first = codec.decode(copy.deepcopy(items))
    second = codec.decode(copy.deepcopy(items))
    assert orjson.dumps([u.message for u in first]) == orjson.dumps([u.message for u in second])
    assert first == second


def reasoning(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "thinkingSignature": "reasoning_content"}


def expected_chat(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a Pi history becomes through Chat Completions: results lose ``isError`` and
    their images, which follow the run of tool messages in a user message."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for message in essentials(messages):
        if message["role"] != "toolResult" and images:
            text = {"type": "text", "text": "Attached image(s) from tool result:"}
            out.append({"role": "user", "content": [text, *images]})
            images = []
        if message["role"] == "toolResult":
            images += [b for b in message["content"] if b["type"] == "image"]
            texts = [b for b in message["content"] if b["type"] == "text"]
            message = {**message, "content": texts, "isError": False}
        out.append(message)
    return out


@SETTINGS
@given(turns(), st.lists(st.booleans(), max_size=4))
def test_new_messages_encode_to_a_valid_request_and_decode_back(
    plan: Any, summaries: list[bool]
) -> None:
    messages = pi_history(plan, reasoning, summaries)
    out = codec.encode([Out(m, ()) for m in messages])
    check_chat(out)
    back = [u.message for u in codec.decode(out)]
    assert all(m is not None for m in back)
    assert essentials([m for m in back if m is not None]) == expected_chat(messages)


def test_errored_and_aborted_turns_never_leave_an_unpaired_call() -> None:
    def assistant(stop: str, *ids: str) -> dict[str, Any]:
        blocks = [{"type": "toolCall", "id": i, "name": "read", "arguments": {}} for i in ids]
        return {"role": "assistant", "content": blocks, "stopReason": stop}

    def result(call_id: str) -> dict[str, Any]:
        return {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": "read",
            "content": [{"type": "text", "text": "r"}],
            "isError": False,
        }

    messages = [
        {"role": "user", "content": "go"},
        assistant("error", "e1", "e2"),  # errored: skipped, as pi-ai does
        assistant("aborted", "a1"),
        result("a1"),  # its call was skipped: dropped, never sent alone
        assistant("toolUse", "c1", "c2"),
        result("c2"),
        {"role": "user", "content": "again"},  # c1 unanswered: Pi's "No result provided"
    ]
    out = codec.encode([Out(m, ()) for m in messages])
    check_chat(out)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    assert [c["id"] for c in out[1]["tool_calls"]] == ["c1", "c2"]
    assert out[2] == {"role": "tool", "tool_call_id": "c2", "content": "r"}
    assert out[3] == {"role": "tool", "tool_call_id": "c1", "content": "No result provided"}


def test_tool_result_images_follow_in_a_user_message() -> None:
    image = {"type": "image", "data": PNG, "mimeType": "image/png"}
    messages = [
        {"role": "user", "content": "shot"},
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "s1", "name": "screenshot", "arguments": {}},
                {"type": "toolCall", "id": "s2", "name": "screenshot", "arguments": {}},
            ],
            "stopReason": "toolUse",
        },
        {"role": "toolResult", "toolCallId": "s1", "toolName": "screenshot", "content": [image]},
        {"role": "toolResult", "toolCallId": "s2", "toolName": "screenshot", "content": []},
    ]
    out = codec.encode([Out(m, ()) for m in messages])
    check_chat(out)
    assert out[2] == {"role": "tool", "tool_call_id": "s1", "content": "(see attached image)"}
    assert out[3] == {"role": "tool", "tool_call_id": "s2", "content": ""}
    assert out[4] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Attached image(s) from tool result:"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
        ],
    }


@pytest.mark.parametrize("compact", [False, True])
def test_a_real_render_encodes_to_a_valid_smaller_request(compact: bool) -> None:
    items = chat_history(big_plan())
    units = codec.decode(items)
    driven = drive(items, units, compact=compact)
    assert driven.rendered.pruned
    out = codec.encode(driven.outs)
    check_chat(out)
    # every item the render kept comes back as the caller's very object, in order
    kept = [item for o in driven.outs for item in o.items]
    assert [i for i in out if any(i is k for k in kept)] == kept
    assert all(
        a is b for a, b in zip([i for i in out if any(i is k for k in kept)], kept, strict=False)
    )
    assert out[0] is items[0]  # the host-only system prompt stays first
    assert jsjson.length(out) * 2 < jsjson.length(items)
    text = jsjson.dumps(out)
    if compact:
        assert text.count("<compressed-chain") == 3
        assert len(kept) == 4  # system + three prompts; the chains' final replies are copies
    else:
        stubs = stub_texts(driven.rendered.messages)
        assert len(stubs) == 12
        tool_texts = [m["content"] for m in out if m["role"] == "tool"]
        assert tool_texts == stubs
        assert len(kept) == 13  # system, prompts, every assistant
        summaries = [m for m in out if m["role"] == "user" and "Summarized tool refs" in str(m)]
        assert len(summaries) == 6


def test_custom_tool_calls_name_their_results() -> None:
    history = [
        {"role": "user", "content": "patch it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "custom", "custom": {"name": "apply_patch", "input": "*** x"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    units = codec.decode(history)
    assert isinstance(units[1].message, dict)
    assert units[1].message["content"] == [
        {"type": "toolCall", "id": "c", "name": "apply_patch", "arguments": "*** x"}
    ]
    assert isinstance(units[2].message, dict)
    assert units[2].message["toolName"] == "apply_patch"
    assert all(
        a is b for a, b in zip(codec.encode(untouched_outs(history, units)), history, strict=False)
    )
