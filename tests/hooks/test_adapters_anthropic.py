"""AnthropicMessagesCodec: Anthropic Messages API messages <-> Pi messages, both ways."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_condense.adapters import AnthropicMessagesCodec, Out, unit_messages
from pi_condense.js import json as jsjson
from support.adapters import (
    PNG,
    anthropic_history,
    big_plan,
    check_anthropic,
    drive,
    essentials,
    merge_users,
    pi_history,
    stub_texts,
    turns,
    untouched_outs,
)

codec = AnthropicMessagesCodec()
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOURCE = {"type": "base64", "media_type": "image/png", "data": PNG}

HISTORY: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [{"type": "text", "text": "look"}, {"type": "image", "source": SOURCE}],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "two reads", "signature": "sig1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_0", "name": "read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_0", "content": "A"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "boom"}],
                "is_error": True,
            },
            {"type": "text", "text": "also check b"},
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "d"},
            },
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_0", "name": "grep", "input": {}}],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": "B"}],
    },
    {"role": "assistant", "content": "done"},
]


def test_decode_maps_every_message_to_pi_shapes() -> None:
    units = codec.decode(HISTORY)
    assert [(u.start, u.stop) for u in units] == [(i, i + 1) for i in range(len(HISTORY))]
    assert units[0].message == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
        ],
    }
    assistant = units[1].message
    assert isinstance(assistant, dict)
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "two reads", "thinkingSignature": "sig1"},
        {
            "type": "thinking",
            "thinking": "[Reasoning redacted]",
            "thinkingSignature": "opaque",
            "redacted": True,
        },
        {"type": "text", "text": "Reading."},
        {"type": "toolCall", "id": "toolu_0", "name": "read", "arguments": {"path": "a"}},
        {"type": "toolCall", "id": "toolu_1", "name": "bash", "arguments": {"cmd": "ls"}},
    ]
    assert assistant["stopReason"] == "toolUse"
    # one host message, three Pi messages: a result per tool_result block, then the rest
    assert units[2].message == [
        {
            "role": "toolResult",
            "toolCallId": "toolu_0",
            "toolName": "read",
            "content": [{"type": "text", "text": "A"}],
            "isError": False,
        },
        {
            "role": "toolResult",
            "toolCallId": "toolu_1",
            "toolName": "bash",
            "content": [{"type": "text", "text": "boom"}],
            "isError": True,
        },
        {
            "role": "user",
            "content": [{"type": "text", "text": "also check b"}, HISTORY[2]["content"][3]],
        },
    ]
    # a reused id is named after its latest call; a lone result is a plain message
    assert isinstance(units[4].message, dict)
    assert units[4].message["toolName"] == "grep"
    assert isinstance(units[5].message, dict)
    assert units[5].message["content"] == [{"type": "text", "text": "done"}]


def test_decode_from_a_start_looks_back_for_tool_names() -> None:
    whole = codec.decode(HISTORY)
    for start in range(len(HISTORY)):
        assert codec.decode(HISTORY, start) == whole[start:]


def test_untouched_history_comes_back_as_the_same_objects() -> None:
    out = codec.encode(untouched_outs(HISTORY, codec.decode(HISTORY)))
    assert len(out) == len(HISTORY)
    assert all(a is b for a, b in zip(out, HISTORY, strict=False))


def test_a_summary_next_to_a_user_message_is_merged_into_it() -> None:
    units = codec.decode(HISTORY)
    summary = {
        "role": "custom",
        "customType": "context-prune-summary",
        "content": "- `t1` read a",
        "display": False,
    }
    outs = untouched_outs(HISTORY, units)
    outs.append(Out(summary, ()))
    outs.append(Out({"role": "user", "content": "next"}, ()))
    out = codec.encode(outs)
    check_anthropic(out)
    assert all(a is b for a, b in zip(out, HISTORY, strict=False))
    assert out[-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "- `t1` read a"}, {"type": "text", "text": "next"}],
    }


def test_a_partly_rendered_result_message_is_rebuilt_whole() -> None:
    units = codec.decode(HISTORY)
    first, second, user = unit_messages(units[2].message)
    stub_text = (
        "[Summarized in pruner summary, ref `t1`. Use context_tree_query to retrieve full output.]"
    )
    stub = {**first, "content": [{"type": "text", "text": stub_text}]}
    outs = [*untouched_outs(HISTORY, units[:2]), Out(stub, ()), Out(second, ()), Out(user, ())]
    out = codec.encode(outs)
    check_anthropic(out)
    assert out[:2] == HISTORY[:2]
    assert out[0] is HISTORY[0]
    assert out[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_0",
                "content": stub_text,
                "is_error": False,
            },
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": True},
            {"type": "text", "text": "also check b"},
            HISTORY[2]["content"][3],
        ],
    }


@SETTINGS
@given(turns())
def test_generated_histories_round_trip_untouched(plan: Any) -> None:
    items = anthropic_history(plan)
    check_anthropic(items)
    out = codec.encode(untouched_outs(items, codec.decode(items)))
    assert len(out) == len(items)
    assert all(a is b for a, b in zip(out, items, strict=False))


@SETTINGS
@given(turns())
def test_decode_is_deterministic_and_json_shaped(plan: Any) -> None:
    items = anthropic_history(plan)
    first = codec.decode(copy.deepcopy(items))
    second = codec.decode(copy.deepcopy(items))
    assert orjson.dumps([u.message for u in first]) == orjson.dumps([u.message for u in second])
    assert first == second


def signed(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "thinkingSignature": f"sig:{text}"}


@SETTINGS
@given(turns(), st.lists(st.booleans(), max_size=4))
def test_new_messages_encode_to_a_valid_request_and_decode_back(
    plan: Any, summaries: list[bool]
) -> None:
    messages = pi_history(plan, signed, summaries)
    out = codec.encode([Out(m, ()) for m in messages])
    check_anthropic(out)
    back = [m for u in codec.decode(out) for m in unit_messages(u.message)]
    # adjacent user messages (a summary, a compressed chain, the next prompt) are one message
    assert essentials(back) == merge_users(essentials(messages))


def test_errored_turns_and_missing_results() -> None:
    def assistant(stop: str, *ids: str) -> dict[str, Any]:
        blocks = [{"type": "toolCall", "id": i, "name": "read", "arguments": {}} for i in ids]
        return {"role": "assistant", "content": blocks, "stopReason": stop}

    result = {
        "role": "toolResult",
        "toolCallId": "c2",
        "toolName": "read",
        "content": [{"type": "text", "text": "r"}],
        "isError": False,
    }
    messages = [
        {"role": "user", "content": "go"},
        assistant("error", "e1"),
        {"role": "user", "content": "retry"},
        assistant("toolUse", "c1", "c2"),
        result,
    ]
    out = codec.encode([Out(m, ()) for m in messages])
    check_anthropic(out)
    assert out[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "go"}, {"type": "text", "text": "retry"}],
    }
    assert out[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c2", "content": "r", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "c1",
            "content": "No result provided",
            "is_error": True,
        },
    ]


def test_thinking_without_signature_is_sent_as_text_and_image_results_keep_images() -> None:
    image = {"type": "image", "data": PNG, "mimeType": "image/png"}
    messages = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plain"},
                {"type": "text", "text": "  "},
                {"type": "toolCall", "id": "s", "name": "shot", "arguments": {}},
            ],
            "stopReason": "toolUse",
        },
        {
            "role": "toolResult",
            "toolCallId": "s",
            "toolName": "shot",
            "content": [image],
            "isError": False,
        },
    ]
    out = codec.encode([Out(m, ()) for m in messages])
    check_anthropic(out)
    assert out[1]["content"] == [
        {"type": "text", "text": "plain"},
        {"type": "tool_use", "id": "s", "name": "shot", "input": {}},
    ]
    assert out[2]["content"][0]["content"] == [
        {"type": "text", "text": "(see attached image)"},
        {"type": "image", "source": SOURCE},
    ]


@pytest.mark.parametrize("compact", [False, True])
def test_a_real_render_encodes_to_a_valid_smaller_request(compact: bool) -> None:
    items = anthropic_history(big_plan())
    units = codec.decode(items)
    assert sum(isinstance(u.message, list) for u in units) == 6  # two results per step
    driven = drive(items, units, compact=compact)
    out = codec.encode(driven.outs)
    check_anthropic(out)
    kept = [item for o in driven.outs for item in o.items]
    assert jsjson.length(out) * 2 < jsjson.length(items)
    if compact:
        assert jsjson.dumps(out).count("<compressed-chain") == 3
        # each prompt is merged with the compressed chain that follows it
        assert [m["role"] for m in out] == ["user", "assistant"] * 3
        for turn, message in enumerate(out[::2]):
            first, chain = message["content"]
            assert first == {"type": "text", "text": f"prompt {turn}"}
            assert chain["text"].startswith("<compressed-chain")
        apart = AnthropicMessagesCodec(merge_same_role=False).encode(driven.outs)
        check_anthropic(apart, alternate=False)
        assert [i for i in apart if any(i is k for k in kept)] == kept
        assert len(kept) == 3
        return
    assert [i for i in out if any(i is k for k in kept)] == kept
    stubs = stub_texts(driven.rendered.messages)
    assert len(stubs) == 12
    sent = [
        b["content"]
        for m in out
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert sent == stubs
    assert len(kept) == 12  # prompts and assistants; the result messages are rebuilt


def test_cache_control_does_not_hide_calls_or_text() -> None:
    cache = {"type": "ephemeral"}
    history = [
        {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": cache}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "read", "input": {}, "cache_control": cache}
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]},
    ]
    units = codec.decode(history)
    assert units[0].message == {
        "role": "user",
        "content": [{"type": "text", "text": "go", "cache_control": cache}],
    }
    assert isinstance(units[1].message, dict)
    assert units[1].message["content"] == [
        {"type": "toolCall", "id": "t", "name": "read", "arguments": {}}
    ]
    assert isinstance(units[2].message, dict)
    assert units[2].message["toolName"] == "read"
    rebuilt = codec.encode([Out(m, ()) for u in units for m in unit_messages(u.message)])
    check_anthropic(rebuilt)
    assert rebuilt[0] == history[0]
