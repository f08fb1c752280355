"""OpenAIResponsesCodec: Responses API input items <-> Pi messages, both ways."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_condense.adapters import OpenAIResponsesCodec, Out
from pi_condense.js import json as jsjson
from support.adapters import (
    PNG,
    PNG_URL,
    big_plan,
    check_responses,
    drive,
    essentials,
    pi_history,
    responses_history,
    stub_texts,
    turns,
    untouched_outs,
)

codec = OpenAIResponsesCodec()
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

REASONING = {
    "id": "rs_1",
    "summary": [{"text": "read both", "type": "summary_text"}],
    "type": "reasoning",
    "encrypted_content": "gAAA",
}
MESSAGE = {
    "id": "msg_1",
    "content": [{"annotations": [], "text": "Reading.", "type": "output_text", "logprobs": []}],
    "role": "assistant",
    "status": "completed",
    "type": "message",
}


def function_call(call_id: str, name: str, arguments: str, item_id: str) -> dict[str, Any]:
    return {
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
        "type": "function_call",
        "id": item_id,
        "status": "completed",
    }


HISTORY: list[dict[str, Any]] = [
    {"role": "developer", "content": "be brief"},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
            {"type": "input_file", "file_id": "file-1"},
        ],
    },
    REASONING,
    MESSAGE,
    function_call("call_0", "read", '{"path":"a"}', "fc_1"),
    function_call("call_1", "bash", "[1]", "fc_2"),
    {"call_id": "call_0", "output": "A", "type": "function_call_output"},
    {
        "call_id": "call_1",
        "output": [{"type": "input_text", "text": "B"}],
        "type": "function_call_output",
    },
    {"type": "item_reference", "id": "ref_1"},
    {"content": "again", "role": "user"},
    function_call("call_0", "grep", "{}", "fc_3"),
    {"call_id": "call_0", "output": "C", "type": "function_call_output"},
    {"role": "assistant", "content": "done"},
]


def test_decode_groups_assistant_items_into_one_message() -> None:
    units = codec.decode(HISTORY)
    spans = [(u.start, u.stop) for u in units]
    assert spans == [(0, 1), (1, 2), (2, 6), *[(i, i + 1) for i in range(6, 13)]]
    assert units[0].message is None
    assert units[5].message is None  # item_reference: host-only
    assert units[1].message == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "input_file", "file_id": "file-1"},
        ],
    }
    assistant = units[2].message
    assert isinstance(assistant, dict)
    template = {**MESSAGE, "content": [{**MESSAGE["content"][0], "text": ""}]}  # type: ignore[dict-item]
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "read both", "thinkingSignature": jsjson.dumps(REASONING)},
        {"type": "text", "text": "Reading.", "textSignature": jsjson.dumps(template)},
        {"type": "toolCall", "id": "call_0|fc_1", "name": "read", "arguments": {"path": "a"}},
        {"type": "toolCall", "id": "call_1|fc_2", "name": "bash", "arguments": "[1]"},
    ]
    assert assistant["stopReason"] == "toolUse"
    assert units[3].message == {
        "role": "toolResult",
        "toolCallId": "call_0|fc_1",
        "toolName": "read",
        "content": [{"type": "text", "text": "A"}],
        "isError": False,
    }
    assert isinstance(units[4].message, dict)
    assert units[4].message["toolName"] == "bash"
    # call_0 again: the output is the latest call's
    assert isinstance(units[8].message, dict)
    assert units[8].message["toolCallId"] == "call_0|fc_3"
    assert units[8].message["toolName"] == "grep"
    assert isinstance(units[9].message, dict)
    assert units[9].message["content"] == [{"type": "text", "text": "done"}]


def test_decode_from_a_unit_start_looks_back() -> None:
    units = codec.decode(HISTORY)
    for index, unit in enumerate(units):
        assert codec.decode(HISTORY, unit.start) == units[index:]


def test_untouched_items_come_back_as_the_same_objects() -> None:
    out = codec.encode(untouched_outs(HISTORY, codec.decode(HISTORY)))
    assert len(out) == len(HISTORY)
    assert all(a is b for a, b in zip(out, HISTORY, strict=False))


def test_a_copied_assistant_is_rebuilt_from_its_signatures() -> None:
    units = codec.decode(HISTORY)
    assistant = units[2].message
    assert isinstance(assistant, dict)
    _, text, first, second = assistant["content"]
    purged = {**second, "arguments": {"_purged": '<purged-errored-args size="3"/>'}}
    copied = {**assistant, "content": [text, first, purged]}  # thinking stripped, args purged
    out = codec.encode([Out(copied, ()), *untouched_outs(HISTORY, units[3:5])])
    check_responses(out)
    assert out[0] == MESSAGE
    assert out[1] == {
        "type": "function_call",
        "call_id": "call_0",
        "id": "fc_1",
        "name": "read",
        "arguments": '{"path":"a"}',
    }
    assert out[2]["arguments"] == '{"_purged":"<purged-errored-args size=\\"3\\"/>"}'
    assert out[3] is HISTORY[6]
    # with its thinking, the reasoning item comes back as it was
    again = codec.encode([Out({**assistant}, ()), *untouched_outs(HISTORY, units[3:5])])
    assert again[0] == REASONING


def test_a_stub_answers_its_call_by_call_id() -> None:
    units = codec.decode(HISTORY)
    result = units[3].message
    assert isinstance(result, dict)
    stub = {**result, "content": [{"type": "text", "text": "[Summarized ...]"}]}
    outs = [*untouched_outs(HISTORY, units[:3]), Out(stub, ()), *untouched_outs(HISTORY, units[4:])]
    out = codec.encode(outs)
    check_responses(out)
    assert out[6] == {
        "type": "function_call_output",
        "call_id": "call_0",
        "output": "[Summarized ...]",
    }
    assert all(a is b for i, (a, b) in enumerate(zip(out, HISTORY, strict=False)) if i != 6)


@SETTINGS
@given(turns())
def test_generated_histories_round_trip_untouched(plan: Any) -> None:
    items = responses_history(plan)
    check_responses(items)
    out = codec.encode(untouched_outs(items, codec.decode(items)))
    assert len(out) == len(items)
    assert all(a is b for a, b in zip(out, items, strict=False))


@SETTINGS
@given(turns())
def test_decode_is_deterministic_and_json_shaped(plan: Any) -> None:
    items = responses_history(plan)
    first = codec.decode(copy.deepcopy(items))
    second = codec.decode(copy.deepcopy(items))
    assert orjson.dumps([u.message for u in first]) == orjson.dumps([u.message for u in second])
    assert first == second


def reasoning(text: str) -> dict[str, Any]:
    item = {"type": "reasoning", "id": "rs_x", "summary": [{"type": "summary_text", "text": text}]}
    return {"type": "thinking", "thinking": text, "thinkingSignature": jsjson.dumps(item)}


@SETTINGS
@given(turns(), st.lists(st.booleans(), max_size=4))
def test_new_messages_encode_to_valid_items_and_decode_back(
    plan: Any, summaries: list[bool]
) -> None:
    messages = pi_history(plan, reasoning, summaries)
    out = codec.encode([Out(m, ()) for m in messages])
    check_responses(out)
    back = [u.message for u in codec.decode(out)]
    assert all(m is not None for m in back)
    # a function_call_output has no error flag
    expected = [
        {**m, "isError": False} if m["role"] == "toolResult" else m for m in essentials(messages)
    ]
    assert essentials([m for m in back if m is not None]) == expected


def test_errored_turns_and_thinking_without_a_reasoning_item() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "e1|fc_e", "name": "read", "arguments": {}}],
            "stopReason": "aborted",
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hidden", "thinkingSignature": "not-an-item"},
                {"type": "text", "text": "trying"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"p": 1}},
            ],
            "stopReason": "toolUse",
        },
        {"role": "user", "content": "stop"},
    ]
    out = codec.encode([Out(m, ()) for m in messages])
    check_responses(out)
    assert out == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "trying"},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"p":1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "No result provided"},
        {"role": "user", "content": "stop"},
    ]


@pytest.mark.parametrize("compact", [False, True])
def test_a_real_render_encodes_to_valid_smaller_items(compact: bool) -> None:
    items = responses_history(big_plan())
    units = codec.decode(items)
    driven = drive(items, units, compact=compact)
    out = codec.encode(driven.outs)
    check_responses(out)
    kept = [item for o in driven.outs for item in o.items]
    assert [i for i in out if any(i is k for k in kept)] == kept
    assert out[0] is items[0]
    assert jsjson.length(out) * 2 < jsjson.length(items)
    if compact:
        assert jsjson.dumps(out).count("<compressed-chain") == 3
        assert len(kept) == 4  # the developer message and the prompts
    else:
        stubs = stub_texts(driven.rendered.messages)
        assert len(stubs) == 12
        outputs = [i["output"] for i in out if i.get("type") == "function_call_output"]
        assert outputs == stubs
        # every assistant run (message + two calls, or the final message) is kept whole
        assert len(kept) == 1 + 3 + 3 * (2 * 3 + 1)
