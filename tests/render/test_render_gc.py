"""The render pauses the cyclic collector while it builds its output, and restores it."""

from __future__ import annotations

import gc

from pi_condense.render import render
from support.builders import NO_CHAIN, example


def test_a_render_leaves_the_collector_running_when_it_was() -> None:
    messages, state = example()
    assert gc.isenabled()
    assert render(messages, state, NO_CHAIN).pruned
    assert gc.isenabled()


def test_a_render_leaves_the_collector_paused_when_it_was() -> None:
    messages, state = example()
    gc.disable()
    try:
        assert render(messages, state, NO_CHAIN).pruned
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_render_that_raises_leaves_the_collector_running() -> None:
    messages, state = example()
    messages[2]["details"] = {"odd": {1, 2}}  # a set: not JSON, raises while measuring
    try:
        render(messages, state, NO_CHAIN)
    except TypeError:
        pass
    else:
        raise AssertionError("a set inside a message must not render")
    assert gc.isenabled()
