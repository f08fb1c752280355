"""Render vs serializing the same messages with orjson.

Two workloads, each against ``orjson.dumps(messages)`` of the very list rendered:

- full render: the context of ``large-default`` (the reference's pruned replay session: 203
  summarized results, 57 summaries and 65 compressed chains per copy) scaled x10 / x100,
  rendered against its own rebuilt state with the vector's config, again and again as a
  host does before every model call: the state's size memo knows every message from the
  previous round. Target: <= 0.5x. The output is checked against the reference's
  ``render.json``, rewritten per copy (``generate.expected_render``), and both char counts
  against the JS lengths;
- cold full render: the first render of the session's messages as a host hands them over,
  new objects (Pi clones the context before every call; framework adapters convert):
  before each round the messages are copied anew (``orjson.loads`` of their JSON) and the
  size memo is emptied, and the baseline is ``orjson.dumps`` of such a new copy too. New
  strings have no UTF-8 form cached yet: ``orjson.dumps`` makes one for each non-ASCII
  string (and leaves it on the string), the render measures their characters in place;
- cold render of the same objects (``cold-same``, reported): the size memo emptied before
  each round but the very objects of the previous rounds, divided by the repeated dumps;
- no-op render: the context of the raw fixture ``large-session`` scaled the same way
  (nothing summarized, no chains, no orphan, no errored call worth purging), rendered with
  the same config: every phase runs and changes nothing, and the very input list comes back.
  Target: <= 0.05x.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson
import pytest

import generate
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import RenderResult, render

Record = Callable[[Any, str, str, int], None]

# Rounds of the cold render (pedantic mode: setup runs before each round).
COLD_ROUNDS = 15


def test_orjson_dumps_pruned_context(
    benchmark: Any, record: Record, pruned: generate.Workload, copies: int
) -> None:
    messages = pruned.messages
    result = benchmark(orjson.dumps, messages)
    record(benchmark, "render", "baseline", copies)  # also the "cold-same" pair's baseline
    assert len(orjson.loads(result)) == len(messages)


def test_render_full(
    benchmark: Any,
    record: Record,
    pruned: generate.Workload,
    vector_config: Config,
    copies: int,
) -> None:
    messages, state = pruned.messages, pruned.state
    result = benchmark(render, messages, state, vector_config)
    record(benchmark, "render", "subject", copies)
    assert state.render_cache.stats[0] > 0  # the rounds after the first reused remembered sizes
    _check_full_render(result, messages, copies)


def test_orjson_dumps_new_objects(
    benchmark: Any, record: Record, pruned: generate.Workload, copies: int
) -> None:
    text = orjson.dumps(pruned.messages)

    def new_copy() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (orjson.loads(text),), {}

    result = benchmark.pedantic(orjson.dumps, setup=new_copy, rounds=COLD_ROUNDS, warmup_rounds=1)
    record(benchmark, "cold", "baseline", copies)
    assert result == text


@pytest.mark.parametrize("objects", ["new", "same"])
def test_render_full_cold(
    benchmark: Any,
    record: Record,
    pruned: generate.Workload,
    vector_config: Config,
    copies: int,
    objects: str,
) -> None:
    messages, state = pruned.messages, pruned.state
    text = orjson.dumps(messages)

    def first_render() -> tuple[tuple[Any, ...], dict[str, Any]]:
        state.render_cache.clear()
        handed = orjson.loads(text) if objects == "new" else messages
        return (handed, state, vector_config), {}

    result = benchmark.pedantic(render, setup=first_render, rounds=COLD_ROUNDS, warmup_rounds=1)
    record(benchmark, "cold" if objects == "new" else "cold-same", "subject", copies)
    _check_full_render(result, messages, copies)


def _check_full_render(result: RenderResult, messages: list[Any], copies: int) -> None:
    expected = generate.expected_render(copies)
    assert result.pruned
    assert not result.threw
    assert result.diagnostics == ()
    assert result.messages == expected
    assert result.before_chars == jsjson.length(messages)
    assert result.after_chars == jsjson.length(expected)
    assert result.after_chars < result.before_chars


def test_orjson_dumps_noop_context(
    benchmark: Any, record: Record, raw: generate.Workload, copies: int
) -> None:
    messages = raw.messages
    result = benchmark(orjson.dumps, messages)
    record(benchmark, "noop", "baseline", copies)
    assert len(orjson.loads(result)) == len(messages)


def test_render_noop(
    benchmark: Any, record: Record, raw: generate.Workload, vector_config: Config, copies: int
) -> None:
    messages, state = raw.messages, raw.state
    result = benchmark(render, messages, state, vector_config)
    record(benchmark, "noop", "subject", copies)
    assert not result.pruned
    assert result.messages is messages
    assert (result.before_chars, result.after_chars) == (0, 0)
    assert result.diagnostics == ()
    assert len(messages) == generate.source_counts("large-session").messages * copies
