"""The size memo: message lengths reused across renders, exact under any in-place change.

Every expected size is ``jsjson.length`` of the list (JS ``JSON.stringify(...).length``,
checked against the reference's vectors in js/test_jsjson.py), measured fresh by the test.
"""

from __future__ import annotations

import copy
import os
import random
import sys
from typing import Any, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_condense.js import json as jsjson
from pi_condense.render import RenderResult, render
from pi_condense.state import PrunerState
from support.builders import NO_CHAIN, assert_same_render, cfg, example, text

Messages = list[dict[str, Any]]


def render_checked(messages: Messages, state: PrunerState) -> RenderResult:
    res = render(messages, state, NO_CHAIN)
    assert res.pruned
    assert res.before_chars == jsjson.length(messages)
    assert res.after_chars == jsjson.length(res.messages)
    return res


def remember(messages: Messages, state: PrunerState) -> None:
    """Two renders: the first sees the objects, the second remembers them."""
    render_checked(messages, state)
    render_checked(messages, state)


def test_repeated_renders_reuse_every_length() -> None:
    messages, state = example()
    first = render_checked(messages, state)
    # Objects never seen before are measured, not remembered: a host that hands over
    # fresh objects on every call pays nothing for the memo.
    assert state.render_cache.stats == (0, 4)
    assert len(state.render_cache) == 0
    render_checked(messages, state)  # the same objects again: now remembered
    assert state.render_cache.stats == (0, 8)
    assert len(state.render_cache) == 4
    for _ in range(3):
        again = render_checked(messages, state)
        assert (again.before_chars, again.after_chars) == (first.before_chars, first.after_chars)
    assert state.render_cache.stats == (12, 8)


def test_fresh_objects_on_every_call_are_never_remembered() -> None:
    messages, state = example()
    for _ in range(4):
        fresh = copy.deepcopy(messages)
        render_checked(fresh, state)
        assert len(state.render_cache) == 0
    assert state.render_cache.stats == (0, 16)


def test_a_host_that_keeps_some_of_its_objects_is_remembered() -> None:
    # A new first message on every call (a fresh system prompt), the rest kept: one of the
    # kept messages is found again, so the second call remembers.
    messages, state = example()
    for _ in range(2):
        messages[0] = copy.deepcopy(messages[0])
        render_checked(messages, state)
    assert len(state.render_cache) == 4
    messages[0] = copy.deepcopy(messages[0])
    render_checked(messages, state)
    assert state.render_cache.stats[0] == 3


def test_the_anchors_of_a_fresh_objects_host_are_released() -> None:
    messages, state = example()
    probe = messages[0]
    alone = sys.getrefcount(probe)
    render_checked(messages, state)
    assert sys.getrefcount(probe) == alone + 1  # an anchor
    others, _ = example()
    render_checked(others, state)
    assert sys.getrefcount(probe) == alone


def _set_nested_text(m: Messages) -> None:
    m[3]["content"][1]["text"] = 'say "hi"\n\u2028 \ud800'


def _append_block(m: Messages) -> None:
    m[0]["content"].append(text("more"))


def _reorder_keys(m: Messages) -> None:
    m[1]["api"] = m[1].pop("api")


def _replace_number(m: Messages) -> None:
    m[0]["timestamp"] = 1.5e300


def _deep_argument(m: Messages) -> None:
    m[1]["content"][0]["arguments"]["cmd"] = "x" * 100


def _equal_but_new_object(m: Messages) -> None:
    m[2]["toolName"] = "".join(["ba", "sh"])


def _add_key(m: Messages) -> None:
    m[3]["usage"]["input"] = 12


def _delete_key(m: Messages) -> None:
    m[3].pop("stopReason", None)


def _replace_message(m: Messages) -> None:
    m[0] = copy.deepcopy(m[0])


def _empty_list(m: Messages) -> None:
    m[3]["content"][-1]["extra"] = []


