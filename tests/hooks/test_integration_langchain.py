"""CondenseMiddleware inside LangChain v1's own agent loop (``create_agent``).

The agent is the real one (langgraph graph, ToolNode running the tools, add_messages state);
only the chat model is a scripted ``BaseChatModel`` that supports ``bind_tools``, answers
from a plan and records every request it receives. Its tool calls read files of several KB;
in the last prompt it asks ``context_tree_query`` (the middleware's own tool, run by the
agent's ToolNode) for every ref it sees in a stub, and checks the answer.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

import openai
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
    message_to_dict,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from pi_condense.integrations.langchain import CondenseMiddleware
from support import hook_runs as runs
from support.chat_wire import ChatCompletionsModel
from support.llm_servers import LoopbackLLMServer

REF = re.compile(r"ref `(t\d+)`")
CHAIN_LINE = re.compile(r"- `(t\d+)` read_file path=(\S+)")
HEADER = re.compile(r"# file (\S+)\n")
SYSTEM = "You are a careful coding agent."
PROMPTS = 5
TURNS = 3
READS = PROMPTS * (TURNS + 1)  # files read over the run (the second turn reads two)


class Clock:
    """Epoch ms advancing by a fixed step per reading (deterministic sessions)."""

    def __init__(self, start: int = 1_800_000_000_000, step: int = 7) -> None:
        self.ms = start
        self.step = step

    def __call__(self) -> int:
        self.ms += self.step
        return self.ms


def file_text(path: str) -> str:
    """What ``read_file`` returns: about 5 KB, unique to ``path`` on every line."""
    return f"# file {path}\n" + "".join(
        f"{path}:{n:03d}  value_{n} = compute({n}, scale={n * 7 % 13})\n" for n in range(100)
    )


def read_file(path: str) -> str:
    """Read a file of the project."""
    return file_text(path)


def write_file(path: str, content: str) -> str:
    """Write a file of the project."""
    raise ToolException(f"permission denied: {path}")


READ_TOOL = StructuredTool.from_function(read_file)
WRITE_TOOL = StructuredTool.from_function(write_file, handle_tool_error=True)

Step = Callable[[list[BaseMessage]], AIMessage]


class Plan:
    """The model's script: per prompt, the replies it gives, in order.

    ``reuse_ids``: every tool-call message numbers its calls from ``call_0`` again (local
    servers do this); otherwise ids are unique over the run.
    """

    def __init__(self, reuse_ids: bool) -> None:
        self.reuse_ids = reuse_ids
        self.steps: list[Step] = []
        self.counter = 0
        self.recovered: list[tuple[str, str, str]] = []  # (ref, path it stood for, answer)
        self.asked: dict[str, tuple[str, str]] = {}  # call id -> (ref, path)

    def _ids(self, n: int) -> list[str]:
        if self.reuse_ids:
            return [f"call_{k}" for k in range(n)]
        ids = [f"call_{self.counter + k}" for k in range(n)]
        self.counter += n
        return ids

    def calls(self, name: str, args: Sequence[dict[str, Any]]) -> AIMessage:
        ids = self._ids(len(args))
        return AIMessage(
            content="",
            tool_calls=[
                {"type": "tool_call", "id": i, "name": name, "args": a}
                for i, a in zip(ids, args, strict=False)
            ],
        )

    def prompt(self, p: int, turns: int = TURNS) -> str:
        """Plan prompt ``p``: ``turns`` turns of reads (the second reads two files at once)."""
        for t in range(turns):
            paths = [f"src/p{p}_t{t}.py"] + ([f"src/p{p}_t{t}b.py"] if t == 1 else [])
            self.steps.append(
                lambda _m, paths=paths: self.calls("read_file", [{"path": x} for x in paths])
            )
        self.steps.append(lambda _m: AIMessage(content=f"done with task {p}"))
        return f"task {p}: read the next files"

    def query_prompt(self) -> str:
        """Plan a prompt in which the model recovers every ref it sees."""
        self.steps.append(self._ask)
        self.steps.append(self._read_answers)
        return "now look again at what you read first"

    def _ask(self, messages: list[BaseMessage]) -> AIMessage:
        wanted: list[tuple[str, str]] = []
        for i, message in enumerate(messages):
            text = message.text
            if isinstance(message, ToolMessage) and len(REF.findall(text)) == 1:
                # a stub: it stands for the output of the call it answers
                ref = REF.findall(text)[0]
                wanted.append((ref, _path_of_call(messages[:i], message.tool_call_id)))
            elif isinstance(message, HumanMessage) and text.startswith("<compressed-chain"):
                wanted.extend(CHAIN_LINE.findall(text))
        if not wanted:
            return AIMessage(content="nothing to look up")
        reply = self.calls("context_tree_query", [{"toolCallIds": [ref]} for ref, _ in wanted])
        self.asked = {c["id"]: w for c, w in zip(reply.tool_calls, wanted, strict=False)}
        return reply

    def _read_answers(self, messages: list[BaseMessage]) -> AIMessage:
        for message in messages[-len(self.asked) :]:
            assert isinstance(message, ToolMessage)
            assert message.name == "context_tree_query"
            ref, path = self.asked[message.tool_call_id]
            self.recovered.append((ref, path, str(message.content)))
        return AIMessage(content="recovered")

    def next(self, messages: list[BaseMessage]) -> AIMessage:
        return self.steps.pop(0)(messages)


def _path_of_call(before: Sequence[BaseMessage], call_id: str) -> str:
    """The path argument of the latest call with ``call_id`` (the one a result answers)."""
    for message in reversed(before):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["id"] == call_id:
                    return str(call["args"]["path"])
    raise AssertionError(f"no call {call_id}")


class ScriptedChatModel(BaseChatModel):
    """A chat model that follows a :class:`Plan` and records what it is sent."""

    plan: Any
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        schemas = [convert_to_openai_tool(t) for t in tools]
        self.bound.append([s["function"]["name"] for s in schemas])
        return self.bind(tools=schemas, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: Optional[list[str]] = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.plan.next(list(messages)))])


class Run:
    """One agent conversation: the plan, the model, the agent and its history."""

    def __init__(
        self,
        middleware: Sequence[Any],
        *,
        reuse_ids: bool = False,
        checkpointer: Any = None,
        plan: Optional[Plan] = None,
        model: Optional[ScriptedChatModel] = None,
    ) -> None:
        self.plan = plan if plan is not None else Plan(reuse_ids)
        self.model = model if model is not None else ScriptedChatModel(plan=self.plan)
        self.checkpointer = checkpointer
        self.agent = create_agent(
            self.model,
            tools=[READ_TOOL, WRITE_TOOL],
            system_prompt=SYSTEM,
            middleware=list(middleware),
            checkpointer=checkpointer,
        )
        self.history: list[BaseMessage] = []

    def say(self, prompt: str, mode: str = "invoke") -> None:
        message = HumanMessage(content=prompt)
        config = {"configurable": {"thread_id": "t"}} if self.checkpointer is not None else None
        messages = [message] if self.checkpointer is not None else [*self.history, message]
        if mode == "ainvoke":
            result = asyncio.run(self.agent.ainvoke({"messages": messages}, config))
        elif mode == "invoke-in-loop":  # a notebook cell: sync invoke under a running loop

            async def cell() -> Any:
                return self.agent.invoke({"messages": messages}, config)

            result = asyncio.run(cell())
        else:
            result = self.agent.invoke({"messages": messages}, config)
        self.history = list(result["messages"])

    def conversation(self, prompts: range, mode: str = "invoke", query: bool = True) -> None:
        for p in prompts:
            self.say(self.plan.prompt(p), mode)
        if query:
            self.say(self.plan.query_prompt(), mode)


def wire(request: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The request as OpenAI chat messages (what a provider receives)."""
    converted = convert_to_openai_messages(list(request))
    assert isinstance(converted, list)
    return converted


