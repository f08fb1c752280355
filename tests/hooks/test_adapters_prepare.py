"""``prepare``'s one-pass shortcut for an output kept whole (a late join's untouched history)
gives the segments of the pairing pass, and steps aside wherever that pass changes something."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_condense import _core
from pi_condense.adapters import prepare as prep
from pi_condense.adapters.base import Out
from pi_condense.session.lock import _BLANK


def _paired(outs: list[Out]) -> list[prep.Segment]:
    """``prepare`` without the shortcut."""
    saved = prep._kept_whole
    prep._kept_whole = lambda outs: None  # type: ignore[assignment]
    try:
        return prep.prepare(outs)
    finally:
        prep._kept_whole = saved


def _assistant(*ids: Any, stop: str = "toolUse") -> dict[str, Any]:
    content: list[Any] = [{"type": "text", "text": "x"}]
    content += [{"type": "toolCall", "id": i, "name": "read", "arguments": {}} for i in ids]
    return {"role": "assistant", "content": content, "stopReason": stop}


def _result(call_id: Any) -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": call_id, "content": [], "isError": False}


USER = {"role": "user", "content": "go"}

_messages = st.one_of(
    st.just(USER),
    st.builds(_assistant, st.sampled_from(["a", "b"])),
    st.builds(_assistant, st.sampled_from(["a", "b"]), st.sampled_from(["a", "b"])),
    st.just(_assistant()),
    st.just(_assistant("a", stop="error")),
    st.just({"role": "custom", "content": "note"}),
    st.builds(_result, st.sampled_from(["a", "b", None])),
)
_outs = st.one_of(
    _messages.map(lambda m: Out(m, ({"item": 1},))),
    _messages.map(lambda m: Out(m, ())),
    st.just(Out(None, ({"role": "system"},))),
    st.just(Out(None, ())),
    st.just(Out([USER, USER], ({"item": 2},))),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_outs, max_size=12))
def test_the_shortcut_gives_the_pairing_pass_segments(outs: list[Out]) -> None:
    assert prep.prepare(outs) == _paired(outs)


def test_a_paired_history_is_kept_whole_in_one_pass() -> None:
    outs = [
        Out(None, ({"role": "system"},)),
        Out(USER, ("u",)),
        Out(_assistant("a", "b"), ("c1", "c2")),
        Out(_result("a"), ("r1",)),
        Out(_result("b"), ("r2",)),
        Out(_assistant(stop="stop"), ("done",)),
    ]
    kept = prep._kept_whole(outs)
    assert kept is not None
    assert kept == _paired(outs)
    assert all(isinstance(s, prep.Keep) for s in kept)


@pytest.mark.parametrize(
    "outs",
    [
        [Out(_assistant("a"), ("c",))],  # no result: a synthetic one
        [Out(_result("a"), ("r",))],  # a result of no call: dropped
        [Out(_assistant("a", stop="error"), ("c",)), Out(_result("a"), ("r",))],
        [Out(_assistant("a", "a"), ("c",)), Out(_result("a"), ("r",))],  # one id twice
        [Out(USER, ())],  # made by the render: converted
        [Out([USER, USER], ("u",))],  # a unit of several messages
        [Out(_assistant(["unhashable"]), ("c",))],
    ],
)
def test_the_shortcut_steps_aside_where_pairing_changes_something(outs: list[Out]) -> None:
    assert prep._kept_whole(outs) is None


@given(st.binary(max_size=300))
def test_blank_lines_is_the_translate_table(data: bytes) -> None:
    assert _core.blank_lines(data) == data.translate(_BLANK)
