"""The Agents SDK hook (``CondenseFilter``) per model call and on joining late, 10k items.

The history is ``bench_hook_adapters``' Responses conversation: 1,000 prompts, each four tool
calls with ~1.5 KB outputs and a final answer (10,000 items). Pairs, each divided in one run:

- ``hook-trim``: a call with nothing new, the history handed over as a fresh copy (as the
  SDK builds it before every model call), against the SDK's own ``ToolOutputTrimmer`` called
  the same way on the same copy. Target <= 1.5x.
- ``hook-kept``: the same call with every copy kept alive by the bench (a host that
  keeps its history), against ``orjson.dumps`` of such a copy: the hook's own work, which the
  target (<= 2x) is checked on.
- ``hook-agents`` (``bench_hook_adapters``): the same call as the host makes it when it drops
  each copy after its call: the driver holds the previous copy (the next call compares with
  it), so the host's last reference to it goes before the hook's, and freeing it (1.3-1.7 ms at
  10k items, about 0.6x ``orjson.dumps``) lands in the next hook call. Without the hook the
  host frees each copy itself after its call: the same work, counted in no baseline here (the
  baseline's copies are freed in its setup, outside the timer). A regression bound, no target.
- ``hook-same``: the very objects of the previous call handed over again, against
  ``orjson.dumps`` of them. Target <= 1x.
- ``late-join``: the first call of a new hook on the whole 10k history (an agent that turns
  pi-condense on mid-conversation, a restart without the session file), against decoding the
  history and the cold render of the session it makes (new objects, size memo emptied).
  Target <= 1.5x. The late join takes the history in as Pi opens a session and summarizes
  what is pending at once (4,000 tool outputs with the offline summarizer), so its ratio is
  mostly that flush and the 19k session entries it writes (docs/performance.md, the table).
- ``join-defer``: the same first call of a hook made with ``join="defer"``, which stores
  the history and renders it, leaving the backlog's summaries to the next call; divided by
  the same baseline. Target <= 1.5x.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

import orjson
import pytest

from bench_hook_adapters import Prepared
from pi_condense.adapters.openai_responses import OpenAIResponsesCodec
from pi_condense.integrations.openai_agents import CondenseFilter
from pi_condense.live import JoinMode
from pi_condense.render import render
from pi_condense.state import PrunerState

Record = Callable[[Any, str, str, int], None]

ROUNDS = 5
LATE_ROUNDS = 2
SCALE = 1


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return Prepared("hook-agents", tmp_path_factory.mktemp("hook-call"))


def _trimmer_call(items: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    from agents.run_config import CallModelData, ModelInputData

    data = CallModelData(
        model_data=ModelInputData(input=items, instructions=None), agent=None, context=None
    )  # type: ignore[arg-type]
    return (data,), {}


def test_trimmer_fresh_history(benchmark: Any, record: Record, agents: Prepared) -> None:
    from agents.extensions.tool_output_trimmer import ToolOutputTrimmer

    trimmer = ToolOutputTrimmer()
    result = benchmark.pedantic(
        trimmer, setup=lambda: _trimmer_call(agents.fresh()[0][0]), rounds=ROUNDS * 2
    )
    record(benchmark, "hook-trim", "baseline", SCALE)
    assert len(orjson.dumps(result.input)) < len(agents.json)


def test_hook_fresh_history_vs_trimmer(benchmark: Any, record: Record, agents: Prepared) -> None:
    seen = agents.hook.stats.messages_seen
    result = benchmark.pedantic(agents.hook.condense, setup=agents.fresh, rounds=ROUNDS)
    record(benchmark, "hook-trim", "subject", SCALE)
    assert agents.hook.stats.messages_seen == seen  # the copies were recognised
    assert agents.hook.stats.rebuilds == 0
    assert len(orjson.dumps(result)) < 0.5 * len(agents.json)


class Kept:
    """Fresh copies of the history that the bench keeps alive (a host that keeps its history):
    no copy is freed while a round is timed, neither the hook's previous one nor the
    baseline's."""

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.copies: list[Any] = []

    def fresh(self) -> tuple[tuple[list[Any]], dict[str, Any]]:
        args, kwargs = self.prepared.fresh()
        self.copies.append(args[0])
        return args, kwargs