def chars(requests: Sequence[Sequence[BaseMessage]]) -> int:
    return sum(len(json.dumps(wire(r))) for r in requests)


def check_request(request: Sequence[BaseMessage]) -> None:
    """What a provider checks: valid roles, the system prompt first and only there, every tool
    message answering an open call of the assistant message right before it, every call answered
    before anything else comes."""
    assert isinstance(request[0], SystemMessage)
    assert request[0].content == SYSTEM
    messages = wire(request)
    open_calls: list[str] = []
    for k, message in enumerate(messages):
        role = message["role"]
        assert role in ("system", "user", "assistant", "tool"), role
        if role == "system":
            assert k == 0
        if role == "tool":
            assert message["tool_call_id"] in open_calls, (k, message["tool_call_id"])
            open_calls.remove(message["tool_call_id"])
            continue
        assert not open_calls, f"calls without results before message {k}: {open_calls}"
        if role == "assistant":
            open_calls = [c["id"] for c in message.get("tool_calls", [])]
            assert len(open_calls) == len(set(open_calls))
            assert message.get("content") or open_calls
        elif role == "user":
            assert message["content"]
    assert not open_calls


def check_recovered(plan: Plan, minimum: int) -> None:
    """Every ref the model asked for gave back the very output it stood for, and only that."""
    assert len(plan.recovered) >= minimum
    assert len({ref for ref, _, _ in plan.recovered}) == len(plan.recovered)
    assert len({path for _, path, _ in plan.recovered}) == len(plan.recovered)
    for ref, path, answer in plan.recovered:
        assert file_text(path) in answer, (ref, path)
        assert HEADER.findall(answer) == [path], (ref, path)


