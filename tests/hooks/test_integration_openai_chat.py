"""ChatCondenser in a plain OpenAI Chat Completions loop: the real ``openai`` client against a
loopback server speaking the Chat Completions protocol, whose scripted model calls tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Optional

import openai
import pytest

from pi_condense.integrations.openai_chat import ChatCondenser
from support.chat_wire import ChatCompletionsModel, pairs
from support.hook_runs import (
    QUERY,
    SPILLING,
    Script,
    chars,
    check_queries,
    check_refs,
    prefix_busts,
    run_read,
    spill_chain_restart,
)
from support.llm_servers import LoopbackLLMServer

SYSTEM = {"role": "system", "content": "You are a careful assistant."}
READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}


pytestmark = pytest.mark.usefixtures("loopback_only")


def client(server: LoopbackLLMServer) -> Any:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)


def run_loop(
    hook: Optional[ChatCondenser],
    script: Script,
    prompts: range,
    messages: Optional[list[Any]] = None,
) -> tuple[list[Any], ChatCompletionsModel, list[int]]:
    """A plain agent loop: call the model, run the tools it asks for, append, repeat.

    Returns the loop's own history, the model (with every request it received) and the
    indexes of the requests that were the first of a user prompt."""
    model = ChatCompletionsModel(script)
    history: list[Any] = [SYSTEM] if messages is None else messages
    firsts: list[int] = []
    with LoopbackLLMServer(model) as server:
        api = client(server)
        tools = [READ_TOOL, *(hook.tools if hook is not None else [])]
        for p in prompts:
            history.append({"role": "user", "content": f"task {p}: read the files"})
            firsts.append(len(model.requests))
            while True:
                sent = hook.condense(history) if hook is not None else history
                reply = api.chat.completions.create(model="scripted", messages=sent, tools=tools)
                message = reply.choices[0].message
                history.append(message)  # the SDK's own object, as most loops do
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    name, arguments = call.function.name, call.function.arguments
                    if hook is not None and hook.handles(name):
                        text = hook.execute(name, arguments, call.id)
                    else:
                        text = run_read(arguments)
                    history.append({"role": "tool", "tool_call_id": call.id, "content": text})
    return history, model, firsts


def saved(history: list[Any]) -> list[Any]:
    """The history as a program would save it: the SDK's own JSON form of its objects."""
    plain = [m if isinstance(m, dict) else m.to_dict() for m in history]
    return json.loads(json.dumps(plain))


@pytest.mark.parametrize("reuse_ids", [False, True], ids=["unique-ids", "reused-ids"])
def test_chat_loop_condenses_and_recovers(tmp_path: Path, reuse_ids: bool) -> None:
    hook = ChatCondenser(session=tmp_path / "chat.jsonl")
    script = Script(reuse_ids=reuse_ids)
    history, model, firsts = run_loop(hook, script, range(5))
    baseline = run_loop(None, Script(reuse_ids=reuse_ids), range(5))[1]

    assert check_queries(script, model.pairs) == 1
    assert chars(model.requests) < 0.5 * chars(baseline.requests)
    final = hook.condense([*history, {"role": "user", "content": "thanks"}])
    assert check_refs(hook.execute, pairs(final), final) >= 12
    busts = prefix_busts(model.requests)
    assert busts
    assert set(busts) <= set(firsts), (busts, firsts)
    assert all(request[0] == SYSTEM for request in model.requests)
    hook.close()


def test_untouched_messages_are_the_callers_objects(tmp_path: Path) -> None:
    hook = ChatCondenser(session=tmp_path / "chat.jsonl")
    history, _, _ = run_loop(hook, Script(), range(3))
    history = saved(history)  # dicts: what condense gives back can be compared by identity
    sent = hook.condense(history)
    assert sent[0] is history[0]
    # every message sent as it was in the history is the caller's own object, not a copy
    by_text = {json.dumps(h): h for h in history}
    same = [m for m in sent if json.dumps(m) in by_text]
    assert len(same) >= 10
    assert all(m is by_text[json.dumps(m)] for m in same)


def test_restart_continues_with_the_same_refs_and_prefix(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    first = ChatCondenser(session=path)
    history, _, _ = run_loop(first, Script(reuse_ids=True), range(3))
    before = first.condense(history)
    first.close()

    stored = saved(history)
    second = ChatCondenser(session=path)
    again = second.condense(stored)
    assert json.dumps(again) == json.dumps(saved(before))
    assert second.stats.messages_seen == 0
    assert second.stats.rebuilds == 0

    script = Script(reuse_ids=True, prompt=3, query_prompt=4)
    history2, model, _ = run_loop(second, script, range(3, 6), messages=stored)
    assert check_queries(script, model.pairs) == 1
    # the prefix sent before the restart is still the start of the first request after it
    first_after = model.requests[0]
    assert [json.dumps(m) for m in first_after[: len(again)]] == [json.dumps(m) for m in again]
    final = second.condense(history2)
    assert check_refs(second.execute, pairs(final), final) >= 15
    second.close()


def test_nothing_is_lost_across_spills_chains_and_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 items 1, 2, 3 and 5 in a Chat Completions loop (see spill_chain_restart)."""
    monkeypatch.setenv("PI_CONDENSE_SESSION_DIR", str(tmp_path / "sessions"))
    spill_chain_restart(
        lambda: ChatCondenser(config=SPILLING),
        lambda hook, script, prompts, stored: run_loop(hook, script, prompts, stored)[:2],
        saved,
        lambda hook, history: saved(hook.condense(history)),
    )


def test_async_client_and_acondense(tmp_path: Path) -> None:
    hook = ChatCondenser(session=tmp_path / "chat.jsonl")
    script = Script()
    model = ChatCompletionsModel(script)

    async def loop(server: LoopbackLLMServer) -> list[Any]:
        api = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)
        history: list[Any] = [SYSTEM]
        for p in range(4):
            history.append({"role": "user", "content": f"task {p}"})
            while True:
                sent = await hook.acondense(history)
                reply = await api.chat.completions.create(
                    model="scripted", messages=sent, tools=[READ_TOOL, *hook.tools]
                )
                message = reply.choices[0].message
                history.append(message)
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    name, arguments = call.function.name, call.function.arguments
                    text = (
                        hook.execute(name, arguments, call.id)
                        if hook.handles(name)
                        else run_read(arguments)
                    )
                    history.append({"role": "tool", "tool_call_id": call.id, "content": text})
        await hook.aclose(history)
        return history

    with LoopbackLLMServer(model) as server:
        history = asyncio.run(loop(server))
    assert check_queries(script, model.pairs) == 1
    assert hook.stats.calls == len(model.requests)
    assert hook.stats.chars_out < 0.5 * hook.stats.chars_in
    # the close took the last reply in and summarized the last prompt's outputs
    final = hook.condense(history)
    assert check_refs(hook.execute, pairs(final), final) >= 12


def test_tools_are_chat_function_definitions(tmp_path: Path) -> None:
    hook = ChatCondenser(session=":memory:")
    names = [tool["function"]["name"] for tool in hook.tools]
    assert names[0] == QUERY
    assert "session_search" in names
    assert all(tool["type"] == "function" for tool in hook.tools)
    assert hook.handles(QUERY)
    assert not hook.handles("read")
    assert "not valid JSON" in hook.execute(QUERY, "{not json")
    assert not list(tmp_path.iterdir())