def test_orjson_dumps_fresh_kept(benchmark: Any, record: Record, agents: Prepared) -> None:
    kept = Kept(agents)
    result = benchmark.pedantic(orjson.dumps, setup=kept.fresh, rounds=ROUNDS * 3)
    record(benchmark, "hook-kept", "baseline", SCALE)
    assert len(result) == len(agents.json)


def test_hook_fresh_history_kept(benchmark: Any, record: Record, agents: Prepared) -> None:
    seen = agents.hook.stats.messages_seen
    kept = Kept(agents)
    result = benchmark.pedantic(agents.hook.condense, setup=kept.fresh, rounds=ROUNDS)
    record(benchmark, "hook-kept", "subject", SCALE)
    assert agents.hook.stats.messages_seen == seen  # the copies were recognised
    assert agents.hook.stats.rebuilds == 0
    assert len(kept.copies) >= ROUNDS  # every round's copy outlived the round
    assert len(orjson.dumps(result)) < 0.5 * len(agents.json)
    assert result[0] is kept.copies[-1][0]  # the caller's own objects where untouched


def test_orjson_dumps_same_history(benchmark: Any, record: Record, agents: Prepared) -> None:
    result = benchmark.pedantic(orjson.dumps, args=(agents.history,), rounds=ROUNDS * 3)
    record(benchmark, "hook-same", "baseline", SCALE)
    assert len(result) == len(agents.json)


def test_hook_same_history(benchmark: Any, record: Record, agents: Prepared) -> None:
    agents.hook.condense(agents.history)
    result = benchmark.pedantic(agents.hook.condense, args=(agents.history,), rounds=ROUNDS)
    record(benchmark, "hook-same", "subject", SCALE)
    assert len(orjson.dumps(result)) < 0.5 * len(agents.json)
    kept = {id(item) for item in agents.history}
    assert result[0] is agents.history[0]  # untouched items are the caller's own objects
    assert sum(id(item) in kept for item in result) > len(result) // 4


class LateJoin:
    """A new session file per round, and the session one late join made (for the baseline)."""

    def __init__(self, directory: Path, prepared: Prepared) -> None:
        self.directory = directory
        self.json = prepared.json
        self.rounds = 0
        hook = self.fresh_hook()
        self.items = len(orjson.loads(self.json))
        hook.condense(orjson.loads(self.json))
        hook.close()
        self.session = hook.session
        self.context = orjson.dumps(self.session.build_context().messages)
        self.state = PrunerState.from_session(self.session)
        self.config = hook.driver.condenser.config

    def fresh_hook(self, join: JoinMode = "flush") -> CondenseFilter:
        self.rounds += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return CondenseFilter(session=self.directory / f"late-{self.rounds}.jsonl", join=join)

    def subject(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.fresh_hook(), orjson.loads(self.json)), {}

    def deferring(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.fresh_hook("defer"), orjson.loads(self.json)), {}

    def baseline(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        self.state.sizes.clear()
        return (orjson.loads(self.json), orjson.loads(self.context)), {}

    def decode_and_render(self, items: list[Any], messages: list[Any]) -> Any:
        OpenAIResponsesCodec().decode(items)
        return render(messages, self.state, self.config)


@pytest.fixture(scope="module")
def late(tmp_path_factory: pytest.TempPathFactory, agents: Prepared) -> LateJoin:
    return LateJoin(tmp_path_factory.mktemp("late-join"), agents)


def test_cold_render_and_decode(benchmark: Any, record: Record, late: LateJoin) -> None:
    result = benchmark.pedantic(late.decode_and_render, setup=late.baseline, rounds=ROUNDS)
    record(benchmark, "late-join", "baseline", SCALE)
    assert result.pruned


def test_hook_late_join(benchmark: Any, record: Record, late: LateJoin) -> None:
    result = benchmark.pedantic(CondenseFilter.condense, setup=late.subject, rounds=LATE_ROUNDS)
    record(benchmark, "late-join", "subject", SCALE)
    assert len(orjson.dumps(result)) < 0.5 * len(late.json)


def test_hook_late_join_deferred(benchmark: Any, record: Record, late: LateJoin) -> None:
    result = benchmark.pedantic(CondenseFilter.condense, setup=late.deferring, rounds=LATE_ROUNDS)
    record(benchmark, "join-defer", "subject", SCALE)
    assert len(result) == late.items  # stored and rendered, the backlog not summarized yet