def middleware_for(path: Path, start: int = 1_800_000_000_000) -> CondenseMiddleware:
    return CondenseMiddleware(session=path, clock=Clock(start))


@pytest.mark.parametrize(
    ("mode", "reuse_ids"),
    [("invoke", False), ("invoke", True), ("ainvoke", True), ("invoke-in-loop", False)],
)
def test_agent_run_condenses_and_refs_recover_their_own_output(
    tmp_path: Path, mode: str, reuse_ids: bool
) -> None:
    condense = middleware_for(tmp_path / "s.jsonl")
    run = Run([condense], reuse_ids=reuse_ids)
    run.conversation(range(PROMPTS), mode)
    baseline = Run([], reuse_ids=reuse_ids)
    baseline.conversation(range(PROMPTS), mode)

    # the middleware's tools were bound and run by the agent's own ToolNode
    assert all("context_tree_query" in names for names in run.model.bound)
    check_recovered(run.plan, minimum=READS)
    for request in run.model.requests:
        check_request(request)
    # the agent's state kept the raw outputs; the model saw the condensed ones
    raw_results = [m for m in run.history if isinstance(m, ToolMessage) and m.name == "read_file"]
    assert all(m.content == file_text(str(m.content).split()[2]) for m in raw_results)
    assert len(run.model.requests) == len(baseline.model.requests) - 1 + 2
    assert chars(run.model.requests) < 0.5 * chars(baseline.model.requests)
    # every ref in the last request still answers with its own output
    last = run.model.requests[-1]
    stubs = [
        (REF.findall(str(m.content))[0], _path_of_call(last[:i], m.tool_call_id))
        for i, m in enumerate(last)
        if isinstance(m, ToolMessage) and REF.findall(str(m.content))
    ]
    assert len(stubs) >= 6
    for ref, path in stubs:
        answer = condense.execute("context_tree_query", {"toolCallIds": [ref]})
        assert HEADER.findall(answer) == [path], ref


def test_prefix_changes_only_at_the_first_call_of_a_prompt(tmp_path: Path) -> None:
    condense = middleware_for(tmp_path / "s.jsonl")
    run = Run([condense], reuse_ids=True)
    run.conversation(range(PROMPTS))
    requests = run.model.requests
    busts = 0
    for k in range(1, len(requests)):
        previous = [json.dumps(message_to_dict(m)) for m in requests[k - 1]]
        current = [json.dumps(message_to_dict(m)) for m in requests[k]]
        if current[: len(previous)] != previous:
            busts += 1
            # only a new prompt (the run's first call, after the flush) may rewrite the prefix
            assert isinstance(requests[k][-1], HumanMessage), k
    assert 1 <= busts <= PROMPTS
    # untouched messages are the agent's very objects (same ids as in the agent state)
    state_ids = {id(m) for m in run.history}
    last = requests[-1]
    kept = [m for m in last if id(m) in state_ids]
    assert len(kept) >= len(last) // 2


