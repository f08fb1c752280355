"""Render (spec 04) end to end over message dicts: stubs, grace, error purge, chain-range prune,
orphan sweep, sizes, the no-op contract and object identity.

Expected bytes and texts come from the spec (04 section 8 worked examples, the templates of
sections 3-6) and from the reference's tests (src/pruner.test.ts, src/chain-range-prune.test.ts,
src/orphan-sweep.test.ts, src/recovery-grace.test.ts, src/error-purge.test.ts), never from this
implementation's output.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import RenderDiagnostic, RenderResult, render
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from support.builders import (
    NO_CHAIN,
    assert_sizes,
    assistant,
    call,
    cfg,
    chain_entry,
    dumps,
    example,
    protected_chain,
    record,
    result,
    state_with,
    summary_msg,
    text,
    thinking,
    user,
    utf16_len,
)

SUMMARY_STUB = (
    "[Summarized in pruner summary, ref `{}`. Use context_tree_query to retrieve full output.]"
)


def test_worked_example_phase_one_stub_bytes() -> None:
    messages, state = example()
    res = render(messages, state, NO_CHAIN)
    assert res.pruned
    assert dumps(res.messages[2]) == (
        '{"role":"toolResult","toolCallId":"tc1","toolName":"bash","content":[{"type":"text",'
        '"text":"[Summarized in pruner summary, ref `t1`. Use context_tree_query to retrieve '
        'full output.]"}],"isError":false,"timestamp":300}'
    )
    # Untouched messages are the caller's objects; the list is new.
    assert res.messages is not messages
    for i in (0, 1, 3):
        assert res.messages[i] is messages[i]
    assert_sizes(messages, res)
    assert res.before_chars > res.after_chars


def test_worked_example_chain_bytes() -> None:
    messages, state = example()
    original = copy.deepcopy(messages)
    res = render(messages, state, cfg())
    assert dumps(res.messages) == (
        '[{"role":"user","content":[{"type":"text","text":"go"}],"timestamp":100},'
        '{"role":"user","content":[{"type":"text","text":"<compressed-chain id=\\"b1\\" '
        'tools=\\"t1\\">\\nS\\n</compressed-chain>"}],"timestamp":9000},'
        '{"role":"assistant","content":[{"type":"text","text":"done"}],"api":"anthropic",'
        '"provider":"anthropic","model":"x","usage":{},"stopReason":"stop","timestamp":400}]'
    )
    assert res.messages[0] is messages[0]
    # The stripped final assistant is a copy; its kept blocks are the original objects.
    assert res.messages[2] is not messages[3]
    assert res.messages[2]["content"][0] is messages[3]["content"][1]
    assert messages == original  # no input object mutated
    assert res.diagnostics == ()
    assert_sizes(messages, res)


def test_rendering_the_render_again_is_deep_equal_and_still_pruned() -> None:
    messages, state = example()
    first = render(messages, state, cfg())
    second = render(first.messages, state, cfg())
    assert second.messages == first.messages
    # Phase 3 returns a new list whenever an entry is accepted.
    assert second.pruned
    assert second.messages is not first.messages


# ---------------------------------------------------------------------------- no-op contract


def test_nothing_to_do_returns_the_same_list_and_zero_sizes() -> None:
    messages = [user(1), assistant(2, call("a")), result("a", 3), assistant(4, text("ok"))]
    res = render(messages, PrunerState(), cfg())
    assert res == RenderResult(messages, False, 0, 0, (), False)
    assert res.messages is messages


def test_empty_list() -> None:
    messages: list[Any] = []
    res = render(messages, PrunerState(), cfg())
    assert res.messages is messages
    assert not res.pruned


def test_size_counts_hidden_fields_in_utf16_units() -> None:
    messages = [
        user(1, "\U0001f600 emoji"),
        assistant(2, thinking("t" * 300), call("a", cmd="x")),
        result("a", 3, "\U0001f600" * 100),
    ]
    state = state_with(record("a", 3), refs=(("t1", "a", 3),))
    res = render(messages, state, cfg())
    assert res.pruned
    assert_sizes(messages, res)


# ---------------------------------------------------------------------------- phase 1


def test_absent_timestamp_legacy_record_worked_example() -> None:
    state = state_with(record("L", None))
    messages = [assistant(1, call("L")), result("L", None)]
    res = render(messages, state, NO_CHAIN)
    assert dumps(res.messages[1]) == (
        '{"role":"toolResult","toolCallId":"L","toolName":"bash","content":[{"type":"text",'
        '"text":"[Summarized in pruner summary, ref `L`. Use context_tree_query to retrieve '
        'full output.]"}],"isError":false}'
    )


def test_stub_copies_null_and_omits_absent_fields() -> None:
    state = state_with(record("n", None))
    msg = {"role": "toolResult", "toolCallId": "n", "toolName": None, "content": [], "extra": 1}
    res = render([assistant(1, call("n")), msg], state, NO_CHAIN)
    assert res.messages[1] == {
        "role": "toolResult",
        "toolCallId": "n",
        "toolName": None,
        "content": [{"type": "text", "text": SUMMARY_STUB.format("n")}],
        "isError": False,
    }
    assert list(res.messages[1]) == ["role", "toolCallId", "toolName", "content", "isError"]


def test_spill_stub_worked_example() -> None:
    rec = record(
        "s",
        7,
        name="fetch",
        resultText="",
        spillPath="/b/s_7.txt",
        spillBytes=99,
        resultPreview="HEAD",
    )
    state = state_with(rec, refs=(("t4", "s", 7),))
    res = render([assistant(1, call("s")), result("s", 7, name="fetch")], state, NO_CHAIN)
    assert dumps(res.messages[1]["content"][0]["text"]) == (
        '"[Oversized output spilled to file \u2014 99 bytes.]\\nTool: fetch\\nPreview (head):\\n'
        "HEAD\\nFull output \u2014 read this file (offset/limit supported): /b/s_7.txt\\n"
        'Or use context_tree_query with ref `t4`."'
    )


def test_spill_stub_tolerates_absent_bytes_and_preview() -> None:
    rec = record("s", 7, name="fetch", resultText="", spillPath="/b/s_7.txt")
    state = state_with(rec, refs=(("t4", "s", 7),))
    res = render([assistant(1, call("s")), result("s", 7)], state, NO_CHAIN)
    assert res.messages[1]["content"][0]["text"] == (
        "[Oversized output spilled to file \u2014 ? bytes.]\nTool: fetch\nPreview (head):\n\n"
        "Full output \u2014 read this file (offset/limit supported): /b/s_7.txt\n"
        "Or use context_tree_query with ref `t4`."
    )


def test_occurrence_keyed_stubbing() -> None:
    # bash_23 summarized at 1150; a live reuse at 9000 stays verbatim.
    state = state_with(record("bash_23", 1150), refs=(("t1", "bash_23", 1150),))
    messages = [
        assistant(1, call("bash_23")),
        result("bash_23", 1150),
        assistant(2, call("bash_23")),
        result("bash_23", 9000),
    ]
    res = render(messages, state, NO_CHAIN)
    assert res.messages[1]["content"][0]["text"] == SUMMARY_STUB.format("t1")
    assert res.messages[3] is messages[3]


def test_timestamped_result_without_record_is_never_stubbed() -> None:
    state = state_with(record("x", 5))
    messages = [assistant(1, call("x")), result("x", 6)]
    assert render(messages, state, NO_CHAIN).messages is messages


def test_mixed_legacy_and_occurrence_fails_closed() -> None:
    state = state_with(record("m", None), record("m", 5))
    messages = [assistant(1, call("m")), result("m", 6)]
    assert render(messages, state, NO_CHAIN).messages is messages


def test_accepted_legacy_collision_stubs_a_live_result() -> None:
    state = state_with(record("bash_7", None))
    messages = [assistant(1, call("bash_7")), result("bash_7", 4242)]
    res = render(messages, state, NO_CHAIN)
    assert res.messages[1]["content"][0]["text"] == SUMMARY_STUB.format("bash_7")
    assert res.messages[1]["timestamp"] == 4242


def test_dedup_alias_is_stubbed_with_its_original_ref() -> None:
    state = state_with(record("orig", 1), refs=(("t1", "orig", 1),))
    state.register_duplicate("dup@2", "orig@1")
    messages = [assistant(1, call("dup")), result("dup", 2)]
    res = render(messages, state, NO_CHAIN)
    assert res.messages[1]["content"][0]["text"] == SUMMARY_STUB.format("t1")


def test_render_time_protection_by_path_and_by_name() -> None:
    rec = record("r", 1, name="read", args={"path": "C:\\w\\skills\\x\\SKILL.md"})
    state = state_with(rec)
    messages = [assistant(1, call("r", "read")), result("r", 1, name="read")]
    # Default protectedPaths covers **/skills/**/*.md (backslashes normalized).
    assert render(messages, state, NO_CHAIN).messages is messages
    unprotected = cfg(chainCompression={"enabled": False}, protectedPaths=[])
    assert render(messages, state, unprotected).pruned
    by_name = cfg(chainCompression={"enabled": False}, protectedPaths=[], protectedTools=["read"])
    assert render(messages, state, by_name).messages is messages


def test_reference_mode_string_protected_tools_match_by_substring() -> None:
    # 07 section 3: a string protectedTools does substring matching (String.includes).
    state = state_with(record("r", 1, name="read"))
    messages = [assistant(1, call("r", "read")), result("r", 1, name="read")]
    settings = {"enabled": True, "chainCompression": {}, "protectedPaths": []}
    config = Config.from_settings_dict(
        {**settings, "protectedTools": "bash,read"}, compat="reference"
    )
    assert render(messages, state, config).messages is messages
    other = Config.from_settings_dict({**settings, "protectedTools": "bash"}, compat="reference")
    assert render(messages, state, other).pruned


def recovery_session(later_users: int) -> list[dict[str, Any]]:
    msgs = [
        user(1),
        assistant(2, call("q", "context_tree_query", toolCallIds=["t1"])),
        result("q", 3, "recovered", name="context_tree_query"),
        assistant(4, text("ok")),
    ]
    for k in range(later_users):
        msgs += [user(10 + 2 * k), assistant(11 + 2 * k, text("ok"))]
    return msgs


@pytest.mark.parametrize(
    ("later_users", "grace", "stubbed"),
    [(0, 3, False), (3, 3, False), (4, 3, True), (0, 0, True)],
)
def test_recovery_grace_window(later_users: int, grace: int, stubbed: bool) -> None:
    state = state_with(record("q", 3, name="context_tree_query"), refs=(("t9", "q", 3),))
    messages = recovery_session(later_users)
    res = render(
        messages, state, cfg(chainCompression={"enabled": False}, recoveryGraceTurns=grace)
    )
    assert (res.messages[2] is not messages[2]) is stubbed


def test_grace_does_not_cover_other_tools() -> None:
    state = state_with(record("b", 3))
    messages = [user(1), assistant(2, call("b")), result("b", 3)]
    assert render(messages, state, NO_CHAIN).pruned


def test_protected_recovery_output_stays_verbatim_with_grace_off() -> None:
    state = state_with(record("q", 3, name="context_tree_query"))
    settings = {"chainCompression": {"enabled": False}, "recoveryGraceTurns": 0}
    config = cfg(protectedTools=["context_tree_query"], **settings)
    messages = recovery_session(9)
    assert render(messages, state, config).messages is messages


def test_spilled_recovery_output_in_grace_then_spill_stubbed() -> None:
    rec = record(
        "q",
        3,
        name="context_tree_query",
        resultText="",
        spillPath="/b/q_3.txt",
        spillBytes=70000,
        resultPreview="P",
    )
    state = state_with(rec, refs=(("t2", "q", 3),))
    in_grace = recovery_session(1)
    assert render(in_grace, state, NO_CHAIN).messages is in_grace
    past = render(recovery_session(5), state, NO_CHAIN)
    assert past.messages[2]["content"][0]["text"].startswith(
        "[Oversized output spilled to file \u2014 70000 bytes.]"
    )


def test_graced_occurrence_does_not_protect_another_occurrence() -> None:
    state = state_with(record("q", 3, name="context_tree_query"), record("q", 90, name="x"))
    messages = recovery_session(5)
    messages += [assistant(89, call("q", "context_tree_query")), result("q", 90, name="x")]
    res = render(messages, state, NO_CHAIN)
    assert res.messages[2] is not messages[2]  # past the window
    assert res.messages[-1] is not messages[-1]  # not a recovery output: stubbed


# ---------------------------------------------------------------------------- phase 2


def purge_session(args: dict[str, Any], later: int = 2) -> list[dict[str, Any]]:
    msgs = [
        user(1),
        assistant(100, text("writing"), call("tc-err", "write", **args)),
        result("tc-err", 110, "Error: permission denied", isError=True),
    ]
    for k in range(later):
        msgs += [assistant(200 + k, call(f"ok{k}")), result(f"ok{k}", 210 + k, "ok")]
    return msgs


PURGE_ARGS = {"path": "/a", "content": "\U0001f600" * 300}  # JSON.stringify length 626


def test_errored_args_are_purged_after_the_cooldown() -> None:
    messages = purge_session(PURGE_ARGS)
    original = copy.deepcopy(messages)
    res = render(messages, PrunerState(), NO_CHAIN)
    purged = res.messages[1]
    assert purged is not messages[1]
    assert purged["content"][0] is messages[1]["content"][0]
    block = purged["content"][1]
    assert list(block) == ["type", "id", "name", "arguments"]
    # 2.11.3 (#19): keys kept, only the long string replaced (its UTF-16 length)
    assert (
        dumps(block["arguments"])
        == '{"path":"/a","content":"<purged-errored-args size=\\"600\\"/>"}'
    )
    assert messages == original
    for i in (0, 2, 3, 4, 5, 6):
        assert res.messages[i] is messages[i]


def test_purge_keeps_the_arguments_key_position() -> None:
    messages = purge_session({})
    block = {"arguments": {"content": "x" * 600}, "type": "toolCall", "id": "tc-err", "name": "w"}
    messages[1]["content"][1] = block
    res = render(messages, PrunerState(), NO_CHAIN)
    assert list(res.messages[1]["content"][1]) == ["arguments", "type", "id", "name"]


def test_purge_respects_cooldown_and_min_size() -> None:
    assert render(purge_session(PURGE_ARGS, later=1), PrunerState(), NO_CHAIN).pruned is False
    small = purge_session({"content": "x" * 100})
    assert render(small, PrunerState(), NO_CHAIN).messages is small


def test_purge_thresholds_from_config() -> None:
    config = cfg(chainCompression={"enabled": False}, purgeErrors={"cooldownTurns": 5})
    assert not render(purge_session(PURGE_ARGS, later=4), PrunerState(), config).pruned
    config = cfg(chainCompression={"enabled": False}, purgeErrors={"enabled": False})
    assert not render(purge_session(PURGE_ARGS), PrunerState(), config).pruned


def test_partial_purge_config_in_reference_mode_purges_immediately() -> None:
    config = Config.from_settings_dict(
        {"enabled": True, "purgeErrors": {"enabled": True}, "chainCompression": {}},
        compat="reference",
    )
    messages = purge_session({"c": "x" * 201}, later=0)
    res = render(messages, PrunerState(), config)
    assert res.messages[1]["content"][1]["arguments"] == {"c": '<purged-errored-args size="201"/>'}
    # arguments without a long string are kept however large (2.11.3)
    messages = purge_session({"c": ["x" * 200] * 3}, later=0)
    assert render(messages, PrunerState(), config).messages is messages


# Expected values: the pi-condense 2.11.3 reference runner's render of this session
# (tests/data/conformance/harness/render.ts, config {"enabled": true, chain compression off}).
SHRINK_ARGS: dict[str, Any] = {
    "path": "/a",
    "content": "x" * 201,
    "keep": "k" * 200,
    "emoji": "\U0001f600" * 100,
    "emoji2": "\U0001f600" * 101,
    "n": [1, 2.5, None, True, "y" * 250, {"z": ["w" * 300]}],
    "o": {},
}
SHRUNK_ARGS: dict[str, Any] = {
    **SHRINK_ARGS,
    "content": '<purged-errored-args size="201"/>',
    "emoji2": '<purged-errored-args size="202"/>',
    "n": [
        1,
        2.5,
        None,
        True,
        '<purged-errored-args size="250"/>',
        {"z": ['<purged-errored-args size="300"/>']},
    ],
}


def test_purge_replaces_only_long_strings_keeping_keys_types_and_lengths() -> None:
    messages = purge_session(SHRINK_ARGS)
    calls = [
        ("e2", {"parts": ["p" * 100] * 8}),  # 1,000 chars of arguments, no string over 200
        ("e3", "s" * 600),  # a string as the whole arguments
    ]
    for call_id, args in calls:
        messages[1]["content"].append(
            {"type": "toolCall", "id": call_id, "name": "write", "arguments": args}
        )
        messages.insert(3, result(call_id, 111, "Error: permission denied", isError=True))
    original = copy.deepcopy(messages)
    res = render(messages, PrunerState(), NO_CHAIN)
    blocks = res.messages[1]["content"]
    assert blocks[1]["arguments"] == SHRUNK_ARGS
    assert blocks[1]["arguments"]["o"] is messages[1]["content"][1]["arguments"]["o"]
    assert blocks[2] is messages[1]["content"][2]
    assert blocks[3]["arguments"] == '<purged-errored-args size="600"/>'
    assert messages == original
    # the reference's beforeChars - afterChars for its session (other ids and timestamps)
    assert res.before_chars - res.after_chars == 4764 - 3386


def test_summarized_errored_result_is_no_longer_purged() -> None:
    state = state_with(record("tc-err", 110, name="write"))
    messages = purge_session(PURGE_ARGS)
    res = render(messages, state, NO_CHAIN)
    assert res.messages[1] is messages[1]
    assert res.messages[2]["isError"] is False


def test_missing_arguments_throw_and_keep_the_list() -> None:
    messages = purge_session(PURGE_ARGS)
    del messages[1]["content"][1]["arguments"]
    res = render(messages, PrunerState(), NO_CHAIN)
    assert res.threw
    assert res.messages is messages
    assert (res.pruned, res.before_chars, res.after_chars) == (False, 0, 0)


@pytest.mark.parametrize("kind", ["deep", "circular"])
def test_a_message_json_stringify_refuses_throws_and_keeps_the_list(kind: str) -> None:
    # JSON.stringify throws on a cycle (TypeError) and past its stack (RangeError); our
    # serializer refuses beyond jsjson.MAX_DEPTH levels, so the render throws as the
    # reference's measuring of the input does.
    messages, state = example()
    value: Any
    if kind == "deep":
        value = []
        for _ in range(jsjson.MAX_DEPTH + 5):
            value = [value]
    else:
        value = {}
        value["self"] = value
    messages[0] = {**messages[0], "extra": value}
    res = render(messages, state, NO_CHAIN)
    assert res == RenderResult(messages, False, 0, 0, (), True)
    assert res.messages is messages
    # Just within the limit it renders.
    if kind == "deep":
        value = []
        for _ in range(jsjson.MAX_DEPTH - 10):
            value = [value]
        messages[0] = {**messages[0], "extra": value}
        fine = render(messages, state, NO_CHAIN)
        assert fine.pruned
        assert not fine.threw
        assert_sizes(messages, fine)


def test_non_array_assistant_content_throws() -> None:
    messages = [user(1), {"role": "assistant", "content": "plain", "timestamp": 2}]
    res = render(messages, PrunerState(), NO_CHAIN)
    assert res.threw
    assert res.messages is messages


# ---------------------------------------------------------------------------- phase 3


def chain_state(**entry: Any) -> PrunerState:
    state = PrunerState()
    state.register_chain(chain_entry("b1", 100, 400, 9000, droppedToolCallIds=["tc1"], **entry))
    return state


def chain_messages() -> list[dict[str, Any]]:
    return [
        user(100),
        assistant(200, call("tc1")),
        result("tc1", 300),
        assistant(400, thinking(), text("done")),
    ]


def synthetic_text(res: RenderResult) -> str:
    texts = [
        m["content"][0]["text"]
        for m in res.messages
        if m["role"] == "user" and m["content"][0]["text"].startswith("<compressed-chain")
    ]
    assert len(texts) == 1
    return str(texts[0])


def test_range_summary_text_is_preferred() -> None:
    state = chain_state(
        rangeSummaryText="FUSED cohesive summary", droppedOccurrenceKeys=["tc1@300"]
    )
    state.register_summary_body(["tc1@300"], "per-batch concat body")
    res = render(chain_messages(), state, cfg())
    assert synthetic_text(res) == (
        '<compressed-chain id="b1" tools="">\nFUSED cohesive summary\n</compressed-chain>'
    )


def test_empty_body_format() -> None:
    res = render(chain_messages(), chain_state(), cfg())
    assert synthetic_text(res) == '<compressed-chain id="b1" tools="">\n\n</compressed-chain>'


def test_thinking_strip_is_configurable() -> None:
    messages = chain_messages()
    off = cfg(chainCompression={"enabled": True, "stripFinalAssistantThinking": False})
    res = render(messages, chain_state(), off)
    assert res.messages[-1] is messages[-1]
    on = render(messages, chain_state(), cfg())
    assert [b["type"] for b in on.messages[-1]["content"]] == ["text"]


def test_chain_compression_disabled_skips_phase_three() -> None:
    messages = chain_messages()
    assert render(messages, chain_state(), NO_CHAIN).messages is messages


def test_protected_outputs_are_relocated() -> None:
    messages, state = protected_chain()
    res = render(messages, state, cfg())
    assert synthetic_text(res) == (
        '<compressed-chain id="b2" tools="t7">\nS\n\n<protected-output tool="read">\n'
        "SKILL BODY\nline 2\n</protected-output>\n</compressed-chain>"
    )
    assert [m["role"] for m in res.messages] == ["user", "user", "assistant"]


def test_relocated_protected_outputs_carry_image_markers() -> None:
    # pi-condense 2.11.2: one marker line per image block, then the texts. Expected text: the
    # 2.11.3 reference's extractToolResultText of this content (batch-capture.ts, run in Deno).
    messages, state = protected_chain()
    messages[2]["content"] = [
        {"type": "text", "text": "SKILL BODY"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "text", "text": "line 2"},
        {"type": "image", "data": "R0lGODlh", "mimeType": "image/gif"},
    ]
    res = render(messages, state, cfg())
    assert synthetic_text(res) == (
        '<compressed-chain id="b2" tools="t7">\nS\n\n<protected-output tool="read">\n'
        "[image returned: image/png sha256:929e08d5]\n[image returned: image/gif sha256:ccfa6192]"
        "\nSKILL BODY\nline 2\n</protected-output>\n</compressed-chain>"
    )


def test_user_and_foreign_custom_messages_inside_a_range_survive() -> None:
    messages = chain_messages()
    foreign = {"role": "custom", "customType": "other", "content": "x", "timestamp": 250}
    bash = {"role": "bashExecution", "command": "ls", "output": "", "timestamp": 260}
    inner_user = user(270, "interjection")
    messages[2:2] = [foreign, bash, inner_user]
    res = render(messages, chain_state(), cfg())
    kept = [m for m in res.messages if m is foreign or m is bash or m is inner_user]
    assert kept == [foreign, bash, inner_user]
    assert all(m["role"] not in ("toolResult",) for m in res.messages)


def test_per_batch_summaries_are_suppressed_by_coverage() -> None:
    messages = chain_messages()
    after_final = summary_msg(500, [{"shortId": "t1", "toolCallId": "tc1", "resultTimestamp": 300}])
    live_reuse = summary_msg(600, [{"shortId": "t2", "toolCallId": "tc1", "resultTimestamp": 999}])
    legacy_ids = {
        "role": "custom",
        "customType": "context-prune-summary",
        "content": "legacy",
        "display": False,
        "details": {"toolCallIds": ["tc1"]},
        "timestamp": 700,
    }
    bare_ref = summary_msg(800, [{"shortId": "tc1", "toolCallId": "tc1"}])
    messages += [after_final, live_reuse, legacy_ids, bare_ref]
    res = render(messages, chain_state(droppedOccurrenceKeys=["tc1@300"]), cfg())
    customs = [m for m in res.messages if m["role"] == "custom"]
    assert customs == [live_reuse, legacy_ids]
    assert customs[0] is live_reuse


def test_nested_block_placeholders() -> None:
    messages = [user(10), assistant(20, text("a")), *chain_messages()]
    state = PrunerState()
    state.register_chain(chain_entry("b1", 1, 2, 1, rangeSummaryText="FIRST {b2}"))
    state.register_chain(
        chain_entry(
            "b2",
            100,
            400,
            9,
            droppedToolCallIds=["tc1"],
            rangeSummaryText="see {b1} and {b2} and {b3} and {b01}",
        )
    )
    res = render(messages, state, cfg())
    assert synthetic_text(res) == (
        '<compressed-chain id="b2" tools="">\nsee FIRST {b2} and {b2} and {b3} and {b01}\n'
        "</compressed-chain>"
    )


def test_unresolved_range_reports_a_diagnostic_and_changes_nothing() -> None:
    messages = chain_messages()
    state = PrunerState()
    state.register_chain(chain_entry("b4", 100, 777, 1))
    res = render(messages, state, cfg())
    assert res.messages is messages
    assert res.diagnostics == (
        RenderDiagnostic("unresolved-range", "b4", "blockId=b4 start=100 final=777"),
    )
    assert res.diagnostics[0].entry_data() == {
        "kind": "unresolved-range",
        "detail": "blockId=b4 start=100 final=777",
    }
    assert res.diagnostics[0].sink_key == "unresolved-range:b4"


def test_an_unresolved_ranges_block_id_keeps_its_lone_surrogate() -> None:
    # `blockId=${entry.blockId}`: a template literal keeps the lone surrogate.
    state = PrunerState()
    state.register_chain(chain_entry("b\ud800", 100, 777, 1))
    res = render(chain_messages(), state, cfg())
    assert res.diagnostics == (
        RenderDiagnostic("unresolved-range", "b\ud800", "blockId=b\ud800 start=100 final=777"),
    )


def test_null_final_timestamp_never_resolves() -> None:
    state = PrunerState()
    state.register_chain(chain_entry("b5", 100, None, 1))
    res = render(chain_messages(), state, cfg())
    assert [d.detail for d in res.diagnostics] == ["blockId=b5 start=100 final=null"]


def test_duplicate_timestamps_fail_closed() -> None:
    messages = [*chain_messages(), user(100)]
    res = render(messages, chain_state(), cfg())
    assert res.messages is messages
    assert res.diagnostics[0].kind == "unresolved-range"


@pytest.mark.parametrize(("outer", "inner"), [("b1", "b2"), ("b1\udc00", "b2\ud800")])
def test_nested_range_is_skipped(outer: str, inner: str) -> None:
    messages = [
        user(100),
        assistant(150, call("a")),
        result("a", 160),
        user(200),
        assistant(250, call("b")),
        result("b", 260),
        assistant(300, text("inner done")),
        assistant(400, text("done")),
    ]
    state = PrunerState()
    state.register_chain(chain_entry(outer, 100, 400, 1, droppedToolCallIds=["a", "b"]))
    state.register_chain(chain_entry(inner, 200, 300, 2, droppedToolCallIds=["b"]))
    res = render(messages, state, cfg())
    # The block ids as they are (a template literal keeps a lone surrogate).
    assert res.diagnostics == (
        RenderDiagnostic(
            "unresolved-range",
            f"overlap:{inner}",
            f"blockId={inner} skipped: range nests inside blockId={outer}",
        ),
    )
    assert [m["timestamp"] for m in res.messages] == [100, 1, 200, 400]


@pytest.mark.parametrize("block", ["b1", "b1\udfff"])
def test_range_id_mismatch_is_diagnostic_only(block: str) -> None:
    messages = chain_messages()
    state = PrunerState()
    state.register_chain(chain_entry(block, 100, 400, 9, droppedToolCallIds=["tc1", "gone@5"]))
    res = render(messages, state, cfg())
    assert res.diagnostics == (
        RenderDiagnostic("range-id-mismatch", block, f"blockId={block} recorded=2 actual=1"),
    )
    assert len(res.messages) == 3


# ---------------------------------------------------------------------------- phase 4


def sha16(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def test_orphan_result_is_swept_with_a_diagnostic() -> None:
    messages = [user(1), result("a", 2), assistant(3, text("ok"))]
    res = render(messages, PrunerState(), cfg())
    assert res.messages == [messages[0], messages[2]]
    assert res.messages[0] is messages[0]
    assert res.diagnostics == (
        RenderDiagnostic("orphan-sweep", sha16("a"), "swept 1 orphan toolResult(s): a"),
    )
    assert_sizes(messages, res)


def test_orphan_ids_keep_their_lone_surrogates_in_the_sweep_diagnostic() -> None:
    # The reference sorts the ids by UTF-16 code units (0xDFFF before 0xE000), prints them
    # as they are and hashes their UTF-8 (Node: a lone surrogate as U+FFFD). Its detail for
    # the first id is in data/differential/surrogates2000-default/session.jsonl.
    messages = [user(1), result("a\ue000", 2), result("toolu_2000_002\udc01", 3)]
    messages.insert(2, result("a\udfff", 2))
    res = render(messages, PrunerState(), cfg())
    assert res.messages == [messages[0]]
    ids = "a\udfff, a\ue000, toolu_2000_002\udc01"
    assert res.diagnostics == (
        RenderDiagnostic(
            "orphan-sweep",
            sha16("a\ufffd,a\ue000,toolu_2000_002\ufffd"),
            f"swept 3 orphan toolResult(s): {ids}",
        ),
    )


def test_large_orphan_set() -> None:
    messages: list[dict[str, Any]] = [user(0)]
    ids = [f"id{k:02d}" for k in range(12)]
    messages += [result(i, k) for k, i in enumerate(reversed(ids))]
    res = render(messages, PrunerState(), cfg())
    assert res.diagnostics == (
        RenderDiagnostic(
            "orphan-sweep",
            sha16(",".join(ids)),
            "swept 12 orphan toolResult(s): id00, id01, id02, id03, id04 ... +7 more",
        ),
    )


def test_orphan_barrier_semantics() -> None:
    clean = [assistant(1, call("a"), call("b")), result("a", 2), result("b", 3), user(4)]
    assert render(clean, PrunerState(), cfg()).messages is clean
    barrier = {"role": "custom", "customType": "x", "content": "", "timestamp": 3}
    split = [assistant(1, call("a"), call("b")), result("a", 2), barrier, result("b", 4)]
    res = render(split, PrunerState(), cfg())
    assert res.messages == split[:3]
    duplicate = [assistant(1, call("a")), result("a", 2), result("a", 3)]
    assert render(duplicate, PrunerState(), cfg()).messages == duplicate[:2]


def test_chain_interior_orphans_are_not_left_behind() -> None:
    # A live turn reusing a compressed chain's id keeps its result.
    messages = [
        user(100),
        assistant(110, call("bash_23")),
        result("bash_23", 120),
        assistant(130, text("done")),
        user(200),
        assistant(210, call("bash_23")),
        result("bash_23", 220),
    ]
    state = PrunerState()
    state.register_chain(chain_entry("b1", 100, 130, 1, droppedToolCallIds=["bash_23"]))
    res = render(messages, state, cfg())
    assert res.messages[-1] is messages[-1]
    assert res.diagnostics == ()


def test_render_result_reports_throw_diagnostics() -> None:
    # An unresolved entry is reported before phase 4 throws on a non-array assistant content.
    messages = [user(1), {"role": "assistant", "content": None, "timestamp": 2}]
    state = PrunerState()
    state.register_chain(chain_entry("b9", 50, 60, 1))
    res = render(messages, state, cfg())
    assert res.threw
    assert res.messages is messages
    assert [d.dedup_key for d in res.diagnostics] == ["b9"]


def test_sizes_sum_the_messages_and_price_images_flat() -> None:
    # Expected 13480 / 7125: the pi-condense 2.11.3 reference's render (reference runner,
    # render.ts) of this same session, not our output. 2.11.2 sums per-message JSON lengths
    # and counts an image block as {"type":"image"} plus 1,600 tokens of 4 chars.
    img = {"type": "image", "data": "QUJD" * 50, "mimeType": "image/png"}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "look"}], "timestamp": 1000},
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.png"}}
            ],
            "stopReason": "toolUse",
            "timestamp": 1001,
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [{"type": "text", "text": "Read image file [image/png]"}, img],
            "isError": False,
            "timestamp": 1002,
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a cat"}],
            "stopReason": "stop",
            "timestamp": 1003,
        },
        {
            "role": "user",
            "content": [{"type": "text", "text": "again"}, dict(img)],
            "timestamp": 1004,
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "stopReason": "stop",
            "timestamp": 1005,
        },
    ]
    state = state_with(record("c1", 1002, name="read", args={"path": "a.png"}))
    res = render(messages, state, cfg())
    assert res.pruned
    assert (res.before_size, res.after_size) == (13480, 7125)
    assert res.before_chars == utf16_len(dumps(messages))


# ---------------------------------------------------------------------------- lone surrogates


def test_an_image_type_keeps_its_lone_surrogate_in_a_chains_protected_output(
    tmp_path: Path,
) -> None:
    # The cold render of pi-condense 2.11.3 (data/differential/surrogates2000-tight): a
    # compressed chain copies a protected screenshot's text, whose marker names the image's
    # type as it is ("image/x\ud83d").
    case = Path(__file__).parents[1] / "data" / "differential" / "surrogates2000-tight"
    session_path = tmp_path / "session.jsonl"
    session_path.write_bytes(gzip.decompress((case / "session.jsonl.gz").read_bytes()))
    expected = json.loads(gzip.decompress((case / "render.json.gz").read_bytes()))["messages"]
    settings = json.loads((case / "config.json").read_text("utf-8"))
    session = SessionFile.load(session_path)
    res = render(
        list(session.build_context().messages),
        PrunerState.from_session(session),
        Config.from_settings_dict(settings, compat="reference"),
    )
    # As JSON.stringify writes it: the lone surrogate as an escape.
    marker = r"[image returned: image/x\ud83d sha256:3765c2fa]"
    chains = [m for m in expected if marker in jsjson.dumps(m)]
    assert len(chains) == 1
    assert [m for m in res.messages if marker in jsjson.dumps(m)] == chains
    assert jsjson.dumps(res.messages) == jsjson.dumps(expected)
