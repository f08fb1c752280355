"""The size memo's frozen prefix: the leading messages of the latest frozen render.

A frozen render compares its leading items with the prefix (by identity), lends the prefix's
views to the decision and gives them back, then grows the prefix by the messages it measured.
Every render below is checked against a fresh render of a deep copy against a fresh state
(nothing remembered) and against ``jsjson.length`` of the list, so a prefix that lent a view
or a length of the wrong message fails. The module also runs under ``PYTHONMALLOC=debug``.

The prefix serves the frozen renders that read the whole list; a frozen render that can
resume from the previous one reads only the new messages (``test_render_resume``), so the
states here are made with ``RenderCache(resume=False)``.
"""

from __future__ import annotations

import copy
import gc
import sys
from pathlib import Path
from typing import Any

import pytest

from pi_condense.js import json as jsjson
from pi_condense.render import RenderResult, render
from pi_condense.state import PrunerState
from support.builders import assert_same_render, cfg, example, result, user
from support.debug_alloc import run_under_debug_allocator
from support.frozen import CONFIG, history, turn


def check(messages: list[Any], state: PrunerState) -> RenderResult:
    """A frozen render of ``messages``, asserted equal to a fresh render of a copy."""
    got = render(messages, state, CONFIG, frozen=True)
    assert got.before_chars == jsjson.length(messages)
    fresh = render(copy.deepcopy(messages), example()[1], CONFIG)
    assert_same_render(got, fresh)
    return got


def settled(messages: list[Any], state: PrunerState) -> None:
    # The first render anchors, the second remembers, the third forms the prefix.
    for _ in range(3):
        check(messages, state)


def test_a_growing_history_is_lent_by_the_prefix() -> None:
    messages, state = history(20)
    settled(messages, state)
    assert state.render_cache.prefix == len(messages)
    for i in range(20, 26):
        messages += turn(i)
        hits = state.render_cache.stats[0]
        check(messages, state)
        assert state.render_cache.prefix == len(messages)
        assert state.render_cache.stats[0] == hits + len(messages) - 3  # the new turn was measured
    assert len(state.render_cache) == len(messages)


@pytest.mark.parametrize("where", [0, 1, 7, 30, -1])
def test_a_message_replaced_inside_the_prefix(where: int) -> None:
    messages, state = history(15)
    settled(messages, state)
    replaced = copy.deepcopy(messages[where])
    if replaced["role"] == "toolResult":
        replaced["content"] = [{"type": "text", "text": "a different output"}]
    else:
        replaced["timestamp"] = replaced["timestamp"] + 0.5
    messages[where] = replaced
    check(messages, state)
    check(messages, state)
    assert state.render_cache.prefix == len(messages)


def test_inserted_and_removed_messages() -> None:
    messages, state = history(15)
    settled(messages, state)
    messages.insert(10, user(1095.5, "an aside"))
    check(messages, state)
    del messages[4:7]
    check(messages, state)
    del messages[0]
    check(messages, state)
    assert state.render_cache.prefix == len(messages)


def test_a_branch_switch_keeps_the_common_prefix_only() -> None:
    messages, state = history(15)
    settled(messages, state)
    other = messages[:20] + [m for i in range(40, 45) for m in turn(i)]
    got = check(other, state)
    assert got.pruned
    assert state.render_cache.prefix == len(other)
    check(messages, state)
    assert state.render_cache.prefix == len(messages)
    assert len(state.render_cache) == len(messages)  # the other branch's messages were released


def test_a_message_listed_twice() -> None:
    messages, state = history(6)
    messages.append(messages[5])
    messages.insert(3, messages[10])
    for _ in range(5):
        check(messages, state)
    assert state.render_cache.prefix == len(messages)


def test_a_plain_render_in_between_dissolves_the_prefix() -> None:
    messages, state = history(10)
    settled(messages, state)
    assert state.render_cache.prefix > 0
    plain = render(messages, state, CONFIG)
    assert plain.before_chars == jsjson.length(messages)
    assert state.render_cache.prefix == 0
    assert len(state.render_cache) == len(messages)  # back in the table, not lost
    messages += turn(50)
    check(messages, state)
    check(messages, state)
    assert state.render_cache.prefix == len(messages)


def test_a_render_that_fails_after_borrowing() -> None:
    messages, state = history(10)
    settled(messages, state)
    bad = result("call-bad", 5000, "x")
    bad["details"] = {"value": object()}  # cannot be measured: the render raises
    with pytest.raises(TypeError):
        render([*messages, bad], state, CONFIG, frozen=True)
    # The lent views were lost with the failed render; nothing stale is lent again.
    check(messages, state)
    check(messages, state)
    assert state.render_cache.prefix == len(messages)


def test_another_state_of_needs_rebuilds_the_views() -> None:
    messages, state = history(10)
    settled(messages, state)
    no_chain = cfg(chainCompression={"enabled": False})
    got = render(messages, state, no_chain, frozen=True)
    assert_same_render(got, render(copy.deepcopy(messages), example()[1], no_chain))
    check(messages, state)


def test_clear_gives_every_reference_back() -> None:
    messages, state = history(5)
    probe = messages[7]
    before = sys.getrefcount(probe)
    settled(messages, state)
    assert state.render_cache.prefix == len(messages)
    assert sys.getrefcount(probe) > before
    state.render_cache.clear()
    assert state.render_cache.prefix == 0
    assert len(state.render_cache) == 0
    assert sys.getrefcount(probe) == before


def test_a_broken_promise_inside_the_prefix_reads_no_freed_string() -> None:
    # The prefix lends the view of messages[9] (a result): its toolCallId is replaced and
    # every other reference to the old str dropped; the trail still holds it, so the render
    # reads the old text (stale, but a valid string), never freed memory.
    messages, state = history(5)
    settled(messages, state)
    old_id = messages[9]["toolCallId"]
    expected = check(messages, state)
    messages[9]["toolCallId"] = "".join(["other-", "id"])
    del old_id
    gc.collect()
    junk = ["P" * 5 + str(i) for i in range(20000)]
    got = render(messages, state, CONFIG, frozen=True)
    del junk
    assert [m["role"] for m in got.messages] == [m["role"] for m in expected.messages]
    # A kept message is the very object (as it is now), at the same place as before.
    at = [i for i, m in enumerate(got.messages) if m is messages[9]]
    assert at == [i for i, m in enumerate(expected.messages) if m is messages[9]] != []
    assert got.messages[at[0]]["toolCallId"] == "other-id"


def test_under_the_debug_allocator(tmp_path: Path) -> None:
    out = run_under_debug_allocator(__file__, tmp_path, "debug_allocator")
    assert " passed" in out
    assert "failed" not in out