def _restarted(tmp_path: Path, how: str, reuse_ids: bool) -> tuple[Run, CondenseMiddleware]:
    """Three prompts, a process restart, then the rest of the conversation."""
    path = tmp_path / "restarted.jsonl"
    saver = InMemorySaver() if how == "checkpointer" else None
    first = Run([middleware_for(path)], reuse_ids=reuse_ids, checkpointer=saver)
    first.conversation(range(3), query=False)
    saved = tmp_path / "history.json"
    saved.write_text(json.dumps(messages_to_dict(first.history)), "utf-8")
    # a new process: a new middleware on the same session file, a new agent, the saved
    # history (loaded with LangChain's own serializer, or still in the checkpointer)
    second_condense = middleware_for(path, start=1_900_000_000_000)
    second = Run(
        [second_condense],
        checkpointer=saver,
        plan=first.plan,
        model=ScriptedChatModel(plan=first.plan),
    )
    if saver is None:
        second.history = messages_from_dict(json.loads(saved.read_text("utf-8")))
    second.conversation(range(3, PROMPTS))
    return second, second_condense


@pytest.mark.parametrize(("how", "reuse_ids"), [("serialized", True), ("checkpointer", False)])
def test_restart_continues_with_the_same_refs_and_prefix(
    tmp_path: Path, how: str, reuse_ids: bool
) -> None:
    whole = Run([middleware_for(tmp_path / "whole.jsonl")], reuse_ids=reuse_ids)
    whole.conversation(range(PROMPTS))
    second, condense = _restarted(tmp_path, how, reuse_ids)
    assert condense.stats.rebuilds == 0
    # the restarted process sends exactly what the uninterrupted one sent
    after = len(second.model.requests)
    expected = whole.model.requests[-after:]
    assert [wire(r) for r in second.model.requests] == [wire(r) for r in expected]
    assert REF.findall(json.dumps(wire(second.model.requests[0])))  # refs from before
    check_recovered(second.plan, minimum=READS)
    for request in second.model.requests:
        check_request(request)


def test_context_editing_clears_what_condense_keeps_recoverable(tmp_path: Path) -> None:
    """LangChain's own ClearToolUsesEdit on the same run: the outputs are gone for good."""
    clearing = Run([ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=2000, keep=3)])])
    clearing.conversation(range(PROMPTS))
    cleared = [
        m
        for m in clearing.model.requests[-1]
        if isinstance(m, ToolMessage) and m.content == "[cleared]"
    ]
    assert len(cleared) >= 6
    assert clearing.plan.recovered == []  # no ref to ask for: nothing can come back
    condense = middleware_for(tmp_path / "s.jsonl")
    ours = Run([condense])
    ours.conversation(range(PROMPTS))
    check_recovered(ours.plan, minimum=READS)


