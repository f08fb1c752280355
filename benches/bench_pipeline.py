"""The pipeline around the render, per model call: condense at three sizes, the live Condenser.

Condense (issue 18): ``replay`` of the raw fixture ``large-session`` scaled x1, x3 and x10
(``generate.scaled_session``: 453, 1,359 and 4,530 model calls) through a new Condenser with
the offline default summarizer and config ``{"enabled": true}``, contexts not recorded: what
``pi-condense condense`` does, without writing the file. A round is a whole replay; its time
is divided by the model calls (``extra_info["per"]``), so the table shows time per model
call. Pairs:

- ``condense-x3``: per call at x3 / per call at x1;
- ``condense-x10``: per call at x10 / per call at x1 (the growth ratio; 1.0 is linear). One
  round of x10 (about 110 s of CPU on the loaded development VM), two of x3, three of x1.

Both outputs are checked (the same counts of model calls, summaries and chains per copy).

Live (``live``): a Condenser on the pruned session ``large-default`` scaled x11 (about
10,000 messages in the context, 600 summaries, 700 compressed chains). A round is one model
call of a host that keeps its message list: ``message_end`` + append for an assistant message
with a tool call and for its result, ``turn_end``, then ``context(messages)``; the baseline is
``render`` alone of the same list against the same state (what ``context`` itself calls).
The ratio is the events' and the facade's overhead per call beyond the render.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, Callable

import pytest

import generate
from pi_condense.condenser import Condenser
from pi_condense.config import Config
from pi_condense.render import render
from pi_condense.replay import ReplayOptions, ReplayResult, replay
from pi_condense.session import SessionFile
from pi_condense.summarize.factory import make_summarizer

Record = Callable[[Any, str, str, int], None]

SOURCE = "large-session"
CALLS_PER_COPY = 453
LIVE_COPIES = 11
ROUNDS = {1: 3, 3: 2, 10: 1}


def _condense(copies: int) -> ReplayResult:
    config = Config.from_settings_dict({"enabled": True})
    source = SessionFile.load(generate.scaled_session(SOURCE, copies))
    summarizer = make_summarizer("default", config=config)
    options = ReplayOptions(record_contexts=False, deterministic=False)
    return replay(source, config, summarizer, options)


def _check_condense(result: ReplayResult, copies: int) -> None:
    assert result.counts["llmCalls"] == CALLS_PER_COPY * copies
    assert not result.handler_errors
    by_type = result.entry_counts()
    # Every copy flushes as the x1 condense does: 223 frontiers with our default budget
    # trigger (an unset autoBudgetThreshold acts as 0.5, so most turns past half the window
    # flush; 68 without it, as the reference), each flush with its metrics entry, and
    # compresses its chains (64 at x1); later copies dedupe more and more of their summaries
    # by content, past the first copy's 57.
    frontiers = by_type["custom:context-prune-frontier"]
    assert frontiers == 223 * copies
    assert by_type["custom:context-prune-flush-metrics"] >= frontiers
    assert by_type["custom:context-prune-chain"] >= 60 * copies
    assert by_type["custom_message:context-prune-summary"] >= 57
    if copies > 1:
        assert by_type["custom:context-prune-dedup-alias"] > 0


@pytest.mark.parametrize("scale", [1, 3, 10], ids=["x1", "x3", "x10"])
def test_condense_per_call(benchmark: Any, record: Record, scale: int) -> None:
    generate.scaled_session(SOURCE, scale)  # generated outside the rounds
    result = benchmark.pedantic(_condense, args=(scale,), rounds=ROUNDS[scale], iterations=1)
    benchmark.extra_info["per"] = result.counts["llmCalls"]
    if scale == 1:
        record(benchmark, "condense-x3", "baseline", 10)
    else:
        record(benchmark, f"condense-x{scale}", "subject", 10)
    _check_condense(result, scale)


def _output(turn: int) -> str:
    return "".join(f"src/part{turn}.py:{n}: value_{n} = load({turn})\n" for n in range(40))


class _Host:
    """A host holding the session, its message list and a Condenser, one tool turn a call."""

    def __init__(self, text: str, config: Config) -> None:
        self.session = SessionFile.parse(text)
        self.condenser = Condenser(
            self.session, config, summarizer=make_summarizer("default", config=config)
        )
        self.condenser.session_start()
        self.messages: list[Any] = list(self.session.build_context().messages)
        self.loop = asyncio.new_event_loop()
        self.turn = 0
        self.assistants = sum(1 for m in self.messages if m.get("role") == "assistant")
        self.stamp = max(
            (m.get("timestamp") for m in self.messages if isinstance(m.get("timestamp"), int)),
            default=0,
        )

    def model_call(self) -> Any:
        self.turn += 1
        self.stamp += 1000
        call_id = f"bench_call_{self.turn}"
        assistant = {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"reading part {self.turn}"},
                {
                    "type": "toolCall",
                    "id": call_id,
                    "name": "read",
                    "arguments": {"path": f"src/part{self.turn}.py"},
                },
            ],
            "stopReason": "toolUse",
            "timestamp": self.stamp,
        }
        result = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": "read",
            "content": [{"type": "text", "text": _output(self.turn)}],
            "isError": False,
            "timestamp": self.stamp + 500,
        }
        self.loop.run_until_complete(self._events(assistant, result))
        return self.condenser.context(self.messages)

    async def _events(self, assistant: dict[str, Any], result: dict[str, Any]) -> None:
        for message in (assistant, result):
            await self.condenser.message_end(message)
            self.session.append_message(message)
            self.messages.append(message)
        # the branch-global turn index (the reference-mode config takes the caller's)
        await self.condenser.turn_end(assistant, [result], self.assistants)
        self.assistants += 1


@pytest.fixture(scope="module")
def live_host() -> Iterator[_Host]:
    workload = generate.load_workload(generate.REPLAY_VECTOR, LIVE_COPIES)
    host = _Host(workload.path.read_text(encoding="utf-8"), generate.vector_config())
    assert len(host.messages) >= 10_000
    host.model_call()  # the first call measures every message (the size memo is empty)
    yield host
    host.loop.close()


def test_live_render_alone(benchmark: Any, record: Record, live_host: _Host) -> None:
    host = live_host
    state, config = host.condenser.state, host.condenser.config
    result = benchmark(render, host.messages, state, config)
    record(benchmark, "live", "baseline", 10)
    assert result.pruned


def test_live_per_call(benchmark: Any, record: Record, live_host: _Host) -> None:
    host = live_host
    before = len(host.messages)
    result = benchmark(host.model_call)
    record(benchmark, "live", "subject", 10)
    assert result.pruned
    assert len(host.messages) > before
    # every call queued its tool turn; nothing flushed (no final reply, no budget)
    assert host.condenser.pending_count == host.turn
