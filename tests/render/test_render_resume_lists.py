"""A resumed render's lists: work proportional to the new messages, never a visible change.

A frozen render that resumes does not copy the whole message list: its snapshot is the list
the previous render read, held by the render cache and never handed out, grown by the
caller's new messages (``resume_stats["inputs_grown"]``). Its output list is the previous
output list grown in place only when nothing but the cache holds that list and it still holds
the previous outputs (``resume_stats["outputs_grown"]``): a caller that keeps a result, or
changed its list, gets a new list and finds its own unchanged. Every render is checked against
a fresh render of a copy (``check``).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from pi_condense.render import RenderResult
from support.builders import example
from support.debug_alloc import run_under_debug_allocator
from support.resume import SUMMARIZED_2, check, stats, turn


def grown(state: Any) -> tuple[int, int]:
    counts = stats(state)
    return counts["inputs_grown"], counts["outputs_grown"]


def step(messages: list[Any], state: Any, i: int) -> tuple[RenderResult, list[Any]]:
    messages += turn(i)
    got = check(messages, state)
    assert got.pruned
    return got, list(got.messages)


def test_a_dropped_output_list_is_grown_in_place() -> None:
    messages, state = example()
    check(messages, state)
    assert grown(state) == (0, 0)
    for i in range(1, 6):
        # The previous result is dropped before the next render (as `condense` does).
        got, _ = step(messages, state, i)
        del got
        gc.collect()
        assert grown(state) == (i, i)
    assert stats(state)["resumed"] == 5
    assert stats(state)["full"] == 1


def test_a_held_output_list_is_never_changed() -> None:
    messages, state = example()
    check(messages, state)
    kept: list[tuple[RenderResult, list[Any]]] = []
    for i in range(1, 5):
        kept.append(step(messages, state, i))
    # The first full render's result was dropped: only the first resumed render grows it.
    assert grown(state) == (4, 1)
    for result, items in kept:
        assert len(result.messages) == len(items)
        assert all(a is b for a, b in zip(result.messages, items, strict=True))
    assert len({id(result.messages) for result, _ in kept}) == len(kept)


def test_an_output_list_the_caller_changed_is_not_grown() -> None:
    messages, state = example()
    check(messages, state)
    got, _ = step(messages, state, 1)
    del got
    got, _ = step(messages, state, 2)
    assert grown(state)[1] == 2
    got.messages.append({"role": "user", "content": "mine", "timestamp": 1})
    del got
    got, _ = step(messages, state, 3)
    assert grown(state)[1] == 2  # changed by its caller: a new list
    got.messages[0] = {"role": "user", "content": "mine too", "timestamp": 1}
    del got
    got, _ = step(messages, state, 4)
    assert grown(state)[1] == 2
    del got
    step(messages, state, 5)
    assert grown(state)[1] == 3  # a list nobody touched again


def test_an_edited_list_takes_a_snapshot_of_its_own() -> None:
    messages, state = example()
    check(messages, state)
    step(messages, state, 1)
    assert grown(state)[0] == 1
    edited = [dict(messages[0]), *messages[1:]]  # another object at position 0
    check(edited, state)
    assert stats(state)["stale"] == 1
    assert grown(state)[0] == 1
    edited += turn(2)
    check(edited, state)
    assert grown(state)[0] == 2
    assert stats(state)["resumed"] == 2


def test_a_list_subclass_is_grown_through_the_api() -> None:
    class Messages(list[Any]):
        pass

    base, state = example()
    messages = Messages(base)
    check(messages, state)
    for i in range(1, 4):
        list.extend(messages, turn(i))
        got = check(messages, state)
        assert got.pruned
        del got
    assert grown(state) == (3, 3)


def test_a_restart_shrinks_the_grown_list_first() -> None:
    messages, state = example()
    check(messages, state)
    for i in range(1, 4):
        got, _ = step(messages, state, i)
        del got
    # The result of turn 2 is summarized: the render restarts before it, drops the outputs
    # from there on (still alive: released after the render) and appends the new ones.
    record = dict(SUMMARIZED_2)
    state.add_batch([record])
    got = check(messages, state, records=(record,))
    assert stats(state)["restarted"] == 1
    assert grown(state) == (4, 4)
    stub = next(m for m in got.messages if m.get("toolCallId") == "call-2")
    assert "Summarized in pruner summary" in str(stub["content"])
    del got
    messages += turn(5)
    check(messages, state, records=(record,))
    assert grown(state) == (5, 5)


def test_under_the_debug_allocator(tmp_path: Path) -> None:
    out = run_under_debug_allocator(__file__, tmp_path)
    assert " passed" in out
    assert "failed" not in out
