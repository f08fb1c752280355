"""``ChainScan(previous=...)``: a scan lends its views of the very objects it read.

Expected results are those of a scan that reads every message (the detection tests check
that one against the spec); the reuse must never change them while the messages are left
alone, and must only ever lend views read by the same compiled protection rule.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_condense import _core
from pi_condense.chains import ScanMemo, _scan
from pi_condense.config import Config
from pi_condense.render import render_options
from support.builders import call, final, plain_result, tool_use, user

CONFIG = Config.from_settings_dict({"protectedTools": ["keep"]})


def closed_chain(base: int, tool_id: str, tool: str = "read") -> list[dict[str, Any]]:
    return [
        user(base),
        tool_use(base + 1, call(tool_id, tool)),
        plain_result(tool_id, base + 2, name=tool),
        final(base + 3),
    ]


def history(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(1, n + 1):
        out += closed_chain(100 * k, f"c{k}", "keep" if k % 3 == 0 else "read")
    return out


def scan(messages: list[Any], previous: Any = None, options: Any = None) -> _core.ChainScan:
    return _core.ChainScan(
        messages,
        grace_turns=1.0,
        options=options if options is not None else render_options(CONFIG),
        previous=previous,
    )


def outcome(s: _core.ChainScan) -> tuple[Any, ...]:
    return (s.chains(), sorted(s.in_grace), s.select(_core.Index(), 0.0))


def test_a_grown_list_scans_as_a_full_read() -> None:
    messages = history(4)
    first = scan(messages)
    grown = [*messages, *closed_chain(900, "c9", "keep"), user(1000)]
    reused = scan(grown, previous=first)
    assert outcome(reused) == outcome(scan(copy.deepcopy(grown)))
    assert reused.chain_count == 5
    # The protected call of the new chain (keep) is flagged, as in a fresh read.
    assert reused.chains()[-1] == scan(copy.deepcopy(grown)).chains()[-1]


def test_the_very_objects_lend_their_views() -> None:
    # Breaking the promise shows what was reused: an in-place edit of a lent message is
    # not seen (a fresh scan sees it).
    messages = history(2)
    first = scan(messages)
    messages[1]["content"][0]["name"] = "keep"  # now protected, for a fresh read
    messages[2]["toolName"] = "keep"
    stale = scan(messages, previous=first)
    assert outcome(stale) == outcome(first)
    fresh = scan(messages)
    assert outcome(fresh) != outcome(first)


def test_other_objects_or_positions_are_read_again() -> None:
    messages = history(2)
    first = scan(messages)
    edited = [*messages]
    edited[2] = copy.deepcopy(messages[2])
    edited[2]["toolCallId"] = "other"
    assert outcome(scan(edited, previous=first)) == outcome(scan(copy.deepcopy(edited)))
    shifted = [user(50), *messages]  # the same objects, one place later
    assert outcome(scan(shifted, previous=first)) == outcome(scan(copy.deepcopy(shifted)))


def test_views_of_another_rule_are_never_lent() -> None:
    messages = history(3)
    first = scan(messages)
    other = render_options(Config.from_settings_dict({"protectedTools": []}))
    again = scan(messages, previous=first, options=other)
    assert outcome(again) == outcome(scan(copy.deepcopy(messages), options=other))
    assert outcome(again) != outcome(first)  # the keep chains are no longer protected


def test_a_predicate_scan_neither_lends_nor_borrows() -> None:
    messages = history(3)
    first = scan(messages)
    with_predicate = _core.ChainScan(
        messages, grace_turns=1.0, protected_predicate=lambda name, args: False, previous=first
    )
    assert outcome(with_predicate) == outcome(
        _core.ChainScan(
            copy.deepcopy(messages), grace_turns=1.0, protected_predicate=lambda n, a: False
        )
    )
    messages[1]["content"][0]["name"] = "keep"
    messages[2]["toolName"] = "keep"
    after = scan(messages, previous=with_predicate)
    assert outcome(after) == outcome(scan(copy.deepcopy(messages)))


def test_the_memo_keeps_the_latest_scan() -> None:
    memo = ScanMemo()
    messages = history(2)
    first = _scan(messages, CONFIG, None, memo=memo)
    assert memo.scan is first
    grown = [*messages, *closed_chain(900, "c9")]
    second = _scan(grown, CONFIG, None, memo=memo)
    assert memo.scan is second
    assert outcome(second) == outcome(scan(copy.deepcopy(grown), options=render_options(CONFIG)))


# --- the resumed detection (the chains before the resume point are the previous scan's) ---

_ATOMS = ("user", "synthetic", "call", "keep-call", "result", "keep-result", "final", "custom")


def _message(atom: str, ts: int, n: int) -> dict[str, Any]:
    tool_id = f"c{n % 4}"
    if atom == "user":
        return user(ts)
    if atom == "synthetic":
        return {
            "role": "user",
            "content": [{"type": "text", "text": f'<compressed-chain id="b{n}" tools="t1">'}],
            "timestamp": ts,
        }
    if atom in ("call", "keep-call"):
        return tool_use(ts, call(tool_id, "keep" if atom == "keep-call" else "read"))
    if atom in ("result", "keep-result"):
        return plain_result(tool_id, ts, name="keep" if atom == "keep-result" else "read")
    if atom == "final":
        return final(ts)
    return {"role": "custom", "customType": "note", "content": "x", "timestamp": ts}


def _messages(atoms: list[str], start: int) -> list[dict[str, Any]]:
    return [_message(a, start + i, start + i) for i, a in enumerate(atoms)]


@settings(max_examples=300, deadline=None)
@given(
    first=st.lists(st.sampled_from(_ATOMS), max_size=30),
    cut=st.integers(min_value=0, max_value=30),
    tail=st.lists(st.sampled_from(_ATOMS), max_size=12),
    more=st.lists(st.sampled_from(_ATOMS), max_size=12),
)
def test_resumed_detection_equals_a_full_read(
    first: list[str], cut: int, tail: list[str], more: list[str]
) -> None:
    messages = _messages(first, 1000)
    before = scan(messages)
    # the same objects up to the cut, then new ones (a grown list, or one whose tail changed)
    grown = [*messages[:cut], *_messages(tail, 5000)]
    second = scan(grown, previous=before)
    assert outcome(second) == outcome(scan(copy.deepcopy(grown)))
    # and once more on top of the resumed scan
    again = [*grown, *_messages(more, 9000)]
    assert outcome(scan(again, previous=second)) == outcome(scan(copy.deepcopy(again)))


def test_a_chain_open_at_the_cut_is_detected_again() -> None:
    messages = [*closed_chain(100, "a"), user(200), tool_use(201, call("b", "read"))]
    first = scan(messages)
    assert first.chain_count == 1  # the chain opened at 200 is still open
    grown = [*messages, plain_result("b", 202, name="read"), final(203)]
    second = scan(grown, previous=first)
    assert second.chain_count == 2
    assert [c[1:3] for c in second.chains()] == [(0, 3), (4, 7)]
    assert outcome(second) == outcome(scan(copy.deepcopy(grown)))


def test_extracted_result_text_is_image_markers_then_texts_and_a_null_block_throws() -> None:
    messages = closed_chain(100, "c1")
    messages[2]["content"] = [
        {"type": "text", "text": "A"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        "not a block",
        {"type": "text", "text": None},
        {"type": "text", "text": 7},
    ]
    [record] = scan(messages).extract(_core.Index(), 100.0, 103.0, [])
    # The marker's digest: the 2.11.3 reference's (tests/render/test_render.py, same data).
    assert record["resultText"] == "[image returned: image/png sha256:929e08d5]\nA\n\n7"
    messages[2]["content"].append(None)
    with pytest.raises(TypeError, match="null block"):
        scan(messages).extract(_core.Index(), 100.0, 103.0, [])