def _rename_call(m: Messages) -> None:
    m[2]["toolCallId"] = "tc9"


def _retime_result(m: Messages) -> None:
    m[2]["timestamp"] = 301


def _change_role(m: Messages) -> None:
    m[3]["role"] = "user"


# Edits that leave the render pruning the same way (only sizes change).
SIZE_MUTATIONS: list[Callable[[Messages], None]] = [
    _set_nested_text,
    _append_block,
    _reorder_keys,
    _replace_number,
    _deep_argument,
    _equal_but_new_object,
    _add_key,
    _delete_key,
    _replace_message,
    _empty_list,
]

# ... and edits that change what the render decides.
MUTATIONS = [*SIZE_MUTATIONS, _rename_call, _retime_result, _change_role]


@pytest.mark.parametrize("mutate", SIZE_MUTATIONS, ids=lambda f: f.__name__.strip("_"))
def test_an_in_place_change_is_measured_again(mutate: Callable[[Messages], None]) -> None:
    messages, state = example()
    remember(messages, state)
    hits, misses = state.render_cache.stats
    mutate(messages)
    render_checked(messages, state)
    # Exactly one message changed: it is measured, the three others are reused.
    assert state.render_cache.stats == (hits + 3, misses + 1)


def render_fresh(messages: Messages) -> RenderResult:
    """The render against a new state (nothing remembered) equal to example()'s."""
    _, fresh = example()
    return render(messages, fresh, NO_CHAIN)


@given(st.lists(st.sampled_from(MUTATIONS), max_size=8))
def test_a_render_after_any_sequence_of_changes_is_the_fresh_render(
    mutations: list[Callable[[Messages], None]],
) -> None:
    messages, state = example()
    remember(messages, state)
    for mutate in mutations:
        mutate(messages)
        res = render(messages, state, NO_CHAIN)
        assert_same_render(res, render_fresh(messages))
        if res.pruned:
            assert res.before_chars == jsjson.length(messages)
            assert res.after_chars == jsjson.length(res.messages)


def test_remembered_views_are_read_again_for_a_config_that_reads_more() -> None:
    messages, state = example()
    remember(messages, state)  # chain compression off: no timestamps of users read
    with_chain = cfg()
    res = render(messages, state, with_chain)
    _, fresh = example()
    assert res.messages == render(messages, fresh, with_chain).messages
    assert res.messages[1]["content"][0]["text"].startswith('<compressed-chain id="b1"')
    assert render(messages, state, NO_CHAIN).messages == render_fresh(messages).messages


def test_a_string_replaced_many_times_is_never_confused_with_its_predecessor() -> None:
    # Strings of one size, freed and allocated over and over: the allocator hands the same
    # addresses out again, which an address-only check would mistake for the old string.
    messages, state = example()
    block = messages[3]["content"][1]
    rng = random.Random(7)
    for _ in range(300):
        block["text"] = None  # frees the previous body, unless the memo holds it
        block["text"] = "".join(rng.choice('ab"\\\n') for _ in range(40))
        render_checked(messages, state)


def test_messages_of_other_types_are_measured_every_time() -> None:
    messages, state = example()
    messages[1]["usage"] = {"cost": (1, 2.5)}  # a tuple: not remembered
    remember(messages, state)
    render_checked(messages, state)
    assert state.render_cache.stats == (3, 9)
    messages[1]["usage"]["cost"] = (1, 2.5, "three")
    render_checked(messages, state)


def test_the_memo_only_holds_the_messages_of_the_latest_list() -> None:
    messages, state = example()
    probe = messages[0]
    alone = sys.getrefcount(probe)
    render_checked(messages, state)
    assert sys.getrefcount(probe) == alone + 1
    render_checked(messages, state)  # remembered: the trail holds it, the anchor is gone
    assert sys.getrefcount(probe) == alone + 1
    others, _ = example()
    render(others, state, NO_CHAIN)
    assert sys.getrefcount(probe) == alone
    assert len(state.render_cache) == 0
    render(others, state, NO_CHAIN)
    assert len(state.render_cache) == 4
    render(messages, state, NO_CHAIN)
    state.render_cache.clear()
    assert sys.getrefcount(probe) == alone
    assert len(state.render_cache) == 0


