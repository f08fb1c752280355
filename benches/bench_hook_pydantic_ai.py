"""CondenseHistory per model call vs pydantic-ai's own serialization of the same history.

A synthetic pydantic-ai conversation (``ModelRequest`` / ``ModelResponse``: prompts, tool
calls, tool returns of 1-3 KB, final replies) is fed to a :class:`CondenseHistory` prompt by
prompt (the driver derives Pi's events from the messages, so the session holds summaries), and
its session is scaled to 10,000 messages (``PI_CONDENSE_BENCH_HOOK_MESSAGES``) with the
benchmarks' generator, so that the render stubs most returns. Then:

- subject: ``hook.condense(history)`` for the whole history, the history loaded as fresh
  objects before every round (``ModelMessagesTypeAdapter.validate_json`` of the saved
  history: what a restarted process or a stored conversation hands over; within one run
  pydantic-ai passes the same objects, the faster path): expand into request parts, compare
  with the previous call, decode what differs, render, encode, assemble;
- baseline: ``ModelMessagesTypeAdapter.dump_json(history)`` on the same fresh objects
  (pydantic-ai's own serializer: what saving the history costs).

The output is checked: returns became stubs, the request is valid (each return right after
its call), and untouched messages are the caller's own objects.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

import generate
from pi_condense.adapters.base import Out
from pi_condense.adapters.pydantic_ai import MARK, PydanticAICodec, assemble
from pi_condense.integrations.pydantic_ai import CondenseHistory
from pi_condense.session import SessionFile

Record = Callable[[Any, str, str, int], None]

MESSAGES = int(os.environ.get("PI_CONDENSE_BENCH_HOOK_MESSAGES", "10000"))
SOURCE_PROMPTS = 20
TURNS = 4  # per prompt: a request, 4 x (call, returns), a reply = 10 messages
ROUNDS = 15


def _output(p: int, t: int) -> str:
    lines = 20 + (p * 7 + t * 3) % 40
    return "".join(
        f"src/mod{p}/f{t}.py:{n}: item_{n} = load({p}, {t}, {n})\n" for n in range(lines)
    )


def _prompt(p: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(f"task {p}: fix {p}")])]
    for t in range(TURNS):
        call_id = f"call_{p}_{t}"
        path = f"src/mod{p}/f{t}.py"
        messages.append(
            ModelResponse(parts=[ToolCallPart("read_file", {"path": path}, tool_call_id=call_id)])
        )
        messages.append(
            ModelRequest(parts=[ToolReturnPart("read_file", _output(p, t), tool_call_id=call_id)])
        )
    messages.append(ModelResponse(parts=[TextPart(f"module {p} fixed")]))
    return messages


class Workload:
    def __init__(self, hook: CondenseHistory, saved: bytes, count: int) -> None:
        self.hook = hook
        self.saved = saved
        self.count = count

    def fresh(self) -> list[ModelMessage]:
        return ModelMessagesTypeAdapter.validate_json(self.saved)


def _host_history(session: SessionFile) -> list[ModelMessage]:
    """The session's conversation as pydantic-ai messages (what a run's history holds)."""
    hosts = [
        {k: v for k, v in m.items() if k != "timestamp"}
        for m in session.build_context().messages
        if m.get("role") in ("user", "assistant", "toolResult")
    ]
    history = assemble(PydanticAICodec().encode([Out(m, ()) for m in hosts]))
    # The codec marks the returns it makes as its own output; a run's own history has no mark.
    for message in history:
        for part in message.parts:
            if getattr(part, "metadata", None) == MARK:
                part.metadata = None
    return history


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    # A source conversation taken in through the hook prompt by prompt, as an agent would,
    # then scaled to the size asked for with the benchmarks' session generator (each copy a
    # new stretch of the same conversation, its pruner entries rewritten to match): taking
    # 10k messages in through the driver one call at a time still costs minutes (issue 18).
    directory = tmp_path_factory.mktemp("hook-pydantic-ai")
    source = CondenseHistory(session=directory / "source.jsonl")
    history: list[ModelMessage] = []
    for prompt in range(SOURCE_PROMPTS):
        messages = _prompt(prompt)
        history.append(messages[0])
        source.condense(history)  # the prompt's first model call (the flush of the last one)
        history.extend(messages[1:])
    source.close(history)
    copies = -(-MESSAGES // len(history))
    data = (directory / "source.jsonl").read_bytes()
    scaled = directory / "scaled.jsonl"
    scaled.write_text("".join(f"{line}\n" for line in generate.scale_lines(data, copies)), "utf-8")
    hook = CondenseHistory(session=scaled)
    history = _host_history(hook.session)
    saved = ModelMessagesTypeAdapter.dump_json(history)
    hook.condense(ModelMessagesTypeAdapter.validate_json(saved))
    # the scaled session already holds every message: nothing new, nothing rebuilt
    assert hook.stats.messages_seen == 0
    assert hook.stats.rebuilds == 0
    return Workload(hook, saved, len(history))


def _check(sent: list[ModelMessage], history: list[ModelMessage]) -> None:
    parts = [p for m in sent if isinstance(m, ModelRequest) for p in m.parts]
    stubs = [
        p for p in parts if isinstance(p, ToolReturnPart) and "context_tree_query" in str(p.content)
    ]
    chains = [
        p for p in parts if isinstance(p, UserPromptPart) and "<compressed-chain" in p.content
    ]
    raw = [p for p in parts if isinstance(p, ToolReturnPart) and "item_" in str(p.content)]
    assert stubs
    assert chains
    assert len(raw) < len(history) // 20  # (most outputs are condensed)
    size = len(ModelMessagesTypeAdapter.dump_json(sent))
    assert size < 0.5 * len(ModelMessagesTypeAdapter.dump_json(history))
    open_calls: set[str] = set()
    for message in sent:
        if isinstance(message, ModelResponse):
            assert not open_calls
            open_calls = {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                open_calls.remove(part.tool_call_id)
        assert not open_calls
    # a message holding only the caller's parts is the caller's very own object
    mine = {id(m) for m in history}
    own_parts = {id(p) for m in history for p in m.parts}
    untouched = [m for m in sent if all(id(p) in own_parts for p in m.parts)]
    assert len(untouched) > len(sent) // 4
    assert all(id(m) in mine for m in untouched)


def test_pydantic_serialization_of_history(
    benchmark: Any, record: Record, workload: Workload
) -> None:
    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (workload.fresh(),), {}

    result = benchmark.pedantic(
        ModelMessagesTypeAdapter.dump_json, setup=setup, rounds=ROUNDS, warmup_rounds=1
    )
    record(benchmark, "hook-pydantic-ai", "baseline", 1)
    assert len(ModelMessagesTypeAdapter.validate_json(result)) == workload.count


def test_condense_history_per_call(benchmark: Any, record: Record, workload: Workload) -> None:
    histories: list[list[ModelMessage]] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        histories.append(workload.fresh())
        return (histories[-1],), {}

    sent = benchmark.pedantic(workload.hook.condense, setup=setup, rounds=ROUNDS, warmup_rounds=1)
    record(benchmark, "hook-pydantic-ai", "subject", 1)
    assert workload.hook.stats.rebuilds == 0
    _check(sent, histories[-1])
