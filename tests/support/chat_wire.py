"""A scripted model behind the loopback server, speaking the Chat Completions protocol: it
checks each request as the API would and answers with the script's next step."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from support.hook_runs import Pair, Script, Text
from support.llm_servers import Recorded, Reply

ROLES = {"system", "developer", "user", "assistant", "tool"}


def pairs(messages: Sequence[dict[str, Any]]) -> list[Pair]:
    """Tool calls with their results, checked as the Chat Completions API checks a request:
    known roles, each tool message answers a call of the assistant message before its run
    of tool messages, and every call is answered before the next other message."""
    found: list[Pair] = []
    open_calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for index, message in enumerate(messages):
        role = message.get("role")
        assert role in ROLES, (index, role)
        if role == "tool":
            call_id = message["tool_call_id"]
            assert call_id in open_calls, (index, call_id, "a tool message without its call")
            name, arguments = open_calls.pop(call_id)
            content = message["content"]
            if isinstance(content, list):
                assert all(p.get("type") == "text" for p in content), index
                content = "".join(p["text"] for p in content)
            assert isinstance(content, str), index
            found.append(Pair(name, arguments, content))
            continue
        assert not open_calls, (index, "calls without results", sorted(open_calls))
        if role == "assistant":
            calls = message.get("tool_calls") or []
            assert calls or message.get("content") is not None, (index, "an empty assistant")
            for call in calls:
                assert call["type"] == "function"
                function = call["function"]
                assert isinstance(function["arguments"], str)
                open_calls[call["id"]] = (function["name"], json.loads(function["arguments"]))
        else:
            assert message.get("content") not in (None, "", []), (index, role)
    assert not open_calls, ("calls without results at the end", sorted(open_calls))
    return found


def completion(step: Any) -> Reply:
    """A Chat Completions response body for one step of the script."""
    if isinstance(step, Text):
        message: dict[str, Any] = {"role": "assistant", "content": step.text}
        finish = "stop"
    else:
        calls = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in step
        ]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    return Reply(body=json.dumps(body).encode())


class ChatCompletionsModel:
    """The loopback server's model: the script, fed with what each request holds."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[list[dict[str, Any]]] = []
        self.pairs: list[list[Pair]] = []

    def __call__(self, request: Recorded) -> Reply:
        messages = request.body["messages"]
        found = pairs(messages)
        self.requests.append(messages)
        self.pairs.append(found)
        return completion(self.script.step(found))
