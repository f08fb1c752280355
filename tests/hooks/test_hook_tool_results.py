"""Issue 37, finding 11: the Chat Completions and Anthropic Messages hooks take a tool result's
content as the provider takes it (a string, a list of parts or blocks; a tuple as the SDKs
send it, a list) and refuse anything else, naming the message, instead of storing it empty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pi_condense.integrations.anthropic_messages import MessagesCondenser
from pi_condense.integrations.openai_chat import ChatCondenser

CHAT_REFUSAL = "the Chat Completions API takes a string or a list of content parts"
MESSAGES_REFUSAL = "the Messages API takes a string or a list of content blocks"
TEXT = {"type": "text", "text": "second"}


def stored_tool_results(path: Path) -> list[Any]:
    """The content of every toolResult message the session file holds, in order."""
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        e["message"]["content"]
        for e in entries
        if e.get("type") == "message" and e["message"]["role"] == "toolResult"
    ]


def chat_call(call_id: str) -> dict[str, Any]:
    function = {"name": "read", "arguments": "{}"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def chat_history(content: Any) -> list[Any]:
    """A system prompt, a prompt, a call and its result (message 3) holding ``content``."""
    return [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": "hi"},
        chat_call("call_7"),
        {"role": "tool", "tool_call_id": "call_7", "content": content},
    ]


def tool_use(use_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": use_id, "name": "read", "input": {}}],
    }


def tool_result(use_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": content}


def messages_history(content: Any) -> list[Any]:
    """A prompt, a tool use and its result (message 2) holding ``content``."""
    return [
        {"role": "user", "content": "hi"},
        tool_use("toolu_7"),
        {"role": "user", "content": [tool_result("toolu_7", content)]},
    ]


REFUSED = [
    (b"file text", "content is bytes"),
    (bytearray(b"file text"), "content is bytearray"),
    (42, "content is int"),
    (2.5, "content is float"),
    (True, "content is bool"),
    ({"type": "text", "text": "x"}, "content is dict"),
    (["x"], "content[0] is str, not a JSON object"),
    ([{"type": "text", "text": "x"}, b"y"], "content[1] is bytes, not a JSON object"),
]


@pytest.mark.parametrize(("content", "what"), REFUSED)
@pytest.mark.parametrize("hook_name", ["chat", "messages"])
def test_a_tool_result_the_api_refuses_is_refused_naming_it(
    tmp_path: Path, hook_name: str, content: Any, what: str
) -> None:
    path = tmp_path / "session.jsonl"
    hook: Any
    if hook_name == "chat":
        hook = ChatCondenser(session=path)
        history = chat_history(content)
        expected = f"message 3 of the history (the tool result of call 'call_7'): {what}; "
        expected += CHAT_REFUSAL
    else:
        hook = MessagesCondenser(session=path)
        history = messages_history(content)
        expected = f"message 2 of the history (the tool result of call 'toolu_7'): {what}; "
        expected += MESSAGES_REFUSAL
    with pytest.raises(TypeError) as caught:
        hook.condense(history)
    assert str(caught.value) == expected
    hook.close()
    assert stored_tool_results(path) == []  # nothing stored for it, not an empty result


def test_chat_tool_results_the_api_takes_are_stored_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    hook = ChatCondenser(session=path)
    history = chat_history("first")
    history.append({"role": "user", "content": "again"})
    history.append(chat_call("call_8"))
    history.append({"role": "tool", "tool_call_id": "call_8", "content": (TEXT,)})
    sent = hook.condense(history)
    hook.close()
    assert stored_tool_results(path) == [[{"type": "text", "text": "first"}], [TEXT]]
    assert sent[3] is history[3]


def test_messages_tool_results_the_api_takes_are_stored_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "messages.jsonl"
    hook = MessagesCondenser(session=path)
    history = messages_history("first")
    history.append({"role": "assistant", "content": "ok"})
    history.append({"role": "user", "content": "again"})
    history.append(tool_use("toolu_8"))
    text = {"type": "text", "text": "go on"}
    history.append({"role": "user", "content": [tool_result("toolu_8", (TEXT,)), text]})
    history.append(tool_use("toolu_9"))
    history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9"}]})
    hook.condense(history)
    hook.close()
    # no content at all is an empty result, as the Messages API reads it
    assert stored_tool_results(path) == [[{"type": "text", "text": "first"}], [TEXT], []]
