"""CondenseFilter in real OpenAI Agents SDK runs (``Runner.run`` / ``run_sync`` / ``run_streamed``).

The model is either a scripted ``agents.models.interface.Model`` (the SDK's own way to test
an agent offline) that reads its Responses input items, or the SDK's own
``OpenAIChatCompletionsModel`` over the real ``AsyncOpenAI`` client against a loopback server
speaking the Chat Completions protocol (it gives every item the id ``__fake_id__``). Tools,
ours included, are run by the SDK itself.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Optional

import openai
import pytest
from agents import (
    Agent,
    FunctionTool,
    ModelResponse,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    Usage,
    function_tool,
)
from agents.models.interface import Model
from agents.run_config import CallModelData, ModelInputData
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
)

from pi_condense.integrations.openai_agents import CondenseFilter
from support.chat_wire import ChatCompletionsModel
from support.hook_runs import (
    QUERY,
    SPILLING,
    Pair,
    Script,
    Text,
    chars,
    check_queries,
    check_refs,
    output,
    prefix_busts,
    spill_chain_restart,
)
from support.llm_servers import LoopbackLLMServer

FAKE_ID = "__fake_id__"
INSTRUCTIONS = "You are a careful assistant."
ITEM_TYPES = {"message", "function_call", "function_call_output", "reasoning"}


pytestmark = pytest.mark.usefixtures("loopback_only")


@function_tool
def read(path: str) -> str:
    """Read a file."""
    return output(path)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    assert isinstance(value, list), value
    assert all(p["type"] in ("input_text", "output_text") for p in value), value
    return "".join(p["text"] for p in value)


def pairs(items: Sequence[dict[str, Any]]) -> list[Pair]:
    """Tool calls with their outputs, checked as the Responses API checks an input: known
    item types and roles, call ids unique, each ``function_call_output`` after the
    ``function_call`` with its ``call_id``, and every call answered."""
    found: list[Pair] = []
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        assert kind in ITEM_TYPES, (index, kind)
        if kind == "message":
            assert item["role"] in ("user", "assistant", "system", "developer"), index
            assert _text(item["content"]).strip(), (index, "an empty message")
        elif kind == "function_call":
            assert item["call_id"] not in calls, (index, "a call id used twice")
            calls[item["call_id"]] = (item["name"], json.loads(item["arguments"]))
        elif kind == "function_call_output":
            call_id = item["call_id"]
            assert call_id in calls, (index, call_id, "an output before or without its call")
            assert call_id not in answered, (index, call_id, "a call answered twice")
            answered.add(call_id)
            name, arguments = calls[call_id]
            found.append(Pair(name, arguments, _text(item["output"])))
    assert set(calls) == answered, ("calls without outputs", sorted(set(calls) - answered))
    return found


class ScriptedModel(Model):
    """The script as an Agents SDK model: reads the input items it gets, answers with
    Responses output items (ids ``__fake_id__`` with ``fake_ids``, as the SDK's chat
    completions model makes them)."""

    def __init__(self, script: Script, fake_ids: bool = False) -> None:
        self.script = script
        self.fake_ids = fake_ids
        self.requests: list[list[dict[str, Any]]] = []
        self.pairs: list[list[Pair]] = []

    async def get_response(
        self,
        system_instructions: Optional[str],
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        *,
        previous_response_id: Optional[str] = None,
        conversation_id: Optional[str] = None,
        prompt: Any = None,
    ) -> ModelResponse:
        return ModelResponse(
            output=self._answer(system_instructions, input), usage=Usage(), response_id=None
        )

    async def stream_response(
        self,
        system_instructions: Optional[str],
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        *,
        previous_response_id: Optional[str] = None,
        conversation_id: Optional[str] = None,
        prompt: Any = None,
    ) -> AsyncIterator[Any]:
        """The same answer as a Responses stream: one ``output_item.done`` per item, then
        ``response.completed`` carrying them (what the runner builds its turn from)."""
        out = self._answer(system_instructions, input)
        for k, item in enumerate(out):
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done", item=item, output_index=k, sequence_number=k
            )
        response = Response(
            id=f"resp_{len(self.requests)}",
            created_at=0.0,
            model="scripted",
            object="response",
            output=out,
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=len(out)
        )

    def _answer(self, system_instructions: Optional[str], input: Any) -> list[Any]:
        assert system_instructions == INSTRUCTIONS
        items = json.loads(json.dumps(input))
        found = pairs(items)
        self.requests.append(items)
        self.pairs.append(found)
        step = self.script.step(found)
        n = len(self.requests)
        out: list[Any]
        if isinstance(step, Text):
            text = ResponseOutputText(type="output_text", text=step.text, annotations=[])
            out = [
                ResponseOutputMessage(
                    id=FAKE_ID if self.fake_ids else f"msg_{n}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            ]
        else:
            out = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id=FAKE_ID if self.fake_ids else f"fc_{n}_{k}",
                    call_id=call.call_id,
                    name=call.name,
                    arguments=json.dumps(call.arguments),
                    status="completed",
                )
                for k, call in enumerate(step)
            ]
        return out


def agent_for(model: Model, hook: Optional[CondenseFilter]) -> Agent[Any]:
    tools: list[Any] = [read, *(hook.tools if hook is not None else [])]
    return Agent(name="reader", instructions=INSTRUCTIONS, model=model, tools=tools)


def config_for(hook: Optional[CondenseFilter]) -> RunConfig:
    return RunConfig(call_model_input_filter=hook, tracing_disabled=True)


async def run_prompts(
    hook: Optional[CondenseFilter],
    model: Model,
    prompts: range,
    requests: list[Any],
    history: Optional[list[Any]] = None,
    streamed: bool = False,
) -> tuple[list[Any], list[int]]:
    """One ``Runner.run`` (``Runner.run_streamed`` with ``streamed``) per prompt, each on the
    previous run's ``to_input_list()``.

    Returns the last run's items and the indexes in ``requests`` (what the model received)
    of each prompt's first request."""
    agent = agent_for(model, hook)
    items: list[Any] = [] if history is None else history
    firsts: list[int] = []
    for p in prompts:
        firsts.append(len(requests))
        prompt = {"role": "user", "content": f"task {p}: read the files"}
        result: Any
        if streamed:
            result = Runner.run_streamed(agent, [*items, prompt], run_config=config_for(hook))
            kinds = {event.type async for event in result.stream_events()}
            assert "raw_response_event" in kinds, kinds
        else:
            result = await Runner.run(agent, [*items, prompt], run_config=config_for(hook))
        assert result.final_output == f"done {p}"
        items = result.to_input_list()
    return items, firsts


