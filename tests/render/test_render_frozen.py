"""``render(..., frozen=True)``: the memo trusts the identity of the objects it remembers.

The promise (no message handed over before has changed in place) is what the replay keeps:
every expected size below is ``jsjson.length`` of the list, measured fresh by the test, and
the frozen render of untouched objects must equal the plain render exactly. A broken promise
may give stale results, and the tests pin that down too, but never unsafe memory: the
module also runs under ``PYTHONMALLOC=debug`` (freed memory poisoned).
"""

from __future__ import annotations

import copy
import gc
from pathlib import Path
from typing import Any

from pi_condense.js import json as jsjson
from pi_condense.render import render
from pi_condense.state import PrunerState
from support.builders import NO_CHAIN, assert_same_render, example
from support.debug_alloc import run_under_debug_allocator


def _warm(messages: list, state: PrunerState) -> None:
    # Two renders: the first sees the objects, the second remembers them (test_size_memo).
    for _ in range(2):
        render(messages, state, NO_CHAIN)


def assert_plain(messages: list, state: PrunerState) -> None:
    """The frozen render of ``messages`` is exact and equals a fresh render of a copy."""
    frozen = render(messages, state, NO_CHAIN, frozen=True)
    assert frozen.pruned
    assert frozen.before_chars == jsjson.length(messages)
    assert frozen.after_chars == jsjson.length(frozen.messages)
    assert_same_render(frozen, render(copy.deepcopy(messages), example()[1], NO_CHAIN))


def test_a_frozen_render_of_untouched_objects_is_the_plain_render() -> None:
    messages, state = example()
    _warm(messages, state)
    hits = state.render_cache.stats[0]
    assert_plain(messages, state)
    assert state.render_cache.stats[0] == hits + len(messages)  # every message reused


def test_a_growing_list_renders_as_without_the_promise() -> None:
    messages, state = example()
    _warm(messages, state)
    assert_plain([*messages, {"role": "user", "content": "and now?", "timestamp": 900}], state)


def test_without_the_promise_an_in_place_change_is_seen() -> None:
    messages, state = example()
    _warm(messages, state)
    messages[2]["content"][0]["text"] = "y" * 7000
    plain = render(messages, state, NO_CHAIN)
    assert plain.before_chars == jsjson.length(messages)


def test_a_broken_promise_gives_the_remembered_length() -> None:
    messages, state = example()
    _warm(messages, state)
    remembered = jsjson.length(messages)
    messages[2]["content"][0]["text"] = "y" * 7000
    frozen = render(messages, state, NO_CHAIN, frozen=True)
    assert frozen.before_chars == remembered != jsjson.length(messages)


def test_a_broken_promise_never_reads_freed_strings() -> None:
    # The kept view of the result borrows its toolCallId text; replace the id by another
    # string and drop every other reference to the old one: the memo's trail still holds it,
    # so the frozen render reads the old text (stale), not freed memory.
    messages, state = example()
    messages[1]["content"][0]["id"] = "".join(["tc", "1"])
    messages[2]["toolCallId"] = "".join(["tc", "1"])
    _warm(messages, state)
    expected = render(copy.deepcopy(messages), example()[1], NO_CHAIN)
    messages[2]["toolCallId"] = "".join(["zz", "9"])
    gc.collect()
    junk = ["Q" * 3 + str(i) for i in range(20000)]  # reuse freed blocks, if any
    frozen = render(messages, state, NO_CHAIN, frozen=True)
    del junk
    # The decision read the remembered view (the old id: still the t1 stub); the stub's own
    # fields are copied from the message as it is now.
    stub = frozen.messages[2]
    assert stub["content"] == expected.messages[2]["content"]
    assert "t1" in stub["content"][0]["text"]
    assert stub["toolCallId"] == "zz9"


def test_under_the_debug_allocator(tmp_path: Path) -> None:
    out = run_under_debug_allocator(__file__, tmp_path, "debug_allocator or replay")
    assert "5 passed" in out


def test_the_frozen_replay_writes_what_fresh_copies_write(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    # The replay promises frozen messages to its own Condenser (one copy per message for
    # every call, and the chain scans lend their views); with a factory it hands a fresh
    # deep copy to every call instead, and the condenser is told nothing.
    from pi_condense.condenser import Condenser
    from pi_condense.config import Config
    from pi_condense.replay import ReplayOptions, replay
    from pi_condense.session import SessionFile
    from pi_condense.summarize.factory import make_summarizer

    config = Config.from_settings_dict({"enabled": True})
    source = SessionFile.load(fixtures_dir / "large-session.jsonl")

    def run(factory: Any) -> Any:
        options = ReplayOptions(session_dir=str(tmp_path), record_contexts=True)
        summarizer = make_summarizer("default", config=config)
        return replay(source, config, summarizer, options, condenser_factory=factory)

    frozen, fresh = run(None), run(Condenser)
    assert frozen.condenser is not None
    assert fresh.condenser is not None
    assert frozen.condenser._frozen_messages
    assert not fresh.condenser._frozen_messages
    assert frozen.counts["llmCalls"] == 453
    assert frozen.session_text() == fresh.session_text()
    assert frozen.contexts.jsonl() == fresh.contexts.jsonl()
    assert frozen.summarizer.jsonl() == fresh.summarizer.jsonl()
    assert "context-prune-chain" in frozen.session_text()
