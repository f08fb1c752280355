"""MessagesCondenser in a plain Anthropic Messages loop: the real ``anthropic`` client against a
loopback server speaking the Messages protocol, whose scripted model calls tools."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import anthropic
import pytest

from pi_condense.integrations.anthropic_messages import MessagesCondenser
from support.hook_runs import (
    QUERY,
    SPILLING,
    Pair,
    Script,
    chars,
    check_queries,
    check_refs,
    prefix_busts,
    run_read,
    spill_chain_restart,
)
from support.llm_servers import LoopbackLLMServer, Recorded, Reply
from support.messages_wire import pairs, reply

SYSTEM = "You are a careful assistant."
READ_TOOL = {
    "name": "read",
    "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


pytestmark = pytest.mark.usefixtures("loopback_only")


class Model:
    """The loopback server's model: the script, fed with what each request holds."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[list[dict[str, Any]]] = []
        self.systems: list[Any] = []
        self.pairs: list[list[Pair]] = []

    def __call__(self, request: Recorded) -> Reply:
        messages = request.body["messages"]
        found = pairs(messages, unique_ids=not self.script.reuse_ids)
        self.requests.append(messages)
        self.systems.append(request.body.get("system"))
        self.pairs.append(found)
        return reply(self.script.step(found))


def tool_results(hook: Optional[MessagesCondenser], content: Sequence[Any]) -> list[Any]:
    results: list[Any] = []
    for block in content:
        if block.type != "tool_use":
            continue
        if hook is not None and hook.handles(block.name):
            text = hook.execute(block.name, block.input, block.id)
        else:
            text = run_read(block.input)
        results.append({"type": "tool_result", "tool_use_id": block.id, "content": text})
    return results


def run_loop(
    hook: Optional[MessagesCondenser],
    script: Script,
    prompts: range,
    messages: Optional[list[Any]] = None,
) -> tuple[list[Any], Model, list[int]]:
    """A plain agent loop: call the model, run the tools it asks for, append, repeat."""
    model = Model(script)
    history: list[Any] = [] if messages is None else messages
    firsts: list[int] = []
    with LoopbackLLMServer(model) as server:
        api = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)
        tools = [READ_TOOL, *(hook.tools if hook is not None else [])]
        for p in prompts:
            history.append({"role": "user", "content": f"task {p}: read the files"})
            firsts.append(len(model.requests))
            while True:
                sent = hook.condense(history, system=SYSTEM) if hook is not None else history
                response = api.messages.create(
                    model="scripted", max_tokens=1024, system=SYSTEM, messages=sent, tools=tools
                )
                # the SDK's own blocks, as most loops append them
                history.append({"role": "assistant", "content": response.content})
                if response.stop_reason != "tool_use":
                    break
                history.append({"role": "user", "content": tool_results(hook, response.content)})
    return history, model, firsts


def saved(history: list[Any]) -> list[Any]:
    """The history as a program would save it: the SDK's own JSON form of its blocks."""

    def block(b: Any) -> Any:
        return b if isinstance(b, dict) else b.to_dict()

    plain = [
        {**m, "content": [block(b) for b in m["content"]]} if isinstance(m["content"], list) else m
        for m in history
    ]
    return json.loads(json.dumps(plain))


@pytest.mark.parametrize("reuse_ids", [False, True], ids=["unique-ids", "reused-ids"])
def test_messages_loop_condenses_and_recovers(tmp_path: Path, reuse_ids: bool) -> None:
    hook = MessagesCondenser(session=tmp_path / "messages.jsonl")
    script = Script(reuse_ids=reuse_ids)
    history, model, firsts = run_loop(hook, script, range(5))
    baseline = run_loop(None, Script(reuse_ids=reuse_ids), range(5))[1]

    assert check_queries(script, model.pairs) == 1
    assert chars(model.requests) < 0.5 * chars(baseline.requests)
    assert set(map(str, model.systems)) == {SYSTEM}
    final = hook.condense([*history, {"role": "user", "content": "thanks"}])
    assert check_refs(hook.execute, pairs(final), final) >= 12
    busts = prefix_busts(model.requests)
    assert busts
    assert set(busts) <= set(firsts), (busts, firsts)
    hook.close()