@pytest.mark.parametrize(
    ("fake_ids", "streamed"),
    [(False, False), (True, False), (False, True)],
    ids=["item-ids", "fake-ids", "streamed"],
)
def test_agent_runs_condense_and_recover(tmp_path: Path, fake_ids: bool, streamed: bool) -> None:
    hook = CondenseFilter(session=tmp_path / "agents.jsonl")
    script = Script(ids_per_prompt=False)
    model = ScriptedModel(script, fake_ids=fake_ids)
    history, firsts = asyncio.run(
        run_prompts(hook, model, range(5), model.requests, streamed=streamed)
    )
    baseline = ScriptedModel(Script(), fake_ids=fake_ids)
    asyncio.run(run_prompts(None, baseline, range(5), baseline.requests, streamed=streamed))

    assert check_queries(script, model.pairs) == 1
    assert chars(model.requests) < 0.5 * chars(baseline.requests)
    final = hook.condense([*history, {"role": "user", "content": "thanks"}])
    assert check_refs(hook.execute, pairs(final), final) >= 12
    busts = prefix_busts(model.requests)
    assert busts
    assert set(busts) <= set(firsts), (busts, firsts)
    hook.close(history)


def test_restart_continues_with_the_same_refs_and_prefix(tmp_path: Path) -> None:
    path = tmp_path / "agents.jsonl"
    first = CondenseFilter(session=path)
    model = ScriptedModel(Script(), fake_ids=True)
    history, _ = asyncio.run(run_prompts(first, model, range(3), model.requests))
    before = first.condense(history)
    first.close()

    stored = json.loads(json.dumps(history))  # what a program saves of to_input_list()
    second = CondenseFilter(session=path)
    again = second.condense(stored)
    assert json.dumps(again) == json.dumps(before)
    assert second.stats.messages_seen == 0
    assert second.stats.rebuilds == 0

    # the next prompts with the synchronous runner
    script = Script(prompt=3, query_prompt=4)
    model2 = ScriptedModel(script, fake_ids=True)
    agent = agent_for(model2, second)
    items = stored
    for p in range(3, 6):
        prompt = {"role": "user", "content": f"task {p}"}
        result = Runner.run_sync(agent, [*items, prompt], run_config=config_for(second))
        items = result.to_input_list()
    assert check_queries(script, model2.pairs) == 1
    first_after = model2.requests[0]
    assert [json.dumps(m) for m in first_after[: len(again)]] == [json.dumps(m) for m in again]
    final = second.condense(items)
    assert check_refs(second.execute, pairs(final), final) >= 15
    second.close()


