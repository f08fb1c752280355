"""Renders that only read views (nothing to stub or compress): exact under any change.

The state here can neither stub nor compress (nothing summarized, no chain), so a render
only reads views and decides the phases that need no state: error purge and orphan sweep.
Such a render measures nothing and remembers nothing: every message is read again on every
render (the memo of views by dict version tags is gone: issue 17). Every expectation is the
render of the same list against a new state; the edits below change what those phases
decide, so a stale read would show.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_condense.config import Config
from pi_condense.render import RenderResult, render
from pi_condense.state import PrunerState
from support.builders import (
    assert_same_render,
    assistant,
    call,
    cfg,
    record,
    result,
    state_with,
    text,
    thinking,
    user,
)

Messages = list[Any]

CONFIG = cfg()


def baseline() -> tuple[Messages, PrunerState]:
    """A session the render leaves alone: every call answered, no failed call."""
    messages: Messages = [
        user(100),
        assistant(200, call("tc1", cmd="x" * 600)),
        result("tc1", 300, "boom"),
        user(400),
        assistant(500, call("tc2"), text("ok")),
        result("tc2", 600),
        user(700),
        assistant(800, thinking(), text("done")),
        user(900),
        user(1000),
    ]
    return messages, PrunerState()


def fresh(messages: Messages, config: Any = CONFIG) -> RenderResult:
    return render(messages, PrunerState(), config)


def assert_same(res: RenderResult, messages: Messages, config: Any = CONFIG) -> None:
    assert_same_render(res, fresh(messages, config))
    if not res.pruned:
        assert res.messages is messages


def test_the_baseline_is_a_no_op() -> None:
    messages, state = baseline()
    res = render(messages, state, CONFIG)
    assert res.messages is messages
    assert (res.pruned, res.before_chars, res.after_chars) == (False, 0, 0)


def test_repeated_no_op_renders_remember_nothing() -> None:
    messages, state = baseline()
    for _ in range(3):
        assert render(messages, state, CONFIG).messages is messages
    # Nothing is measured, so no size is remembered (and no message held).
    assert len(state.render_cache) == 0
    assert state.render_cache.stats == (0, 0)


def _fail_first_call(m: Messages) -> None:
    m[2]["isError"] = True  # an old failed call with long arguments: purged


def _rename_result(m: Messages) -> None:
    m[5]["toolCallId"] = "elsewhere"  # an orphan: swept


def _rename_call(m: Messages) -> None:
    m[4]["content"][0]["id"] = "elsewhere"  # a block dict changes, its message does not


def _drop_call_block(m: Messages) -> None:
    del m[4]["content"][0]  # the content list changes, no dict does


def _swap_block_for_copy(m: Messages) -> None:
    m[4]["content"][0] = dict(m[4]["content"][0], id="elsewhere")


def _replace_content(m: Messages) -> None:
    m[4]["content"] = [text("no call after all")]


def _retype_block(m: Messages) -> None:
    m[1]["content"][0]["type"] = "text"


def _change_role(m: Messages) -> None:
    m[3]["role"] = "assistant"


def _equal_copy(m: Messages) -> None:
    m[4] = copy.deepcopy(m[4])


def _same_value_again(m: Messages) -> None:
    m[5]["toolCallId"] = m[5]["toolCallId"]


def _content_becomes_text(m: Messages) -> None:
    m[1]["content"] = "plain text"


def _insert_first(m: Messages) -> None:
    m.insert(0, user(50))


def _remove_a_user(m: Messages) -> None:
    del m[3]


def _append_message(m: Messages) -> None:
    m.append(user(1100))


def _truncate(m: Messages) -> None:
    del m[6:]


def _non_dict_block(m: Messages) -> None:
    m[7]["content"].append("a bare string")


def _non_dict_message(m: Messages) -> None:
    m[8] = ["not", "a", "message"]


# Edits of one message in place (the positions stay).
ONE_MESSAGE = [
    _fail_first_call,
    _rename_result,
    _rename_call,
    _drop_call_block,
    _swap_block_for_copy,
    _replace_content,
    _retype_block,
    _change_role,
    _equal_copy,
    _content_becomes_text,
    _non_dict_block,
    _non_dict_message,
]

MUTATIONS = [
    *ONE_MESSAGE,
    _same_value_again,
    _insert_first,
    _remove_a_user,
    _append_message,
    _truncate,
]


@pytest.mark.parametrize("mutate", MUTATIONS, ids=lambda f: f.__name__.strip("_"))
def test_a_render_after_a_change_is_the_fresh_render(mutate: Callable[[Messages], None]) -> None:
    messages, state = baseline()
    render(messages, state, CONFIG)
    mutate(messages)
    assert_same(render(messages, state, CONFIG), messages)
    assert_same(render(messages, state, CONFIG), messages)


@given(st.lists(st.sampled_from(MUTATIONS), max_size=8))
def test_a_render_after_any_sequence_of_changes_is_the_fresh_render(
    mutations: list[Callable[[Messages], None]],
) -> None:
    messages, state = baseline()
    render(messages, state, CONFIG)
    for mutate in mutations:
        try:
            mutate(messages)
        except (IndexError, KeyError, TypeError, ValueError):
            continue  # an edit that does not fit what earlier edits left (nothing changed)
        assert_same(render(messages, state, CONFIG), messages)


def flat_result(tool_call_id: str) -> dict[str, Any]:
    # One dict and nothing nested: made right after the previous one was freed, it is
    # handed that one's memory.
    return {"role": "toolResult", "toolCallId": tool_call_id, "content": "out", "timestamp": 600}


def test_a_new_message_at_a_freed_address_is_read_again() -> None:
    messages, state = baseline()
    messages[5] = flat_result("tc2")
    reused_address = 0
    for k in range(200):
        before = id(messages[5])
        messages[5] = None  # frees the previous message
        messages[5] = flat_result("tc2" if k % 2 else "elsewhere")
        reused_address += id(messages[5]) == before
        assert_same(render(messages, state, CONFIG), messages)
    # The allocator did hand the same address out again (else this test proves nothing).
    assert reused_address > 0


def test_a_new_block_at_a_freed_address_is_read_again() -> None:
    messages, state = baseline()
    blocks = messages[4]["content"]
    reused_address = 0
    for k in range(200):
        before = id(blocks[0])
        blocks[0] = None
        blocks[0] = {"type": "toolCall", "id": "tc2" if k % 2 else "elsewhere", "name": "bash"}
        reused_address += id(blocks[0]) == before
        assert_same(render(messages, state, CONFIG), messages)
    assert reused_address > 0


def test_views_are_read_again_for_a_config_that_reads_other_fields() -> None:
    messages, state = baseline()
    render(messages, state, CONFIG)
    no_purge = cfg(purgeErrors={"enabled": False})
    messages[2]["isError"] = True
    assert_same(render(messages, state, no_purge), messages, no_purge)
    assert_same(render(messages, state, CONFIG), messages)


def test_without_a_chain_a_summary_message_is_remembered_too() -> None:
    messages, state = baseline()
    summary = {
        "role": "custom",
        "customType": "context-prune-summary",
        "content": "s",
        "details": {"toolCallRefs": [{"toolCallId": "tc1"}]},
        "timestamp": 650,
    }
    messages.insert(6, summary)
    render(messages, state, CONFIG)
    # No chain registered: phase 3 reads nothing of it; a change to it changes nothing.
    summary["details"]["toolCallRefs"][0]["toolCallId"] = "tc2"
    assert_same(render(messages, state, CONFIG), messages)


def test_a_reference_substring_render_uses_the_memo_like_any_other() -> None:
    # The reference mode's string protectedTools is matched in Rust (RenderOptions): no
    # Python code runs during the decision, so such a render measures through the memo.
    state = state_with(record("r", 1, name="read"))
    messages = [assistant(1, call("r", "read")), result("r", 1, name="read")]
    settings = {"enabled": True, "chainCompression": {}, "protectedPaths": []}
    config = Config.from_settings_dict({**settings, "protectedTools": "bash"}, compat="reference")
    assert config.protected_tools_substring == "bash"
    first = render(messages, state, config)
    assert first.pruned
    assert state.render_cache.stats != (0, 0)
    again = render(messages, state, config)
    assert_same_render(again, render(messages, state_with(record("r", 1, name="read")), config))
