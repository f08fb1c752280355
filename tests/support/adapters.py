"""Test support for the message adapters: provider validity checks, generated histories in
each format, and a real Condenser run over a decoded history (the way the live driver does).

The validity checks mirror what the providers reject (documented API rules, as pi-ai's
provider conversions also assume): OpenAI Chat: an assistant's ``tool_calls`` answered by
``tool`` messages right after it, one per id, and no other ``tool`` message; Responses: every
``function_call_output`` after an unanswered ``function_call`` with its ``call_id`` and every
call answered, a reasoning item followed by an item of its response; Anthropic: first
message ``user``, roles alternating, every ``tool_use`` answered by a ``tool_result`` in the
next (user) message whose tool results come first and answer only that assistant's calls.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from pi_condense.adapters import Out, Unit, unit_messages
from pi_condense.condenser import Condenser
from pi_condense.render import RenderResult
from support.agent import Clock, ScriptedSummarizer, config, new_session

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake-image-bytes").decode()
PNG_URL = f"data:image/png;base64,{PNG}"


# ----------------------------------------------------------------------------- validity


def check_chat(messages: Sequence[Any]) -> None:
    """Raise AssertionError where OpenAI Chat Completions would reject ``messages``."""
    open_ids: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        assert role in ("system", "developer", "user", "assistant", "tool"), (index, role)
        if role == "tool":
            assert message.get("tool_call_id") in open_ids, (index, "tool without its call")
            open_ids.discard(message["tool_call_id"])
            assert isinstance(message.get("content"), (str, list)), index
            continue
        assert not open_ids, (index, f"calls without results: {sorted(open_ids)}")
        if role == "assistant":
            calls = message.get("tool_calls") or []
            content = message.get("content")
            assert calls or content, (index, "assistant with neither content nor tool_calls")
            ids = [c["id"] for c in calls]
            assert len(set(ids)) == len(ids), (index, "duplicate call ids")
            for call in calls:
                assert call["type"] == "function"
                assert isinstance(call["function"]["name"], str)
                assert isinstance(call["function"]["arguments"], str)
            open_ids = set(ids)
        else:
            assert isinstance(message.get("content"), (str, list)), index
    assert not open_ids, f"calls without results at the end: {sorted(open_ids)}"


_ASSISTANT_SIDE = ("reasoning", "function_call", "assistant-message")


def _responses_kind(item: dict[str, Any]) -> str:
    if item.get("type") in (None, "message"):
        role = item.get("role")
        assert role in ("user", "assistant", "system", "developer"), item
        return "assistant-message" if role == "assistant" else "message"
    return str(item["type"])


def check_responses(items: Sequence[Any]) -> None:
    """Raise AssertionError where the Responses API would reject ``items``."""
    open_ids: set[str] = set()
    kinds = [_responses_kind(item) for item in items]
    for index, (item, kind) in enumerate(zip(items, kinds, strict=False)):
        if kind == "function_call":
            assert item["call_id"] not in open_ids, (index, "call id reused while open")
            assert isinstance(item["arguments"], str)
            assert isinstance(item["name"], str)
            open_ids.add(item["call_id"])
        elif kind == "function_call_output":
            assert item["call_id"] in open_ids, (index, "output without its call")
            open_ids.discard(item["call_id"])
            assert isinstance(item["output"], (str, list)), index
        elif kind == "reasoning":
            following = kinds[index + 1] if index + 1 < len(kinds) else None
            assert following in _ASSISTANT_SIDE, (index, "reasoning without a following item")
        elif kind in ("message", "assistant-message"):
            assert not open_ids or kind == "assistant-message", (index, "open calls", open_ids)
            assert isinstance(item.get("content"), (str, list)), index
    assert not open_ids, f"calls without outputs: {sorted(open_ids)}"


def check_anthropic(messages: Sequence[Any], alternate: bool = True) -> None:
    """Raise AssertionError where the Anthropic Messages API would reject ``messages``
    (``alternate`` False: consecutive user messages allowed, as the API joins them)."""
    assert messages, "no messages"
    assert messages[0]["role"] == "user", "first message must be a user message"
    calls: set[str] = set()
    for index, message in enumerate(messages):
        role = message["role"]
        assert role in ("user", "assistant"), (index, role)
        if index and (alternate or role == "assistant"):
            assert role != messages[index - 1]["role"], (index, "roles must alternate")
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        assert blocks, (index, "empty content")
        if role == "assistant":
            assert not calls, (index, "tool_use without tool_result", calls)
            for block in blocks:
                if block["type"] == "text":
                    assert block["text"].strip(), (index, "whitespace-only text")
            calls = {b["id"] for b in blocks if b["type"] == "tool_use"}
            for block in blocks:
                if block["type"] == "tool_use":
                    assert isinstance(block["input"], dict), index
            continue
        results = [b for b in blocks if b["type"] == "tool_result"]
        leading = blocks[: len(results)]
        assert leading == results, (index, "tool_result blocks must come first")
        answered = [r["tool_use_id"] for r in results]
        assert sorted(answered) == sorted(calls), (index, calls, answered)
        calls = set()
    assert not calls, "tool_use without tool_result at the end"


# ----------------------------------------------------------------------------- histories


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    args: dict[str, Any]
    output: str
    image: bool = False


@dataclass(frozen=True)
class Step:
    text: str
    thinking: str
    calls: tuple[Call, ...]


@dataclass(frozen=True)
class Turn:
    prompt: str
    image: bool
    steps: tuple[Step, ...]
    final: str  # "" ends the turn on tool results


TOOLS = ("read", "bash", "grep", "context_tree_query")
words = st.text(alphabet='abcdefxyz é\n{}"', min_size=1, max_size=12).filter(str.strip)


@st.composite
def turns(draw: Any, images: bool = True, max_turns: int = 4) -> list[Turn]:
    """A conversation: prompts, tool steps (ids reused as ``call_N`` or unique), replies."""
    reuse = draw(st.booleans())
    counter = 0
    out = []
    for _ in range(draw(st.integers(1, max_turns))):
        steps = []
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for n in range(draw(st.integers(1, 3))):
                counter += 1
                calls.append(
                    Call(
                        id=f"call_{n}" if reuse else f"call_{counter}",
                        name=draw(st.sampled_from(TOOLS)),
                        args=draw(st.dictionaries(st.sampled_from("pqr"), words, max_size=2)),
                        output=draw(words) * draw(st.integers(1, 40)),
                        image=images and draw(st.integers(0, 5)) == 0,
                    )
                )
            steps.append(
                Step(
                    text=draw(st.one_of(st.just(""), words)),
                    thinking=draw(st.one_of(st.just(""), words)),
                    calls=tuple(calls),
                )
            )
        final = draw(words) if not steps or draw(st.booleans()) else ""
        out.append(
            Turn(
                prompt=draw(words),
                image=images and draw(st.integers(0, 4)) == 0,
                steps=tuple(steps),
                final=final,
            )
        )
    if not out[-1].final:
        out[-1] = Turn(out[-1].prompt, out[-1].image, out[-1].steps, "done")
    return out


def chat_history(plan: Sequence[Turn]) -> list[dict[str, Any]]:
    """The plan as OpenAI Chat Completions messages."""
    items: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for turn in plan:
        if turn.image:
            parts = [
                {"type": "text", "text": turn.prompt},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
            ]
            items.append({"role": "user", "content": parts})
        else:
            items.append({"role": "user", "content": turn.prompt})
        for step in turn.steps:
            assistant: dict[str, Any] = {"role": "assistant", "content": step.text or None}
            if step.thinking:
                assistant["reasoning_content"] = step.thinking
            assistant["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _json(c.args)},
                }
                for c in step.calls
            ]
            items.append(assistant)
            for call in step.calls:
                items.append({"role": "tool", "tool_call_id": call.id, "content": call.output})
        if turn.final:
            items.append({"role": "assistant", "content": turn.final})
    return items


def responses_history(plan: Sequence[Turn]) -> list[dict[str, Any]]:
    """The plan as Responses input items, shaped as the OpenAI Agents SDK keeps them."""
    items: list[dict[str, Any]] = [{"role": "developer", "content": "You are terse."}]
    n = 0
    for turn in plan:
        if turn.image:
            parts = [
                {"type": "input_text", "text": turn.prompt},
                {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
            ]
            items.append({"role": "user", "content": parts})
        else:
            items.append({"content": turn.prompt, "role": "user"})
        for step in turn.steps:
            n += 1
            if step.thinking:
                summary = [{"type": "summary_text", "text": step.thinking}]
                items.append({"id": f"rs_{n}", "summary": summary, "type": "reasoning"})
            if step.text:
                items.append(_output_message(f"msg_{n}", step.text))
            for call in step.calls:
                items.append(
                    {
                        "arguments": _json(call.args),
                        "call_id": call.id,
                        "name": call.name,
                        "type": "function_call",
                        "id": f"fc_{n}_{call.id}",
                        "status": "completed",
                    }
                )
            for call in step.calls:
                output: Any = call.output
                if call.image:
                    output = [
                        {"type": "input_text", "text": call.output},
                        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
                    ]
                items.append({"call_id": call.id, "output": output, "type": "function_call_output"})
        if turn.final:
            n += 1
            items.append(_output_message(f"msg_{n}", turn.final))
    return items


def _output_message(item_id: str, text: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": []}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }


def anthropic_history(plan: Sequence[Turn]) -> list[dict[str, Any]]:
    """The plan as Anthropic messages (a prompt after tool results joins their message)."""
    items: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for turn in plan:
        prompt: list[dict[str, Any]] = [{"type": "text", "text": turn.prompt}]
        if turn.image:
            source = {"type": "base64", "media_type": "image/png", "data": PNG}
            prompt.append({"type": "image", "source": source})
        if pending:
            items.append({"role": "user", "content": pending + prompt})
        elif turn.image:
            items.append({"role": "user", "content": prompt})
        else:
            items.append({"role": "user", "content": turn.prompt})
        pending = []
        for step in turn.steps:
            if pending:
                items.append({"role": "user", "content": pending})
            blocks: list[dict[str, Any]] = []
            if step.thinking:
                blocks.append({"type": "thinking", "thinking": step.thinking, "signature": "c2ln"})
            if step.text:
                blocks.append({"type": "text", "text": step.text})
            for call in step.calls:
                blocks.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.args}
                )
            items.append({"role": "assistant", "content": blocks})
            pending = [_tool_result(call) for call in step.calls]
        if turn.final:
            if pending:
                items.append({"role": "user", "content": pending})
                pending = []
            items.append({"role": "assistant", "content": [{"type": "text", "text": turn.final}]})
    return items


def _tool_result(call: Call) -> dict[str, Any]:
    content: Any = call.output
    if call.image:
        source = {"type": "base64", "media_type": "image/png", "data": PNG}
        content = [{"type": "text", "text": call.output}, {"type": "image", "source": source}]
    return {"type": "tool_result", "tool_use_id": call.id, "content": content}


def _json(value: Any) -> str:
    from pi_condense.js import json as jsjson

    return jsjson.dumps(value)


# ----------------------------------------------------------------------------- driving


def untouched_outs(items: Sequence[Any], units: Sequence[Unit]) -> list[Out]:
    """Every unit handed back untouched, with its items."""
    return [Out(u.message, tuple(items[u.start : u.stop])) for u in units]


@dataclass
class Driven:
    """A decoded history after a real Condenser run: its timestamped Pi messages, the
    render, and the Outs a driver hands the codec for it."""

    units: list[Unit]
    messages: list[dict[str, Any]]
    rendered: RenderResult
    outs: list[Out]


def drive(items: Sequence[Any], units: Sequence[Unit], compact: bool = True) -> Driven:
    """Feed the decoded ``units`` to a Condenser as Pi's agent loop would (timestamps
    assigned in order), flush, compress closed chains, render, and map the render back."""
    clock = Clock()
    session = new_session(clock=clock)
    condenser = Condenser(session, config(), summarizer=ScriptedSummarizer(), clock=clock)
    condenser.session_start()
    stamped: list[dict[str, Any]] = []
    owner: dict[int, tuple[int, int]] = {}  # id(stamped message) -> (unit index, position)
    for unit_index, unit in enumerate(units):
        for position, message in enumerate(unit_messages(unit.message)):
            copy = {**message, "timestamp": clock.tick()}
            owner[id(copy)] = (unit_index, position)
            stamped.append(copy)

    async def run() -> None:
        turn_index = 0
        index = 0
        while index < len(stamped):
            message = stamped[index]
            if message["role"] == "user" and index:
                condenser.agent_end()
                turn_index = 0
            await condenser.message_end(message)
            session.append_message(message)
            index += 1
            if message["role"] != "assistant":
                continue
            results = []
            while index < len(stamped) and stamped[index]["role"] == "toolResult":
                await condenser.message_end(stamped[index])
                session.append_message(stamped[index])
                results.append(stamped[index])
                index += 1
            await condenser.turn_end(message, results, turn_index)
            turn_index += 1
        condenser.agent_end()
        await condenser.flush_now()
        if compact:
            await condenser.compact()

    asyncio.run(run())
    rendered = condenser.context(list(stamped))
    return Driven(list(units), stamped, rendered, outs_for(items, units, rendered.messages, owner))


def outs_for(
    items: Sequence[Any],
    units: Sequence[Unit],
    rendered: Sequence[Any],
    owner: dict[int, tuple[int, int]],
) -> list[Out]:
    """The Outs for a render, by the contract in ``adapters.base``; host-only units are put
    back before the next message of their original position."""
    outs: list[Out] = []
    host_only = [i for i, u in enumerate(units) if u.message is None]
    next_host = 0
    index = 0
    while index < len(rendered):
        message = rendered[index]
        where = owner.get(id(message))
        if where is not None:
            while next_host < len(host_only) and host_only[next_host] < where[0]:
                unit = units[host_only[next_host]]
                outs.append(Out(None, tuple(items[unit.start : unit.stop])))
                next_host += 1
            unit = units[where[0]]
            expected = unit_messages(unit.message)
            if isinstance(unit.message, list):
                span = rendered[index : index + len(expected)]
                whole = where[1] == 0 and [owner.get(id(m)) for m in span] == [
                    (where[0], p) for p in range(len(expected))
                ]
                if whole:
                    outs.append(Out(unit.message, tuple(items[unit.start : unit.stop])))
                    index += len(expected)
                    continue
                outs.append(Out(message, ()))
            else:
                outs.append(Out(unit.message, tuple(items[unit.start : unit.stop])))
        else:
            outs.append(Out(message, ()))
        index += 1
    for position in host_only[next_host:]:
        unit = units[position]
        outs.append(Out(None, tuple(items[unit.start : unit.stop])))
    return outs


def big_plan(turn_count: int = 3, reuse: bool = True) -> list[Turn]:
    """Several prompts with multi-call tool steps and outputs of a few KB."""
    plan = []
    for t in range(turn_count):
        steps = tuple(
            Step(
                text=f"step {s}",
                thinking="",
                calls=tuple(
                    Call(
                        id=f"call_{c}" if reuse else f"call_{t}_{s}_{c}",
                        name="read",
                        args={"path": f"src/t{t}s{s}c{c}.py"},
                        output=f"output of t{t}s{s}c{c}\n" + "x = 1\n" * 700,
                    )
                    for c in range(2)
                ),
            )
            for s in range(2)
        )
        plan.append(Turn(f"prompt {t}", False, steps, f"answer {t}"))
    return plan


def stub_texts(messages: Sequence[Any]) -> list[str]:
    """The stub texts the render put in its toolResults."""
    return [
        m["content"][0]["text"]
        for m in messages
        if isinstance(m, dict)
        and m.get("role") == "toolResult"
        and m["content"][0].get("text", "").startswith("[Summarized in pruner summary")
    ]


def pi_history(
    plan: Sequence[Turn],
    thinking: Any,
    summaries: Sequence[bool] = (),
    result_images: bool = True,
) -> list[dict[str, Any]]:
    """The plan as Pi messages (no timestamps), as the render may hand them to ``encode``:
    ``thinking(text)`` gives a thinking block (or None to leave it out); ``summaries[i]``
    puts a pruner summary (``custom``) after turn i's reply and a compressed-chain user
    message after its prompt."""
    out: list[dict[str, Any]] = []
    for index, turn in enumerate(plan):
        extra = index < len(summaries) and summaries[index]
        if turn.image:
            image = {"type": "image", "data": PNG, "mimeType": "image/png"}
            out.append({"role": "user", "content": [{"type": "text", "text": turn.prompt}, image]})
        else:
            out.append({"role": "user", "content": turn.prompt})
        if extra:
            chain = f'<compressed-chain id="b{index}" tools="t1">\nS\n</compressed-chain>'
            out.append({"role": "user", "content": [{"type": "text", "text": chain}]})
        for step in turn.steps:
            content: list[dict[str, Any]] = []
            block = thinking(step.thinking) if step.thinking else None
            if block is not None:
                content.append(block)
            if step.text:
                content.append({"type": "text", "text": step.text})
            for call in step.calls:
                content.append(
                    {"type": "toolCall", "id": call.id, "name": call.name, "arguments": call.args}
                )
            out.append({"role": "assistant", "content": content, "stopReason": "toolUse"})
            for call in step.calls:
                blocks: list[dict[str, Any]] = [{"type": "text", "text": call.output}]
                if call.image and result_images:
                    blocks.append({"type": "image", "data": PNG, "mimeType": "image/png"})
                out.append(
                    {
                        "role": "toolResult",
                        "toolCallId": call.id,
                        "toolName": call.name,
                        "content": blocks,
                        "isError": call.name == "bash",
                    }
                )
        if turn.final:
            out.append(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": turn.final}],
                    "stopReason": "stop",
                }
            )
            if extra:
                out.append(
                    {
                        "role": "custom",
                        "customType": "context-prune-summary",
                        "content": f"summary of turn {index}",
                        "display": False,
                        "details": {"toolCallRefs": []},
                    }
                )
    return out


def essentials(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pi messages without what no provider format carries (timestamps, assistant metadata,
    toolResult details), ``custom`` as the user message Pi sends, string content as a block."""
    out = []
    for message in messages:
        role = message["role"]
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}] if content else []
        if role == "custom":
            role = "user"
        kept: dict[str, Any] = {"role": role, "content": content}
        if role == "toolResult":
            for key in ("toolCallId", "toolName", "isError"):
                kept[key] = message.get(key)
        out.append(kept)
    return out


def merge_users(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent user messages (of :func:`essentials`) as one."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and message["role"] == "user" and out[-1]["role"] == "user":
            out[-1] = {"role": "user", "content": out[-1]["content"] + message["content"]}
        else:
            out.append(message)
    return out