def test_chat_completions_model_over_the_wire(tmp_path: Path) -> None:
    """The SDK's own chat completions model and the real client: the SDK's items carry the
    id ``__fake_id__``, the wire requests are Chat Completions requests."""
    hook = CondenseFilter(session=tmp_path / "agents.jsonl")
    script = Script()
    wire = ChatCompletionsModel(script)
    with LoopbackLLMServer(wire) as server:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)
        sdk_model = OpenAIChatCompletionsModel(model="scripted", openai_client=client)
        history, firsts = asyncio.run(run_prompts(hook, sdk_model, range(5), wire.requests))
    assert all(
        request[0] == {"role": "system", "content": INSTRUCTIONS} for request in wire.requests
    )
    assert any(item.get("id") == FAKE_ID for item in history)
    assert check_queries(script, wire.pairs) == 1
    assert hook.stats.chars_out < 0.5 * hook.stats.chars_in
    final = hook.condense(history)
    assert check_refs(hook.execute, pairs(final), final) >= 12
    busts = prefix_busts(wire.requests)
    assert busts
    assert set(busts) <= set(firsts), (busts, firsts)
    hook.close()


def wire_loop(
    hook: CondenseFilter, script: Script, prompts: range, stored: Optional[list[Any]]
) -> tuple[list[Any], ChatCompletionsModel]:
    """Runs of the SDK's own chat completions model over the real client and the wire."""
    wire = ChatCompletionsModel(script)
    with LoopbackLLMServer(wire) as server:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)
        sdk_model = OpenAIChatCompletionsModel(model="scripted", openai_client=client)
        items, _ = asyncio.run(run_prompts(hook, sdk_model, prompts, wire.requests, stored))
    return items, wire


def test_nothing_is_lost_across_spills_chains_and_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 items 1, 2, 3 and 5 in Agents SDK runs (see spill_chain_restart); the SDK's
    items all carry the id ``__fake_id__`` (call ids stay unique: the SDK drops reused ones)."""
    monkeypatch.setenv("PI_CONDENSE_SESSION_DIR", str(tmp_path / "sessions"))
    spill_chain_restart(
        lambda: CondenseFilter(config=SPILLING),
        wire_loop,
        lambda items: json.loads(json.dumps(items)),
        lambda hook, items: hook.condense(items),
        reuse_ids=False,
    )


def test_the_sdk_itself_drops_call_ids_reused_across_runs(tmp_path: Path) -> None:
    """Why the runs above use unique call ids (their ``fake-ids`` case reuses the item id):
    the SDK rejects a call id reused within a run (``ModelBehaviorError``) and, across runs,
    keeps one call and one output per call id (the latest), hook or not, so a model that
    starts again at ``call_0`` every prompt loses the earlier outputs from the SDK's own
    history before any filter sees it."""
    model = ScriptedModel(Script(turns=2, ids_per_prompt=True, query_prompt=None))
    agent = agent_for(model, None)
    items: list[Any] = []
    for p in range(2):
        prompt = {"role": "user", "content": f"task {p}"}
        result = Runner.run_sync(agent, [*items, prompt], run_config=config_for(None))
        items = result.to_input_list()
    last = model.requests[-1]
    assert [p.arguments["path"] for p in pairs(last)] == ["f1_0.txt", "f1_1.txt"]
    assert output("f0_0.txt") not in json.dumps(last)
    assert output("f0_0.txt") not in json.dumps(items)  # gone from the SDK's own history too


def test_the_filter_hands_back_the_sdks_own_items(tmp_path: Path) -> None:
    hook = CondenseFilter(session=tmp_path / "agents.jsonl")
    model = ScriptedModel(Script())
    history, _ = asyncio.run(run_prompts(hook, model, range(3), model.requests))
    data = CallModelData(
        model_data=ModelInputData(input=list(history), instructions=INSTRUCTIONS),
        agent=agent_for(model, hook),
        context=None,
    )
    sent = asyncio.run(hook(data))
    assert isinstance(sent, ModelInputData)
    assert sent.instructions == INSTRUCTIONS
    by_text = {json.dumps(item): item for item in history}
    same = [item for item in sent.input if json.dumps(item) in by_text]
    assert len(same) >= 8
    assert all(item is by_text[json.dumps(item)] for item in same)
    assert len(json.dumps(sent.input)) < 0.5 * len(json.dumps(history))
    pairs(sent.input)


def test_tools_are_function_tools(tmp_path: Path) -> None:
    hook = CondenseFilter(session=":memory:")
    tools = hook.tools
    assert all(isinstance(tool, FunctionTool) for tool in tools)
    assert tools[0].name == QUERY
    assert tools[0].strict_json_schema is False
    assert tools[0].params_json_schema["required"] == ["toolCallIds"]
    assert not list(tmp_path.iterdir())
