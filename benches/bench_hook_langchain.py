"""CondenseMiddleware per model call vs LangChain's own serialization of the same history.

A synthetic LangChain agent history of about 10,000 messages (prompts, tool calls, tool
results of 1-3 KB, final replies) whose session holds the pruner's summaries, so that the render
stubs most results (see the ``workload`` fixture). Then:

- subject: ``middleware.condense(history)`` for the whole history, with the history rebuilt as
  fresh message objects before every round (``create_agent`` hands the middleware the state's
  objects, but a checkpointer or a serialized history gives new ones; this is the slower
  path): compare with the previous call, decode what differs, render, encode;
- baseline: ``orjson.dumps(messages_to_dict(history))`` on the same fresh objects
  (LangChain's own serializer, then bytes: what saving the history costs).

The output is checked: results became stubs, the request is valid (each result right after
its call), and untouched messages are the caller's own objects.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson
import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

import generate
from pi_condense.adapters.base import Out
from pi_condense.adapters.langchain_messages import LangChainCodec
from pi_condense.integrations.langchain import CondenseMiddleware
from pi_condense.session import SessionFile

Record = Callable[[Any, str, str, int], None]

MESSAGES = 10_000
TURNS = 4  # tool-call turns per prompt: 1 user + 4 x (call + result) + 1 reply = 10 messages
ROUNDS = 15
SOURCE_PROMPTS = 20


def _output(p: int, t: int) -> str:
    lines = 20 + (p * 7 + t * 3) % 40
    return "".join(f"src/mod{p}/f{t}.py:{n}: item_{n} = load({p}, {t})\n" for n in range(lines))


def _prompt(p: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage(content=f"task {p}: fix module {p}")]
    for t in range(TURNS):
        call_id = f"call_{p}_{t}"
        messages.append(
            AIMessage(
                content="",
                tool_calls=[
                    {
                        "type": "tool_call",
                        "id": call_id,
                        "name": "read_file",
                        "args": {"path": f"src/mod{p}/f{t}.py"},
                    }
                ],
            )
        )
        messages.append(ToolMessage(content=_output(p, t), tool_call_id=call_id, name="read_file"))
    messages.append(AIMessage(content=f"module {p} fixed"))
    return messages


class Workload:
    def __init__(self, middleware: CondenseMiddleware, dicts: list[dict[str, Any]]) -> None:
        self.middleware = middleware
        self.dicts = dicts

    def fresh(self) -> list[BaseMessage]:
        return messages_from_dict(self.dicts)


def _host_history(session: SessionFile) -> list[BaseMessage]:
    """The session's conversation as LangChain messages (what the agent's state holds)."""
    codec = LangChainCodec()
    hosts = [
        {k: v for k, v in m.items() if k != "timestamp"}
        for m in session.build_context().messages
        if m.get("role") in ("user", "assistant", "toolResult")
    ]
    history: list[BaseMessage] = codec.encode([Out(m, ()) for m in hosts])
    return history


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    # A source conversation taken in through the middleware as an agent would (one call per
    # model step), then scaled to ~10k messages with the benchmarks' session generator (each
    # copy a new stretch of the same conversation, its pruner entries rewritten to match):
    # taking 10k messages in through the driver costs minutes (every event reads the branch).
    directory = tmp_path_factory.mktemp("hook-langchain")
    source = CondenseMiddleware(session=directory / "source.jsonl")
    history: list[BaseMessage] = []
    for prompt in range(SOURCE_PROMPTS):
        messages = _prompt(prompt)
        history.append(messages[0])
        for k in range(1, len(messages), 2):
            source.condense(history)
            history.extend(messages[k : k + 2])
    source.flush(history)
    source.close()
    copies = -(-MESSAGES // len(history))
    data = (directory / "source.jsonl").read_bytes()
    scaled = directory / "scaled.jsonl"
    scaled.write_text("".join(f"{line}\n" for line in generate.scale_lines(data, copies)), "utf-8")
    middleware = CondenseMiddleware(session=scaled)
    history = _host_history(middleware.session)
    first = middleware.condense(history)
    # the scaled session already holds every message: nothing new, nothing rebuilt
    assert middleware.stats.messages_seen == 0
    assert middleware.stats.rebuilds == 0
    _check(first, history)
    return Workload(middleware, messages_to_dict(history))


def _check(sent: list[BaseMessage], history: list[BaseMessage]) -> None:
    """Condensed (stubs and compressed chains), valid, and the caller's own objects kept."""
    stubs = [m for m in sent if isinstance(m, ToolMessage) and "context_tree_query" in m.text]
    chains = [m for m in sent if isinstance(m, HumanMessage) and "<compressed-chain" in m.text]
    assert stubs
    assert chains
    assert len(orjson.dumps(messages_to_dict(sent))) < 0.5 * len(
        orjson.dumps(messages_to_dict(history))
    )
    open_calls: set[str] = set()
    for message in sent:
        if isinstance(message, ToolMessage):
            open_calls.remove(message.tool_call_id)
            continue
        assert not open_calls
        if isinstance(message, AIMessage):
            open_calls = {c["id"] for c in message.tool_calls if c["id"] is not None}
    prompts = [m for m in history if isinstance(m, HumanMessage)]
    sent_ids = {id(m) for m in sent}
    assert all(id(m) in sent_ids for m in prompts)


def test_langchain_serialization_of_history(
    benchmark: Any, record: Record, workload: Workload
) -> None:
    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (workload.fresh(),), {}

    def serialize(history: list[BaseMessage]) -> bytes:
        return orjson.dumps(messages_to_dict(history))

    result = benchmark.pedantic(serialize, setup=setup, rounds=ROUNDS, warmup_rounds=1)
    record(benchmark, "hook-langchain", "baseline", 1)
    assert len(orjson.loads(result)) == len(workload.dicts)


def test_condense_middleware_per_call(benchmark: Any, record: Record, workload: Workload) -> None:
    histories: list[list[BaseMessage]] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        histories.append(workload.fresh())
        return (histories[-1],), {}

    sent = benchmark.pedantic(
        workload.middleware.condense, setup=setup, rounds=ROUNDS, warmup_rounds=1
    )
    record(benchmark, "hook-langchain", "subject", 1)
    assert workload.middleware.stats.rebuilds == 0
    _check(sent, histories[-1])
