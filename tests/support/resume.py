"""Shared by the resumed-render tests: a turn of the growing history, a frozen render checked
against a fresh one, the render cache's resume counters."""

from __future__ import annotations

import copy
from typing import Any

from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import RenderResult, render
from pi_condense.state import PrunerState
from support.builders import assert_same_render, assistant, call, cfg, example, result, user

CONFIG = cfg()
Messages = list[Any]


def turn(i: int, *, errored: bool = False) -> Messages:
    ts = 5000 + 10 * i
    return [
        user(ts, f"step {i}"),
        assistant(ts + 1, call(f"call-{i}", "read", path=f"/f{i}" * (200 if errored else 1))),
        result(f"call-{i}", ts + 2, f"output {i} " * 20, isError=errored),
    ]


def fresh(
    messages: Messages, config: Config = CONFIG, records: tuple[dict[str, Any], ...] = ()
) -> RenderResult:
    state = example()[1]
    if records:
        state.add_batch(list(records))
    return render(copy.deepcopy(messages), state, config)


def check(
    messages: Messages,
    state: PrunerState,
    config: Config = CONFIG,
    records: tuple[dict[str, Any], ...] = (),
) -> RenderResult:
    """A frozen render, asserted equal to a fresh render of a copy against a fresh state (the
    example's, plus ``records``)."""
    got = render(messages, state, config, frozen=True)
    if got.pruned:
        assert got.before_chars == jsjson.length(messages)
        assert got.after_chars == jsjson.length(got.messages)
    assert_same_render(got, fresh(messages, config, records))
    return got


def stats(state: PrunerState) -> dict[str, int]:
    return state.render_cache.resume_stats


SUMMARIZED_2: dict[str, Any] = {
    "toolCallId": "call-2",
    "toolName": "read",
    "args": {"path": "/f2"},
    "resultText": "output 2",
    "isError": False,
    "turnIndex": 2,
    "timestamp": 5021,
    "resultTimestamp": 5022,
}
"""The index record that summarizes the result of ``turn(2)``."""
