"""The Anthropic Messages wire as the hook tests speak it: history pairs and scripted replies."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from support.hook_runs import (
    Pair,
    Text,
)
from support.llm_servers import Reply


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    if isinstance(content, str):
        assert content, "an empty text message"
        return [{"type": "text", "text": content}]
    assert isinstance(content, list), content
    assert content, "a message without blocks"
    return content


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    assert all(b["type"] == "text" for b in content), content
    return "".join(b["text"] for b in content)


def pairs(messages: Sequence[dict[str, Any]], unique_ids: bool = False) -> list[Pair]:
    """Tool calls with their results, checked as the Messages API checks a request: the first
    message is the user's, roles alternate, and the user message right after an assistant
    message with ``tool_use`` blocks starts with a ``tool_result`` for each of them (and holds
    no other tool_result); with ``unique_ids`` (Anthropic's own API; a local server may reuse
    ids) no two ``tool_use`` blocks share an id."""
    found: list[Pair] = []
    ids = [
        b["id"]
        for m in messages
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    if unique_ids:
        assert len(ids) == len(set(ids)), "tool_use ids must be unique"
    assert messages, "no messages"
    assert messages[0]["role"] == "user", "the first message must be the user's"
    uses: dict[str, tuple[str, dict[str, Any]]] = {}
    for index, message in enumerate(messages):
        role = message["role"]
        assert role in ("user", "assistant"), (index, role)
        if index:
            assert role != messages[index - 1]["role"], (index, "roles must alternate")
        blocks = _blocks(message)
        for block in blocks:
            if block["type"] == "text":
                assert block["text"].strip(), (index, "a whitespace-only text block")
        if role == "assistant":
            assert not any(b["type"] == "tool_result" for b in blocks), index
            uses = {b["id"]: (b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"}
            continue
        results = [b for b in blocks if b["type"] == "tool_result"]
        assert blocks[: len(results)] == results, (index, "tool_result blocks come first")
        assert sorted(b["tool_use_id"] for b in results) == sorted(uses), (index, uses)
        for block in results:
            name, arguments = uses[block["tool_use_id"]]
            found.append(Pair(name, arguments, _text(block.get("content", ""))))
        uses = {}
    assert not uses, "tool_use without results at the end"
    return found


def reply(step: Any) -> Reply:
    """A Messages API response body for one step of the script."""
    if isinstance(step, Text):
        content: list[dict[str, Any]] = [{"type": "text", "text": step.text}]
        stop = "end_turn"
    else:
        content = [
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments}
            for call in step
        ]
        stop = "tool_use"
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return Reply(body=json.dumps(body).encode())