def test_a_message_listed_twice_is_counted_twice() -> None:
    messages, state = example()
    messages.insert(1, messages[0])
    render_checked(messages, state)
    render_checked(messages, state)
    assert len(state.render_cache) == 4


def test_a_render_that_changes_nothing_still_reports_no_sizes() -> None:
    messages, state = example()
    render_checked(messages, state)
    res = render([messages[0]], state, NO_CHAIN)
    assert (res.pruned, res.before_chars, res.after_chars) == (False, 0, 0)
    # The state can stub, so the list was measured ahead (and only it is remembered).
    assert len(state.render_cache) == 1


def test_a_value_that_cannot_be_measured_leaves_no_reference_behind() -> None:
    messages, state = example()
    # A str made at run time: literals are immortal on CPython 3.12+ (refcount fixed).
    probe = "".join(["g", "o"])
    messages[0]["content"][0]["text"] = probe
    alone = sys.getrefcount(probe)
    messages[2]["details"] = {"odd": {1, 2}}  # a set: not JSON
    with pytest.raises(TypeError):
        render(messages, state, NO_CHAIN)
    assert sys.getrefcount(probe) == alone
    assert len(state.render_cache) == 0
    # Remembered first, then a message turns unmeasurable: the render fails, and only the
    # references of the messages remembered before stay.
    messages[2]["details"] = {"exitCode": 0}
    render_checked(messages, state)
    held = sys.getrefcount(probe)
    assert held == alone + 1
    messages[3]["usage"] = {"odd": {1}}
    with pytest.raises(TypeError):
        render(messages, state, NO_CHAIN)
    assert sys.getrefcount(probe) == held


def test_a_change_undone_is_still_reused() -> None:
    # The dict's keys and values are compared one by one: the very same objects again, so
    # the length is reused.
    messages, state = example()
    remember(messages, state)
    hits, misses = state.render_cache.stats
    api = messages[1]["api"]
    messages[1]["api"] = "other"
    messages[1]["api"] = api
    render_checked(messages, state)
    assert state.render_cache.stats == (hits + 4, misses)


def test_layout_features_report_the_layout_reads() -> None:
    import sysconfig

    from pi_condense import _core

    known = (
        sys.implementation.name == "cpython"
        and (3, 9) <= sys.version_info[:2] <= (3, 14)
        and sys.maxsize > 2**32
        and not sysconfig.get_config_var("Py_GIL_DISABLED")
        and os.environ.get("PI_CONDENSE_LAYOUT", "").lower() != "off"
    )
    features = _core.layout_features()
    assert set(features) == {"ascii_text", "str_chars", "list_items", "prefetch", "dict_entries"}
    assert features == dict.fromkeys(features, known)


def test_the_state_holds_one_render_cache_and_the_old_names_still_work() -> None:
    """The sizes, outputs, result keys and resume point live in one ``RenderCache``; the
    names from before (``PrunerState.sizes``, ``_core.SizeMemo``) still reach it."""
    from pi_condense import _core

    messages, state = example()
    remember(messages, state)
    cache = state.render_cache
    assert isinstance(cache, _core.RenderCache)
    assert len(cache) == 4  # the messages remembered
    assert _core.SizeMemo is _core.RenderCache
    with pytest.warns(DeprecationWarning, match="render_cache"):
        assert state.sizes is cache
    fresh = _core.SizeMemo(resume=False)
    with pytest.warns(DeprecationWarning, match="render_cache"):
        state.sizes = fresh
    assert state.render_cache is fresh
    assert not fresh.resuming
