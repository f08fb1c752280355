"""Scripted models behind the loopback server for the proxy's tests, one per wire format
(Chat Completions, Responses, Messages): each checks a request as the provider's API does
(call/result pairing, role order, ``cache_control`` placement), records what it saw, and
answers with its script's next step, as one JSON body or, when the request says
``"stream": true``, as the provider's server-sent events.

A rule broken is recorded in ``violations`` and answered with a 400 (the tests assert that
there are none)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Callable, Optional

from support.chat_wire import completion
from support.chat_wire import pairs as chat_pairs
from support.hook_runs import Pair, Script, Text
from support.llm_servers import Recorded, Reply
from support.messages_wire import pairs as messages_pairs
from support.messages_wire import reply as messages_reply

CACHE_BLOCKS = {"text", "image", "tool_use", "tool_result", "document"}


def _sse(payload: Any, name: Optional[str] = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(payload)}\n\n".encode()


def responses_pairs(items: Sequence[dict[str, Any]]) -> list[Pair]:
    """Tool calls with their results, checked as the Responses API checks ``input``: every
    ``function_call_output`` answers an earlier ``function_call`` and every call is answered
    before the next message."""
    found: list[Pair] = []
    open_calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            open_calls[item["call_id"]] = (item["name"], json.loads(item["arguments"]))
        elif kind == "function_call_output":
            assert item["call_id"] in open_calls, (index, "an output without its call")
            name, arguments = open_calls.pop(item["call_id"])
            assert isinstance(item["output"], str), index
            found.append(Pair(name, arguments, item["output"]))
        else:
            assert kind in ("message", "reasoning"), (index, kind)
            assert not open_calls, (index, "calls without outputs", sorted(open_calls))
            assert item.get("role") in ("user", "assistant", "system", "developer"), index
    assert not open_calls, ("calls without outputs at the end", sorted(open_calls))
    return found


def check_cache_control(body: dict[str, Any]) -> int:
    """Anthropic's rules for ``cache_control``: at most 4 breakpoints, each on a block that
    can carry one (text, image, tool_use, tool_result, document: not thinking, not an empty
    text). Returns how many."""
    marked: list[dict[str, Any]] = []
    system = body.get("system")
    blocks = [b for b in system if isinstance(b, dict)] if isinstance(system, list) else []
    for message in body.get("messages") or []:
        if isinstance(message.get("content"), list):
            blocks += message["content"]
    for block in blocks:
        if "cache_control" in block:
            assert block["type"] in CACHE_BLOCKS, ("cache_control on", block["type"])
            if block["type"] == "text":
                assert block["text"].strip(), "cache_control on an empty text block"
            marked.append(block)
    marked += [t for t in body.get("tools") or [] if "cache_control" in t]
    assert len(marked) <= 4, f"{len(marked)} cache_control breakpoints (at most 4)"
    return len(marked)


def chat_stream(reply: Reply) -> Reply:
    """A Chat Completions body as its stream: a role chunk, the text, each call's id and
    name then its arguments in two pieces, the finish chunk, ``[DONE]``."""
    body = json.loads(reply.body)
    message = body["choices"][0]["message"]
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": 1, "model": "s"}

    def chunk(delta: dict[str, Any], finish: Optional[str] = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    parts = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        text = message["content"]
        parts += [chunk({"content": text[:3]}), chunk({"content": text[3:]})]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        head = {"index": index, "id": call["id"], "type": "function"}
        parts.append(chunk({"tool_calls": [{**head, "function": {"name": function["name"]}}]}))
        half = len(function["arguments"]) // 2
        for piece in (function["arguments"][:half], function["arguments"][half:]):
            parts.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    parts.append(chunk({}, body["choices"][0]["finish_reason"]))
    parts.append(b"data: [DONE]\n\n")
    return Reply(chunks=[(0.0, p) for p in parts])


def messages_stream(reply: Reply) -> Reply:
    """A Messages body as its events (``message_start``, each block's start, deltas and
    stop, ``message_delta``, ``message_stop``)."""
    body = json.loads(reply.body)
    start = {**body, "content": [], "stop_reason": None}
    parts = [_sse({"type": "message_start", "message": start}, "message_start")]
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        else:
            opened = {**block, "input": {}}
            text = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in (text[: len(text) // 2], text[len(text) // 2 :])
            ]
        event = {"type": "content_block_start", "index": index, "content_block": opened}
        parts.append(_sse(event, "content_block_start"))
        for delta in deltas:
            event = {"type": "content_block_delta", "index": index, "delta": delta}
            parts.append(_sse(event, "content_block_delta"))
        parts.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    delta = {"type": "message_delta", "delta": {"stop_reason": body["stop_reason"]}}
    parts.append(_sse({**delta, "usage": {"output_tokens": 1}}, "message_delta"))
    parts.append(_sse({"type": "message_stop"}, "message_stop"))
    return Reply(chunks=[(0.0, p) for p in parts])


def responses_reply(step: Any) -> Reply:
    """A Responses API body for one step of the script."""
    if isinstance(step, Text):
        content = [{"type": "output_text", "text": step.text, "annotations": []}]
        output: list[dict[str, Any]] = [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": content,
            }
        ]
    else:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{call.call_id}",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
                "status": "completed",
            }
            for call in step
        ]
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "scripted",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    return Reply(body=json.dumps(body).encode())


def responses_stream(reply: Reply) -> Reply:
    """A Responses body as its events (created, each item added/delta/done, completed)."""
    body = json.loads(reply.body)
    seq = iter(range(10_000))
    parts = []

    def add(payload: dict[str, Any]) -> None:
        payload = {**payload, "sequence_number": next(seq)}
        parts.append(_sse(payload, payload["type"]))

    opened = {**body, "status": "in_progress", "output": []}
    add({"type": "response.created", "response": opened})
    add({"type": "response.in_progress", "response": opened})
    for index, item in enumerate(body["output"]):
        if item["type"] == "function_call":
            add(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "arguments": "", "status": "in_progress"},
                }
            )
            add(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": index,
                    "item_id": item["id"],
                    "delta": item["arguments"],
                }
            )
            add(
                {
                    "type": "response.function_call_arguments.done",
                    "output_index": index,
                    "item_id": item["id"],
                    "arguments": item["arguments"],
                }
            )
        else:
            add(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "content": [], "status": "in_progress"},
                }
            )
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            add(
                {
                    "type": "response.content_part.added",
                    "output_index": index,
                    "item_id": item["id"],
                    "content_index": 0,
                    "part": part,
                }
            )
            add(
                {
                    "type": "response.output_text.delta",
                    "output_index": index,
                    "item_id": item["id"],
                    "content_index": 0,
                    "delta": text,
                    "logprobs": [],
                }
            )
            add(
                {
                    "type": "response.output_text.done",
                    "output_index": index,
                    "item_id": item["id"],
                    "content_index": 0,
                    "text": text,
                    "logprobs": [],
                }
            )
            add(
                {
                    "type": "response.content_part.done",
                    "output_index": index,
                    "item_id": item["id"],
                    "content_index": 0,
                    "part": item["content"][0],
                }
            )
        add({"type": "response.output_item.done", "output_index": index, "item": item})
    add({"type": "response.completed", "response": body})
    return Reply(chunks=[(0.0, p) for p in parts])


class WireModel:
    """The loopback server's model for one wire format: checks each request, records it
    (``requests``: the history; ``bodies``: the whole body; ``pairs``) and answers the
    script's next step; ``script_for(request)`` picks the script (one per conversation)."""

    def __init__(self, kind: str, script_for: Callable[[dict[str, Any]], Script]) -> None:
        self.kind = kind
        self.script_for = script_for
        self.requests: list[list[dict[str, Any]]] = []
        self.bodies: list[dict[str, Any]] = []
        self.pairs: list[list[Pair]] = []
        self.violations: list[str] = []

    def __call__(self, request: Recorded) -> Reply:
        body = request.body
        try:
            if self.kind == "chat":
                history = body["messages"]
                found = chat_pairs(history)
            elif self.kind == "responses":
                history = body["input"]
                found = responses_pairs(history)
            else:
                history = body["messages"]
                found = messages_pairs(history, unique_ids=True)
                check_cache_control(body)
            names = [t.get("name") or t.get("function", {}).get("name") for t in body["tools"]]
            assert len(names) == len(set(names)), ("tool names repeat", names)
        except (AssertionError, KeyError, TypeError, ValueError) as exc:
            self.violations.append(f"{type(exc).__name__}: {exc}")
            return Reply(status=400, body=json.dumps({"error": str(exc)}).encode())
        self.requests.append(history)
        self.bodies.append(body)
        self.pairs.append(found)
        step = self.script_for(body).step(found)
        if self.kind == "chat":
            reply = completion(step)
            return chat_stream(reply) if body.get("stream") else reply
        if self.kind == "responses":
            reply = responses_reply(step)
            return responses_stream(reply) if body.get("stream") else reply
        reply = messages_reply(step)
        return messages_stream(reply) if body.get("stream") else reply
