"""A frozen render resumed from the previous one (the history again, plus new messages).

With ``frozen=True`` and the same state and config as the previous frozen render, a list that
starts with the very objects that render got is decided from its new messages alone: the
previous output, followed by the new messages' items. Every render below is checked against
a fresh render of a deep copy against a fresh state (``assert_same_render``) and against
``jsjson.length``, so a resumed render that differs from the full one fails; the statistics
tell which path a render took. The module also runs under ``PYTHONMALLOC=debug``.
"""

from __future__ import annotations

import copy
import gc
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_condense.js import json as jsjson
from pi_condense.render import render
from support.builders import assert_same_render, call, cfg, example, result, user
from support.debug_alloc import run_under_debug_allocator
from support.render_cases import SETTINGS, cases
from support.resume import CONFIG, SUMMARIZED_2, check, fresh, stats, turn


def test_a_growing_history_is_resumed() -> None:
    messages, state = example()
    first = check(messages, state)
    assert stats(state)["full"] == 1
    for i in range(6):
        messages += turn(i)
        got = check(messages, state)
        # The previous output's messages come first, the very objects.
        shared = zip(first.messages, got.messages[: len(first.messages)], strict=True)
        assert all(a is b for a, b in shared)
        first = got
    assert stats(state)["resumed"] == 6
    assert stats(state)["full"] == 1


def test_the_same_list_again_is_the_same_output() -> None:
    messages, state = example()
    first = check(messages, state)
    again = check(messages, state)
    assert stats(state)["resumed"] == 1
    assert again.messages is not first.messages  # a new list, of the same objects
    assert all(a is b for a, b in zip(first.messages, again.messages, strict=True))


def test_an_index_change_restarts_before_the_messages_it_touches() -> None:
    messages, state = example()
    check(messages, state)
    for i in range(1, 4):
        messages += turn(i)
        check(messages, state)
    # The result of turn 2 is summarized: the render restarts at the end of the render that
    # first held it, and keeps the output before.
    record = dict(SUMMARIZED_2)
    state.add_batch([record])
    got = check(messages, state, records=(record,))
    assert stats(state)["restarted"] == 1
    assert stats(state)["full"] == 1
    stub = next(m for m in got.messages if m.get("toolCallId") == "call-2")
    assert "Summarized in pruner summary" in str(stub["content"])
    messages += turn(5)
    check(messages, state, records=(record,))
    assert stats(state)["resumed"] == 4


def test_another_config_an_edited_list_or_a_plain_render_start_over() -> None:
    messages, state = example()
    check(messages, state)
    check(messages, state, cfg(chainCompression={"enabled": False}))
    assert stats(state)["stale"] == 1
    # A message replaced by an equal copy: not the same object.
    edited = [*messages[:2], copy.deepcopy(messages[2]), *messages[3:]]
    check(edited, state, cfg(chainCompression={"enabled": False}))
    assert stats(state)["stale"] == 2
    # A shorter list (another branch).
    check(edited[:3], state, cfg(chainCompression={"enabled": False}))
    assert stats(state)["stale"] == 3
    # A render without the promise forgets the previous one.
    render(messages, state, CONFIG)
    check(messages, state)
    assert stats(state)["stale"] == 3
    assert stats(state)["resumed"] == 0


def test_each_fallback_is_the_full_render() -> None:
    messages, state = example()
    check(messages, state)
    # A user message at the chain's start timestamp: the range no longer resolves.
    messages.append(user(messages[0]["timestamp"], "again"))
    check(messages, state)
    assert stats(state)["range"] == 1
    # An errored call whose purge cooldown then ends.
    messages += turn(1, errored=True)
    check(messages, state)
    for i in range(2, 5):
        messages += turn(i)
        check(messages, state)
    assert stats(state)["cooldown"] == 1
    assert stats(state)["resumed"] >= 3


def test_new_messages_of_hostile_types_are_read_by_value() -> None:
    class Id(str):
        def __eq__(self, other: object) -> bool:
            raise AssertionError("compared while reading")

        __hash__ = str.__hash__

    class Stamp(int):
        def __float__(self) -> float:
            raise AssertionError("converted while reading")

    messages, state = example()
    check(messages, state)
    odd = turn(1)
    odd[2]["toolCallId"] = Id("call-1")
    odd[2]["timestamp"] = Stamp(5012)
    messages += odd
    got = render(messages, state, CONFIG, frozen=True)
    assert stats(state)["resumed"] == 1
    plain = fresh([*messages[:-1], {**odd[2], "toolCallId": "call-1", "timestamp": 5012}])
    assert got.before_chars == plain.before_chars
    assert [m.get("role") for m in got.messages] == [m.get("role") for m in plain.messages]


def test_a_new_message_that_cannot_be_measured_raises_as_before() -> None:
    messages, state = example()
    check(messages, state)
    bad = result("call-bad", 9000, "x")
    bad["details"] = {"value": object()}
    with pytest.raises(TypeError):
        render([*messages, bad], state, CONFIG, frozen=True)
    check([*messages, *turn(3)], state)


def test_a_broken_promise_gives_the_previous_output_never_freed_memory() -> None:
    messages, state = example()
    first = check(messages, state)
    old_id = messages[2]["toolCallId"]
    messages[2]["toolCallId"] = "".join(["other-", "id"])
    messages[1]["content"] = [call("".join(["other-", "id"]), "read")]
    del old_id
    gc.collect()
    junk = ["R" * 5 + str(i) for i in range(20000)]
    got = render(messages, state, CONFIG, frozen=True)
    del junk
    assert stats(state)["resumed"] == 1
    assert all(a is b for a, b in zip(first.messages, got.messages, strict=True))


def test_clear_gives_every_reference_back() -> None:
    messages, state = example()
    probe = messages[-1]
    before = sys.getrefcount(probe)
    check(messages, state)
    check(messages, state)
    assert sys.getrefcount(probe) > before
    state.render_cache.clear()
    assert sys.getrefcount(probe) == before
    got = check(messages, state)
    stub = next(m for m in got.messages if m not in messages)
    del got
    gc.collect()
    state.render_cache.clear()
    assert sys.getrefcount(stub) == 2  # the local name and the argument


@settings(
    SETTINGS,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
@given(cases(), st.data())
def test_a_frozen_history_grown_step_by_step_renders_as_fresh(case: Any, data: Any) -> None:
    messages = case.messages
    state = case.state
    at = data.draw(st.integers(0, len(messages)))
    while True:
        shown = messages[:at]
        got = render(shown, state, case.config, frozen=True)
        expected = render(copy.deepcopy(shown), case.state, case.config)
        assert_same_render(got, expected)
        if got.pruned:
            assert got.before_chars == jsjson.length(shown)
            assert got.after_chars == jsjson.length(got.messages)
        if at == len(messages):
            break
        at = min(len(messages), at + data.draw(st.integers(0, 4)))


def test_under_the_debug_allocator(tmp_path: Path) -> None:
    out = run_under_debug_allocator(__file__, tmp_path, "debug_allocator or step_by_step")
    assert " passed" in out
    assert "failed" not in out