def test_an_unanswered_call_is_answered_and_system_messages_stay(tmp_path: Path) -> None:
    condense = CondenseMiddleware(session=tmp_path / "s.jsonl", clock=Clock())
    system = SystemMessage(content="host rules")
    image = HumanMessage(
        content=[
            {"type": "text", "text": "look"},
            {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
        ]
    )
    interrupted = AIMessage(
        content="",
        tool_calls=[{"type": "tool_call", "id": "c1", "name": "read_file", "args": {"path": "x"}}],
    )
    history: list[BaseMessage] = [system, image, interrupted, HumanMessage(content="go on")]
    sent = condense.condense(history)
    assert sent[0] is system
    assert sent[1] is image
    assert sent[2] is interrupted
    answer = sent[3]
    assert isinstance(answer, ToolMessage)
    assert (answer.tool_call_id, answer.name, answer.status) == ("c1", "read_file", "error")
    assert answer.content == "No result provided"
    assert sent[4] is history[3]
    assert len(sent) == 5


def test_importing_the_package_does_not_import_langchain() -> None:
    code = (
        "import sys, pi_condense, pi_condense.integrations, pi_condense.adapters, "
        "pi_condense.live; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain', 'langchain_core', 'langgraph')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_a_rewritten_assistant_keeps_its_calls_and_the_state_keeps_the_original(
    tmp_path: Path,
) -> None:
    """Pi's error purge: an errored call's large arguments give way to a size marker after two
    turns; the model gets a new AIMessage with the same calls, the agent state the original."""
    condense = middleware_for(tmp_path / "s.jsonl")
    run = Run([condense], reuse_ids=True)
    big = "x" * 2000
    attempt = AIMessage(
        content=[
            {"type": "text", "text": "writing it"},
            {"type": "tool_use", "id": "call_0", "name": "write_file", "input": {}},
        ],
        tool_calls=[
            {
                "type": "tool_call",
                "id": "call_0",
                "name": "write_file",
                "args": {"path": "out.txt", "content": big},
            }
        ],
    )
    run.plan.steps.append(lambda _m: attempt)
    prompt = run.plan.prompt(0)
    run.say(prompt)
    requests = run.model.requests
    for request in requests:
        check_request(request)
    last = requests[-1]
    (rewritten,) = [m for m in last if isinstance(m, AIMessage) and m.text == "writing it"]
    assert rewritten is not attempt
    (call,) = rewritten.tool_calls
    assert (call["id"], call["name"]) == ("call_0", "write_file")
    # 2.11.3: the keys kept, the long string replaced by its length
    assert call["args"] == {"path": "out.txt", "content": '<purged-errored-args size="2000"/>'}
    error = last[last.index(rewritten) + 1]
    assert isinstance(error, ToolMessage)
    assert (error.tool_call_id, error.status) == ("call_0", "error")
    # before the cooldown the model saw the call as it was made; the state still has it
    assert any(any(m is attempt for m in r) for r in requests[:2])
    assert attempt in run.history
    assert attempt.tool_calls[0]["args"]["content"] == big


def test_untouched_messages_are_the_callers_own_objects_when_the_history_is_rebuilt(
    tmp_path: Path,
) -> None:
    """A checkpointer or a loaded history hands over equal but new objects on every call: the
    request must hold those, not the objects of an earlier call."""
    condense = middleware_for(tmp_path / "s.jsonl")
    run = Run([condense], reuse_ids=True)
    run.conversation(range(3), query=False)
    history = [*run.history, HumanMessage(content="next")]
    first = condense.condense(history)
    again = messages_from_dict(messages_to_dict(history))
    second = condense.condense(again)
    assert [message_to_dict(m) for m in second] == [message_to_dict(m) for m in first]
    old = {id(m) for m in history}
    new = {id(m) for m in again}
    assert not any(id(m) in old for m in second)
    kept = [m for m in second if id(m) in new]
    assert len(kept) >= 8  # prompts, replies, the last turn's raw messages
    assert condense.stats.messages_seen == len(history)


def test_codec_reads_provider_shaped_messages_and_writes_valid_ones() -> None:
    from pi_condense.adapters.base import Out
    from pi_condense.adapters.langchain_messages import LangChainCodec

    codec = LangChainCodec()
    anthropic_style = AIMessage(
        content=[
            {"type": "thinking", "thinking": "look at a", "signature": "sig1"},
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a"}},
        ],
        tool_calls=[{"type": "tool_call", "id": "c1", "name": "read_file", "args": {"path": "a"}}],
    )
    nameless = ToolMessage(content="A" * 50, tool_call_id="c1")  # no name: taken from the call
    image = HumanMessage(
        content=[{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]
    )
    items = [image, anthropic_style, nameless]
    units = codec.decode(items)
    assert [u.message["role"] for u in units if isinstance(u.message, dict)] == [
        "user",
        "assistant",
        "toolResult",
    ]
    assert units[0].message == {
        "role": "user",
        "content": [{"type": "image", "data": "iVBO", "mimeType": "image/png"}],
    }
    assistant, result = units[1].message, units[2].message
    assert isinstance(assistant, dict)
    assert isinstance(result, dict)
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "look at a", "thinkingSignature": "sig1"},
        {"type": "text", "text": "reading"},
        {"type": "toolCall", "id": "c1", "name": "read_file", "arguments": {"path": "a"}},
    ]
    assert assistant["stopReason"] == "toolUse"
    assert (result["toolName"], result["isError"]) == ("read_file", False)
    # deterministic, also for LangChain's own serializer round trip
    again = codec.decode(messages_from_dict(messages_to_dict(items)))
    assert [u.message for u in again] == [u.message for u in units]
    # the tail of a decode from a unit boundary still finds the call's name
    assert codec.decode(items, 2)[0].message == result

    stub = {**result, "content": [{"type": "text", "text": "[Summarized ... ref `t1`.]"}]}
    summary = {"role": "custom", "customType": "context-prune-summary", "content": "- `t1` ..."}
    out = codec.encode(
        [
            Out(units[0].message, (image,)),
            Out(assistant, (anthropic_style,)),
            Out(stub, ()),
            Out(summary, ()),
        ]
    )
    assert out[0] is image
    assert out[1] is anthropic_style
    assert isinstance(out[2], ToolMessage)
    assert (out[2].tool_call_id, out[2].name, out[2].content) == (
        "c1",
        "read_file",
        "[Summarized ... ref `t1`.]",
    )
    assert isinstance(out[3], HumanMessage)
    assert out[3].content == "- `t1` ..."
    # a rewritten assistant: same calls, thinking kept with its signature
    copy = codec.encode([Out(assistant, ()), Out(result, (nameless,))])
    assert isinstance(copy[0], AIMessage)
    assert copy[0].tool_calls == anthropic_style.tool_calls
    assert copy[0].content == [
        {"type": "thinking", "thinking": "look at a", "signature": "sig1"},
        {"type": "text", "text": "reading"},
    ]
    assert copy[1] is nameless
    # a result whose call is gone is dropped; a call left open is answered
    assert codec.encode([Out(result, (nameless,))]) == []
    (lonely, answer) = codec.encode([Out(assistant, (anthropic_style,))])
    assert lonely is anthropic_style
    assert isinstance(answer, ToolMessage)
    assert (answer.tool_call_id, answer.status) == ("c1", "error")


