"""Capture, rescan, frontier trim and grouping (spec 05 sections 2-6)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Optional

import pytest

from pi_condense._core import tool_call_args_member
from pi_condense.branch_facts import branch_facts
from pi_condense.capture import (
    CapturedBatch,
    branch_turn_index,
    capture_batch,
    extract_tool_result_text,
    group_batches,
    image_digest,
    is_chain_anchor_custom,
    is_final_assistant,
    protection_predicate,
    rescan_branch,
    trim_batch,
)
from pi_condense.session import ABSENT, SessionFile
from pi_condense.spill import index_records
from pi_condense.state import Frontier, PrunerState, normalize_frontier
from pi_condense.summarize.prompt import batch_prompt
from pi_condense.tools.query import image_marker_digests
from support.agent import assistant, config, result, user


def entries(
    *messages: dict[str, Any], iso: Optional[str] = "2025-01-01T00:00:00.000Z"
) -> list[dict[str, Any]]:
    out = []
    for i, message in enumerate(messages):
        entry: dict[str, Any] = {"type": "message", "id": f"e{i}", "message": message}
        if iso is not None:
            entry["timestamp"] = iso
        out.append(entry)
    return out


def never(name: Any, args: Any) -> bool:
    return False


def frontier(turn: int, call_id: str) -> Frontier:
    return normalize_frontier({"lastAttemptedToolCallId": call_id, "lastAttemptedTurnIndex": turn})


def record(call_id: str, ts: Optional[int], text: str = "x") -> dict[str, Any]:
    rec: dict[str, Any] = {
        "toolCallId": call_id,
        "toolName": "bash",
        "args": {},
        "resultText": text,
        "isError": False,
        "turnIndex": 0,
        "timestamp": 1,
    }
    if ts is not None:
        rec["resultTimestamp"] = ts
    return rec


# ---------------------------------------------------------------------------- live capture


def test_extract_tool_result_text_joins_text_blocks_after_image_markers() -> None:
    message = {
        "content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "...", "mimeType": "image/png"},
            {"type": "text", "text": "b"},
        ]
    }
    digest = hashlib.sha256(b"...").hexdigest()[:8]
    assert extract_tool_result_text(message) == f"[image returned: image/png sha256:{digest}]\na\nb"
    assert extract_tool_result_text({"content": [{"type": "text", "text": "a"}]}) == "a"
    assert extract_tool_result_text({"content": "plain"}) == ""
    assert extract_tool_result_text(None) == ""


def test_a_tool_results_text_reads_its_blocks_as_the_reference_joins_them() -> None:
    # extractToolResultText: `[...markers, ...texts.map(c => c.text)].join("\n")`; Array.join
    # prints undefined and null as "" and other values as String(value).
    message = {
        "content": [
            {"type": "text", "text": ABSENT},
            {"type": "text", "text": None},
            {"type": "text"},
            {"type": "text", "text": 1.0},
            {"type": "text", "text": [1, None, "b"]},
            {"type": "other", "text": "not text"},
            {"type": "image", "data": "QQ==", "mimeType": None},
        ]
    }
    digest = hashlib.sha256(b"QQ==").hexdigest()[:8]
    assert (
        extract_tool_result_text(message)
        == f"[image returned: null sha256:{digest}]\n\n\n\n1\n1,,b"
    )
    # A capture reads `block?.type`: a null block is no part of the text.
    assert extract_tool_result_text({"content": [None, {"type": "text", "text": "a"}]}) == "a"
    assert extract_tool_result_text({"content": {"type": "text", "text": "a"}}) == ""


# The cases of pi-condense 2.11.2's src/batch-capture.test.ts "image markers" (its spec
# doc/specs/2026-09-29: one marker line per image, first 8 hex of sha256 of the base64 data).
def img(data: str, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": data, "mimeType": mime}


def test_image_markers_lead_the_text_in_block_order() -> None:
    text = extract_tool_result_text(
        {
            "content": [
                {"type": "text", "text": "Read image file [image/png]"},
                img("AAAA"),
                img("BBBB", "image/jpeg"),
            ]
        }
    )
    assert text.split("\n") == [
        f"[image returned: image/png sha256:{image_digest('AAAA')}]",
        f"[image returned: image/jpeg sha256:{image_digest('BBBB')}]",
        "Read image file [image/png]",
    ]
    assert image_digest("AAAA") == hashlib.sha256(b"AAAA").hexdigest()[:8]
    only = extract_tool_result_text(
        {"content": [img("AAAA"), {"type": "text", "text": "x"}, img("BBBB")]}
    )
    assert image_marker_digests(only) == [image_digest("AAAA"), image_digest("BBBB")]
    assert image_marker_digests("no markers here") == []


def test_a_long_result_keeps_its_image_marker_in_the_summarizer_input() -> None:
    message = assistant(1, ("r1", "read", {"path": "a.png"}))
    results = [
        {
            "role": "toolResult",
            "toolCallId": "r1",
            "toolName": "read",
            "content": [{"type": "text", "text": "x" * 5000}, img("AAAA")],
            "isError": False,
            "timestamp": 2,
        }
    ]
    out = batch_prompt(capture_batch(message, results, 0, 9999))
    assert f"[image returned: image/png sha256:{image_digest('AAAA')}]" in out


def read_image(
    call_id: str,
    data: str,
    ts: int,
    mime: str = "image/png",
    text: str = "Read image file [image/png]",
) -> CapturedBatch:
    """The batch of one ``read`` whose result is ``text`` and an image."""
    result = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": text}, img(data, mime)],
        "isError": False,
        "timestamp": ts + 1,
    }
    return capture_batch(assistant(ts, (call_id, "read", {"path": "s.png"})), [result], 0, ts)


def test_an_image_type_keeps_its_lone_surrogates_in_the_captured_text() -> None:
    # A JS template literal keeps a lone surrogate; the digest hashes the data's UTF-8. The
    # expected text is the resultText pi-condense 2.11.3 captured for this block (the vector
    # data/differential/surrogates2000-tight, session.jsonl).
    def read(call_id: str, mime: str, ts: int) -> CapturedBatch:
        return read_image(call_id, "iVBORw0KGgo", ts, mime, "Read image file")

    lone = read("r1", "image/p\ud800ng", 100)
    text = lone.tool_calls[0]["resultText"]
    assert text == "[image returned: image/p\ud800ng sha256:904ba1c1]\nRead image file"
    assert image_marker_digests(text) == ["904ba1c1"]
    assert "image/p\ud800ng" in batch_prompt(lone)
    # The content hash reads the text's UTF-8 (Node's `hash.update(string)`: a lone
    # surrogate as U+FFFD), so the same image typed with U+FFFD dedups onto the first.
    state = PrunerState()
    state.add_batch(index_records(lone))
    other = read("r2", "image/p\ufffdng", 200).tool_calls[0]
    assert other["resultText"] != text
    assert state.lookup_by_content(other["toolName"], other["resultText"]) == "r1@101"


def test_screenshots_with_the_same_text_and_other_pixels_are_not_deduplicated() -> None:
    read = read_image
    state = PrunerState()
    state.add_batch(index_records(read("r1", "AAAA", 100)))
    other = read("r2", "BBBB", 200).tool_calls[0]
    assert state.lookup_by_content(other["toolName"], other["resultText"]) is None
    same = read("r3", "AAAA", 300).tool_calls[0]
    assert state.lookup_by_content(same["toolName"], same["resultText"]) == "r1@101"


def test_capture_batch_pairs_calls_with_results() -> None:
    message = assistant(10, ("a", "read", {"path": "x"}), ("b", "bash", {}), text="  hi \ufeff")
    message["content"].append({"type": "toolCall", "id": "c", "name": "grep", "input": {"q": 1}})
    results = [result("a", "read", "A", 11), result("b", "bash", "B", 12, is_error=True)]
    batch = capture_batch(message, results, 4, 99)
    assert (batch.turn_index, batch.timestamp, batch.assistant_text) == (4, 99, "hi")
    first, second, third = batch.tool_calls
    assert list(first) == [
        "toolCallId",
        "toolName",
        "args",
        "resultText",
        "isError",
        "resultTimestamp",
    ]
    assert first == {
        "toolCallId": "a",
        "toolName": "read",
        "args": {"path": "x"},
        "resultText": "A",
        "isError": False,
        "resultTimestamp": 11,
    }
    assert second["isError"] is True
    # Unmatched call: "(no result)", no resultTimestamp key; `input` wins over `arguments`.
    assert third == {
        "toolCallId": "c",
        "toolName": "grep",
        "args": {"q": 1},
        "resultText": "(no result)",
        "isError": False,
    }
    assert batch.user_turn_group is None


def test_capture_batch_args_alias_order() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "toolCall", "id": "a", "name": "x", "args": {"v": 1}, "arguments": {"v": 2}},
            {"type": "toolCall", "id": "b", "name": "x", "input": None, "arguments": {"v": 3}},
            {"type": "toolCall", "id": "c", "name": "x"},
        ],
    }
    calls = capture_batch(message, [], 0, 0).tool_calls
    assert [c["args"] for c in calls] == [{"v": 1}, {"v": 3}, {}]


_MEMBER_VALUES: list[Any] = ["missing", None, ABSENT, {}, {"path": "a"}, "text", 0, False, []]


def _js_nullish(value: Any) -> bool:
    # `x ?? y` takes y when x is undefined (a missing member, or ABSENT) or null.
    return value == "missing" or value is None or value is ABSENT


@pytest.mark.parametrize("input_value", _MEMBER_VALUES)
@pytest.mark.parametrize("args_value", _MEMBER_VALUES)
@pytest.mark.parametrize("arguments_value", ["missing", None, {"v": 3}])
def test_the_args_member_is_the_js_rule_in_every_reader(
    input_value: Any, args_value: Any, arguments_value: Any
) -> None:
    values = {"input": input_value, "args": args_value, "arguments": arguments_value}
    block = {"type": "toolCall", "id": "a", "name": "x"}
    block.update({k: v for k, v in values.items() if v != "missing"})
    # block.input ?? block.args ?? block.arguments ?? {}
    call_member = next((k for k, v in values.items() if not _js_nullish(v)), None)
    # block.input ?? block.arguments (chain detection, the exclude check, the metrics)
    detection_member = "arguments" if _js_nullish(input_value) else "input"
    assert tool_call_args_member(block) == call_member
    assert tool_call_args_member(block, detection=True) == detection_member
    message = {"role": "assistant", "content": [block]}
    captured = capture_batch(message, [], 0, 0).tool_calls[0]["args"]
    assert captured == ({} if call_member is None else values[call_member])


def test_a_block_that_is_not_a_dict_has_no_args_member() -> None:
    assert tool_call_args_member(["input"]) is None
    assert tool_call_args_member("input", detection=True) == "arguments"


# ---------------------------------------------------------------------------- rescan


def test_rescan_pairs_each_assistant_with_its_own_turn_results() -> None:
    branch = entries(
        user("go", 1),
        assistant(2, ("bash_1", "bash", {})),
        result("bash_1", "bash", "first", 3),
        assistant(4, ("bash_1", "bash", {})),
        result("bash_1", "bash", "second", 5),
        result("bash_1", "bash", "duplicate", 6),
    )
    batches = rescan_branch(branch, PrunerState(), never, lambda: 0)
    assert [(b.turn_index, b.tool_calls[0]["resultText"]) for b in batches] == [
        (0, "first"),
        (1, "second"),  # the first result per id in the turn
    ]
    assert [b.tool_calls[0]["resultTimestamp"] for b in batches] == [3, 5]
    assert all(b.user_turn_group == 1 for b in batches)
    assert batches[0].timestamp == 1735689600000  # the entry's ISO timestamp


def test_rescan_skips_calls_without_a_result_in_their_turn() -> None:
    branch = entries(
        user("go", 1),
        assistant(2, ("a", "read", {}), ("b", "read", {})),
        result("a", "read", "A", 3),
        assistant(4, text="between"),
        result("b", "read", "late", 5),  # beyond the next assistant: not paired
    )
    batches = rescan_branch(branch, PrunerState(), never, lambda: 0)
    assert len(batches) == 1
    assert [c["toolCallId"] for c in batches[0].tool_calls] == ["a"]


def test_rescan_asks_is_summarized_with_the_occurrence_key() -> None:
    state = PrunerState()
    state.add_batch([record("bash_1", 3)])
    branch = entries(
        user("go", 1),
        assistant(2, ("bash_1", "bash", {})),
        result("bash_1", "bash", "old", 3),
        user("again", 4),
        assistant(5, ("bash_1", "bash", {})),
        result("bash_1", "bash", "new", 6),
    )
    batches = rescan_branch(branch, state, never, lambda: 0)
    assert [(b.turn_index, b.user_turn_group, b.tool_calls[0]["resultText"]) for b in batches] == [
        (1, 2, "new")
    ]


def test_rescan_counts_every_assistant_and_excludes_protected_calls() -> None:
    protect = protection_predicate(config(protectedTools=["secret"]))
    branch = entries(
        user("go", 1),
        assistant(2, text="thinking aloud"),
        assistant(3, ("a", "secret", {}), ("b", "read", {"path": "x"})),
        result("a", "secret", "S", 4),
        result("b", "read", "R", 5),
        assistant(6, ("c", "read", {"path": "/p/skills/x/SKILL.md"})),
        result("c", "read", "protected by path", 7),
    )
    batches = rescan_branch(branch, PrunerState(), protect, lambda: 0)
    assert [(b.turn_index, [c["toolCallId"] for c in b.tool_calls]) for b in batches] == [
        (1, ["b"])
    ]


def test_rescan_timestamp_falls_back_to_the_message() -> None:
    branch = entries(
        user("go", 1), assistant(2, ("a", "x", {})), result("a", "x", "r", 3), iso=None
    )
    assert rescan_branch(branch, PrunerState(), never, lambda: 77)[0].timestamp == 2
    del branch[1]["message"]["timestamp"]
    assert rescan_branch(branch, PrunerState(), never, lambda: 77)[0].timestamp == 77


# ---------------------------------------------------------------------------- trim


def make_batch(turn: int, *ids: str, group: Optional[int] = None) -> CapturedBatch:
    calls = [
        {
            "toolCallId": i,
            "toolName": "x",
            "args": {},
            "resultText": i,
            "isError": False,
            "resultTimestamp": 9,
        }
        for i in ids
    ]
    return CapturedBatch(turn, 100 + turn, f"text{turn}", calls, group)


def test_trim_drops_summarized_calls_and_respects_the_frontier() -> None:
    state = PrunerState()
    state.add_batch([record("a", 9)])
    assert trim_batch(make_batch(1, "a"), state) is None
    kept = trim_batch(make_batch(1, "a", "b"), state)
    assert kept is not None
    assert [c["toolCallId"] for c in kept.tool_calls] == ["b"]
    state.frontier = frontier(5, "m")
    assert trim_batch(make_batch(4, "b"), state) is None
    assert trim_batch(make_batch(6, "b"), state) is not None
    assert trim_batch(make_batch(5, "b", "c"), state).tool_calls[0]["toolCallId"] == "b"  # type: ignore[union-attr]
    state.frontier = frontier(5, "c")
    after = trim_batch(make_batch(5, "b", "c", "d"), state)
    assert after is not None
    assert [c["toolCallId"] for c in after.tool_calls] == ["d"]
    assert trim_batch(make_batch(5, "b", "c"), state) is None


# ---------------------------------------------------------------------------- grouping


def test_group_by_agent_message_merges_one_user_turn() -> None:
    batches = [
        make_batch(0, "a", group=1),
        make_batch(1, "b", group=1),
        make_batch(2, "c", group=2),
        make_batch(3, "d"),
        make_batch(4, "e", group=2),
    ]
    batches[1].assistant_text = ""
    merged = group_batches(batches, "agent-message")
    assert [[c["toolCallId"] for c in b.tool_calls] for b in merged] == [
        ["a", "b"],
        ["c"],
        ["d"],
        ["e"],
    ]
    assert (merged[0].turn_index, merged[0].timestamp, merged[0].assistant_text) == (
        1,
        101,
        "text0",
    )
    assert batches[0].tool_calls == make_batch(0, "a").tool_calls  # sources not mutated
    assert group_batches(batches, "turn") == batches


def test_group_joins_texts_with_a_blank_line() -> None:
    merged = group_batches(
        [make_batch(0, "a", group=1), make_batch(1, "b", group=1)], "agent-message"
    )
    assert merged[0].assistant_text == "text0\n\ntext1"


# ---------------------------------------------------------------------------- misc


def test_final_assistant_and_branch_turn_index() -> None:
    assert is_final_assistant(assistant(1, text="bye"))
    assert is_final_assistant({"role": "assistant", "content": "plain"})
    assert not is_final_assistant(assistant(1, ("a", "x", {})))
    assert not is_final_assistant(user("hi", 1))
    branch = entries(
        user("a", 1), assistant(2, text="x"), user("b", 3), assistant(4, ("c", "x", {}))
    )
    assert branch_turn_index(branch, assistant(4)) == 1
    assert branch_turn_index(branch, assistant(99)) == 2


def test_protection_predicate_rules() -> None:
    protect = protection_predicate(config(protectedTools=["bash"], protectedPaths=["docs/*.md"]))
    assert protect("bash", None)
    assert protect("read", {"path": "docs\\a.md"})
    assert not protect("read", {"path": "docs/sub/a.md"})
    assert not protect("read", {"path": 5})
    reference = config(compat="reference", protectedTools="bash,grep")
    assert protection_predicate(reference)("grep", None)
    assert protection_predicate(reference)("ba", None)  # substring, as String.includes
    assert not protection_predicate(reference)("read", None)


# pi-condense 2.10.0 (#13): src/batch-capture.test.ts "custom-anchor group boundary".
def anchored_branch(custom_type: str) -> list[dict[str, Any]]:
    head = entries(user("go", 1000), assistant(1100, ("tc1", "bash", {})))
    tail = entries(result("tc1", "bash", "ok1", 1150))
    custom = {
        "type": "custom_message",
        "id": "c1",
        "customType": custom_type,
        "content": "c",
        "display": True,
        "details": {},
        "timestamp": "2026-08-31T10:00:00.000Z",
    }
    more = entries(assistant(2100, ("tc2", "bash", {})), result("tc2", "bash", "ok2", 2150))
    return [*head, *tail, custom, *more]


@pytest.mark.parametrize(
    ("custom_type", "separate"),
    [("pi-gauntlet-transition-recovery", True), ("context-prune-summary", False)],
)
def test_a_non_pruner_custom_message_starts_a_new_user_turn_group(
    custom_type: str, separate: bool
) -> None:
    branch = anchored_branch(custom_type)
    batches = rescan_branch(branch, PrunerState(), never, lambda: 0)
    assert len(batches) == 2
    assert (batches[0].user_turn_group != batches[1].user_turn_group) == separate
    assert len(group_batches(batches, "agent-message")) == (2 if separate else 1)
    assert is_chain_anchor_custom({"role": "custom", "customType": custom_type}) == separate
    assert is_chain_anchor_custom({"role": "custom"})  # no customType: an anchor
    assert not is_chain_anchor_custom({"role": "user"})


def test_the_live_rescan_counts_custom_anchors_too(tmp_path: Path) -> None:
    session = SessionFile.create(tmp_path / "s.jsonl", "/w")
    for entry in anchored_branch("gauntlet-gate"):
        if entry["type"] == "message":
            session.append_message(entry["message"])
        else:
            session.append_custom_message(entry["customType"], entry["content"], True, {})
    facts = branch_facts(session)
    assert facts.user_groups == [1, 2]


def test_the_image_digest_is_the_cores_for_every_kind_of_data() -> None:
    # `sha256(String(data))` of the UTF-8 a JS string encodes to (a lone surrogate as U+FFFD),
    # one rule for the query tool and the marker: each `data` beside its JS `String(data)`.
    from pi_condense import _core
    from pi_condense.js.values import MISSING

    cycle: list[Any] = ["a"]
    cycle.append(cycle)
    cases: list[tuple[Any, str]] = [
        ("iVBORw0KGgo=", "iVBORw0KGgo="),
        ("", ""),
        ("é€😀", "é€😀"),
        ("\ud83d\ude00", "😀"),  # a surrogate pair as two code points is one character
        ("a\ud800b", "a\ufffdb"),
        ("\udfff", "\ufffd"),
        (b"AAAA", "[object Object]"),
        (bytearray(b"A"), "[object Object]"),
        ({"a": 1}, "[object Object]"),
        (None, "null"),
        (ABSENT, "undefined"),
        (True, "true"),
        (1.0, "1"),
        (1e21, "1e+21"),
        (float("nan"), "NaN"),
        ([1, None, "a", [2, 3]], "1,,a,2,3"),
        (("x", "y"), "x,y"),
        (cycle, "a,"),  # JS `join` prints a cycle as ""
    ]
    for data, js in cases:
        expected = hashlib.sha256(js.encode("utf-8")).hexdigest()[:8]
        assert _core.image_digest(data) == expected, data
        assert image_digest(data) == expected, data
        marker = extract_tool_result_text({"content": [{"type": "image", "data": data}]})
        assert marker == f"[image returned: undefined sha256:{expected}]", data
    # `get_field`'s missing value is JS undefined too.
    assert image_digest(MISSING) == hashlib.sha256(b"undefined").hexdigest()[:8]
