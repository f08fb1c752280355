"""A frozen render hands out the new messages of the previous one again.

With ``frozen=True`` an output (stub, assistant copy, ``<compressed-chain>`` message) whose
plan item equals the previous frozen render's and is made from the very same input objects is
that render's object again. Every render is checked against a fresh render of a deep copy
against a fresh state, so an output handed out for the wrong item or the wrong source fails;
identity is what the tests below add. The module also runs under ``PYTHONMALLOC=debug``.
"""

from __future__ import annotations

import copy
import gc
import sys
from pathlib import Path
from typing import Any

from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import RenderResult, render
from pi_condense.state import PrunerState
from support.builders import assert_same_render, cfg, example, protected_chain, result
from support.debug_alloc import run_under_debug_allocator
from support.frozen import history, turn

CHAINS = cfg()
STUBS = cfg(chainCompression={"enabled": False})


def check(messages: list[Any], state: PrunerState, config: Config) -> RenderResult:
    got = render(messages, state, config, frozen=True)
    assert got.before_chars == jsjson.length(messages)
    assert got.after_chars == jsjson.length(got.messages)
    assert_same_render(got, render(copy.deepcopy(messages), example()[1], config))
    return got


def new_messages(result: RenderResult, messages: list[Any]) -> list[Any]:
    inputs = {id(m) for m in messages}
    return [m for m in result.messages if id(m) not in inputs]


def test_the_same_history_gets_the_same_objects() -> None:
    for config, kinds in ((CHAINS, ["user", "assistant"]), (STUBS, ["toolResult"])):
        messages, state = history(4)
        first = new_messages(check(messages, state, config), messages)
        assert [m["role"] for m in first] == kinds
        again = new_messages(check(messages, state, config), messages)
        assert all(a is b for a, b in zip(first, again, strict=True))


def test_a_grown_history_keeps_the_earlier_outputs() -> None:
    messages, state = history(4)
    first = new_messages(check(messages, state, CHAINS), messages)
    messages += turn(10)
    grown = new_messages(check(messages, state, CHAINS), messages)
    assert all(a is b for a, b in zip(first, grown, strict=True))


def test_a_replaced_source_gets_a_new_output() -> None:
    messages, state = history(4)
    first = new_messages(check(messages, state, STUBS), messages)
    messages[2] = copy.deepcopy(messages[2])  # the summarized result, as a new object
    again = new_messages(check(messages, state, STUBS), messages)
    assert again[0] is not first[0]
    assert again[0] == first[0]


def test_a_replaced_quoted_message_gets_a_new_chain_message() -> None:
    messages, state = protected_chain("SKILL BODY")
    fresh_state = protected_chain()[1]
    first = render(messages, state, CHAINS, frozen=True).messages[1]
    assert "SKILL BODY" in first["content"][0]["text"]
    assert render(messages, state, CHAINS, frozen=True).messages[1] is first
    # The same plan item (the text quotes message 2 by position), another object there.
    messages[2] = result("p1", 210, "ANOTHER BODY", name="read")
    again = render(messages, state, CHAINS, frozen=True)
    assert again.messages[1] is not first
    assert "ANOTHER BODY" in again.messages[1]["content"][0]["text"]
    assert_same_render(again, render(copy.deepcopy(messages), fresh_state, CHAINS))


def test_no_reuse_without_the_promise() -> None:
    messages, state = history(4)
    render(messages, state, STUBS, frozen=True)
    first = new_messages(render(messages, state, STUBS), messages)
    again = new_messages(render(messages, state, STUBS), messages)
    assert first == again
    assert first[0] is not again[0]


def test_outputs_no_longer_asked_for_are_released() -> None:
    messages, state = history(4)
    stub = new_messages(check(messages, state, STUBS), messages)[0]
    held = sys.getrefcount(stub)
    rest = messages[:2] + messages[3:]  # the summarized result is gone: nothing to stub
    noop = render(rest, state, STUBS, frozen=True)
    assert noop.messages is rest
    assert sys.getrefcount(stub) == held - 1
    assert new_messages(check(messages, state, STUBS), messages)[0] is not stub
    state.render_cache.clear()


def test_clear_releases_the_outputs() -> None:
    messages, state = history(4)
    stub = new_messages(check(messages, state, STUBS), messages)[0]
    held = sys.getrefcount(stub)
    state.render_cache.clear()
    assert sys.getrefcount(stub) == held - 1


def test_an_edited_output_comes_back_edited() -> None:
    # The promise covers what render returned: a host that edits an output breaks it and
    # gets the edited object back (stale), never unsafe memory.
    messages, state = history(4)
    stub = new_messages(check(messages, state, STUBS), messages)[0]
    stub["content"] = [{"type": "text", "text": "edited by the host"}]
    gc.collect()
    again = render(messages, state, STUBS, frozen=True)
    assert new_messages(again, messages)[0] is stub
    assert stub["content"][0]["text"] == "edited by the host"


def test_under_the_debug_allocator(tmp_path: Path) -> None:
    out = run_under_debug_allocator(__file__, tmp_path, "debug_allocator")
    assert " passed" in out
    assert "failed" not in out