def test_restart_continues_with_the_same_refs_and_prefix(tmp_path: Path) -> None:
    path = tmp_path / "messages.jsonl"
    first = MessagesCondenser(session=path)
    history, _, _ = run_loop(first, Script(reuse_ids=True), range(3))
    before = first.condense(history)
    first.close()

    stored = saved(history)
    second = MessagesCondenser(session=path)
    again = second.condense(stored, system=SYSTEM)
    assert json.dumps(again) == json.dumps(saved(before))
    assert second.stats.messages_seen == 0
    assert second.stats.rebuilds == 0

    script = Script(reuse_ids=True, prompt=3, query_prompt=4)
    history2, model, _ = run_loop(second, script, range(3, 6), messages=stored)
    assert check_queries(script, model.pairs) == 1
    first_after = model.requests[0]
    # the prefix from before the restart, up to its last message (which the new prompt may
    # have been merged into: it is a user message)
    head = [json.dumps(m) for m in again[:-1]]
    assert [json.dumps(m) for m in first_after[: len(head)]] == head
    final = second.condense(history2)
    assert check_refs(second.execute, pairs(final), final) >= 15
    second.close()


def test_nothing_is_lost_across_spills_chains_and_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 items 1, 2, 3 and 5 in a Messages loop (see spill_chain_restart)."""
    monkeypatch.setenv("PI_CONDENSE_SESSION_DIR", str(tmp_path / "sessions"))
    spill_chain_restart(
        lambda: MessagesCondenser(config=SPILLING),
        lambda hook, script, prompts, stored: run_loop(hook, script, prompts, stored)[:2],
        saved,
        lambda hook, history: saved(hook.condense(history, system=SYSTEM)),
    )


def test_untouched_messages_are_the_callers_objects(tmp_path: Path) -> None:
    hook = MessagesCondenser(session=tmp_path / "messages.jsonl")
    history, _, _ = run_loop(hook, Script(), range(3))
    history = saved(history)
    sent = hook.condense(history)
    by_text = {json.dumps(h): h for h in history}
    same = [m for m in sent if json.dumps(m) in by_text]
    assert len(same) >= 8
    assert all(m is by_text[json.dumps(m)] for m in same)


def test_async_client_and_acondense(tmp_path: Path) -> None:
    hook = MessagesCondenser(session=tmp_path / "messages.jsonl")
    script = Script()
    model = Model(script)

    async def loop(server: LoopbackLLMServer) -> list[Any]:
        api = anthropic.AsyncAnthropic(base_url=server.url, api_key="test", max_retries=0)
        history: list[Any] = []
        for p in range(4):
            history.append({"role": "user", "content": f"task {p}"})
            while True:
                response = await api.messages.create(
                    model="scripted",
                    max_tokens=1024,
                    system=SYSTEM,
                    messages=await hook.acondense(history, system=SYSTEM),
                    tools=[READ_TOOL, *hook.tools],
                )
                history.append({"role": "assistant", "content": response.content})
                if response.stop_reason != "tool_use":
                    break
                history.append({"role": "user", "content": tool_results(hook, response.content)})
        await hook.aclose(history)
        return history

    with LoopbackLLMServer(model) as server:
        history = asyncio.run(loop(server))
    assert check_queries(script, model.pairs) == 1
    assert hook.stats.chars_out < 0.5 * hook.stats.chars_in
    final = hook.condense(history)
    assert check_refs(hook.execute, pairs(final), final) >= 12


def test_tools_and_system_argument(tmp_path: Path) -> None:
    hook = MessagesCondenser(session=":memory:")
    assert hook.tools[0]["name"] == QUERY
    assert all(set(t) == {"name", "description", "input_schema"} for t in hook.tools)
    messages = [{"role": "user", "content": "hi"}]
    assert hook.condense(messages, system=[{"type": "text", "text": SYSTEM}]) == messages
    with pytest.raises(TypeError, match="swapped"):
        hook.condense(messages, system=messages)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())