class WireChatModel(BaseChatModel):
    """A chat model that sends its requests over the real ``openai`` client to a loopback
    Chat Completions server (what a provider integration does)."""

    base_url: str

    @property
    def _llm_type(self) -> str:
        return "wire"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: Optional[list[str]] = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        client = openai.OpenAI(base_url=self.base_url, api_key="test", max_retries=0)
        reply = client.chat.completions.create(
            model="scripted", messages=wire(messages), tools=kwargs.get("tools")
        )
        answer = reply.choices[0].message
        calls = [
            {
                "type": "tool_call",
                "id": c.id,
                "name": c.function.name,
                "args": json.loads(c.function.arguments),
            }
            for c in answer.tool_calls or ()
        ]
        message = AIMessage(content=answer.content or "", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


def wire_loop(
    hook: CondenseMiddleware,
    script: runs.Script,
    prompts: range,
    stored: Optional[list[BaseMessage]],
) -> tuple[list[BaseMessage], ChatCompletionsModel]:
    """LangChain agent runs (``create_agent``, its own tool node) over the wire."""
    model = ChatCompletionsModel(script)

    def read(path: str) -> str:
        """Read a file."""
        return runs.output(path)

    history = list(stored or [])
    with LoopbackLLMServer(model) as server:
        agent = create_agent(
            WireChatModel(base_url=f"{server.url}/v1"),
            tools=[StructuredTool.from_function(read)],
            system_prompt=SYSTEM,
            middleware=[hook],
        )
        for p in prompts:
            prompt = HumanMessage(content=f"task {p}: read the files")
            history = list(agent.invoke({"messages": [*history, prompt]})["messages"])
    return history, model


@pytest.mark.usefixtures("loopback_only")
def test_nothing_is_lost_across_spills_chains_and_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 items 1, 2, 3 and 5 in LangChain agent runs over the wire (see
    spill_chain_restart)."""
    monkeypatch.setenv("PI_CONDENSE_SESSION_DIR", str(tmp_path / "sessions"))
    runs.spill_chain_restart(
        lambda: CondenseMiddleware(config=runs.SPILLING),
        wire_loop,
        lambda history: messages_from_dict(json.loads(json.dumps(messages_to_dict(history)))),
        lambda hook, history: wire(hook.condense(history)),
    )
