"""The three wire formats the proxy speaks: where a request keeps its history, its system
prompt and its tools; what a reply's tool calls are; and how a streamed reply is watched,
held back and spliced when the proxy answers a recovery call itself.

No HTTP here: the formats as JSON data and server-sent events (bytes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ..adapters.anthropic_messages import AnthropicMessagesCodec
from ..adapters.base import Codec
from ..adapters.openai_chat import OpenAIChatCodec
from ..adapters.openai_responses import OpenAIResponsesCodec
from ..tools.registry import ToolRegistry

__all__ = ["ANTHROPIC", "CHAT", "RESPONSES", "Call", "Event", "SseSplitter", "Stream", "Wire"]


@dataclass(frozen=True)
class Call:
    """A tool call in a model's reply."""

    call_id: str
    name: str
    arguments: Any  # a dict or the JSON text the model produced


@dataclass
class Event:
    """One server-sent event: its raw bytes (blank line included) and its JSON data."""

    raw: bytes
    name: Optional[str]
    data: Any  # parsed JSON, the text ``[DONE]``, or None


class SseSplitter:
    """Cuts a byte stream into server-sent events as their bytes arrive."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Event]:
        self._buffer += chunk
        events: list[Event] = []
        while True:
            cut = _event_end(self._buffer)
            if cut < 0:
                return events
            raw, self._buffer = self._buffer[:cut], self._buffer[cut:]
            events.append(_parse_event(raw))

    def rest(self) -> bytes:
        """What came after the last whole event (sent on as it is)."""
        rest, self._buffer = self._buffer, b""
        return rest


def _event_end(buffer: bytes) -> int:
    ends = [i + len(sep) for sep in (b"\n\n", b"\r\n\r\n") if (i := buffer.find(sep)) >= 0]
    return min(ends) if ends else -1


def _parse_event(raw: bytes) -> Event:
    name: Optional[str] = None
    lines: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
    text = "\n".join(lines)
    data: Any = None
    if text == "[DONE]":
        data = text
    elif text:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    return Event(raw, name, data)


def _encode_event(name: Optional[str], data: Any) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class Stream:
    """Watches one streamed reply: which events go to the client now, which are held back
    (from the first event of a recovery call on), and the reply as items when it is done.

    ``splice`` makes it the continuation of an earlier reply the client has partly seen
    (the first reply's start is not repeated, indexes continue)."""

    def __init__(self, recovery: frozenset[str], splice: Optional[Stream] = None) -> None:
        self.recovery = recovery
        self.holding = False
        self.held: list[bytes] = []
        self.calls: list[Call] = []
        self.forwarded_items: int = splice.forwarded_items if splice is not None else 0
        self.base = splice if splice is not None else None

    def feed(self, event: Event) -> list[bytes]:  # pragma: no cover - per format
        raise NotImplementedError

    def items(self) -> list[Any]:  # pragma: no cover - per format
        """The reply as history items (what the model said, its calls included)."""
        raise NotImplementedError

    def hidden(self) -> bool:
        """Whether the reply is a round-trip the proxy answers: every call a recovery call."""
        return bool(self.calls) and all(c.name in self.recovery for c in self.calls)

    def _pass(self, event: Event, starts_recovery: bool) -> list[bytes]:
        if starts_recovery:
            self.holding = True
        if self.holding:
            self.held.append(event.raw)
            return []
        return [event.raw]


@dataclass
class Wire:
    """One wire format: ``name`` (the codec's API name), the upstream ``path`` after the base
    URL, the ``provider`` whose base URL it uses, and the keys of its request body."""

    name: str
    path: str
    provider: str
    history_key: str
    system_key: Optional[str]
    codec_type: type = field(repr=False, default=object)

    def codec(self) -> Codec[Any]:
        codec: Codec[Any] = self.codec_type()
        return codec

    def history(self, body: dict[str, Any]) -> Optional[list[Any]]:
        """The request's history, or None when it has none the proxy may condense."""
        items = body.get(self.history_key)
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            return None
        if body.get("previous_response_id") is not None:
            return None  # the provider holds the earlier part: nothing here to condense
        return items

    def has_reply(self, history: Sequence[Any]) -> bool:
        """Whether the history holds a model's reply yet (before, there is nothing to
        condense: a one-shot request gets no session)."""
        return any(
            item.get("role") == "assistant"
            or item.get("type") in ("function_call", "reasoning", "function_call_output")
            for item in history
        )

    def system(self, body: dict[str, Any], history: Sequence[Any]) -> Any:
        if self.system_key is not None:
            return body.get(self.system_key)
        return [m for m in history if m.get("role") in ("system", "developer")]

    def first_user(self, history: Sequence[Any]) -> Optional[dict[str, Any]]:
        for item in history:
            if item.get("role") == "user" and item.get("type", "message") == "message":
                return dict(item)
        return None

    def tool_defs(self, registry: ToolRegistry) -> list[dict[str, Any]]:
        if self.name == "anthropic-messages":
            return registry.anthropic()
        if self.name == "openai-responses":
            return registry.openai_responses()
        return registry.openai()

    def tool_name(self, tool: Any) -> Optional[str]:
        if not isinstance(tool, dict):
            return None
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        return name if isinstance(name, str) else None

    def error(self, status: int, kind: str, message: str) -> dict[str, Any]:
        """An error body as this format's API writes one."""
        if self.provider == "anthropic":
            return {"type": "error", "error": {"type": kind, "message": message}}
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    # ---------------------------------------------------------------- a whole reply

    def reply(self, body: Any) -> tuple[list[Any], list[Call]]:
        """A non-streamed reply as history items, and its tool calls."""
        if not isinstance(body, dict):
            return [], []
        if self.name == "openai-chat":
            choices = body.get("choices") or [{}]
            message = choices[0].get("message") or {}
            return _chat_items(message)
        if self.name == "anthropic-messages":
            content = body.get("content") or []
            return _anthropic_items(content)
        output = body.get("output") or []
        return _responses_items(output)

    def results(self, calls: Sequence[Call], texts: Sequence[str]) -> list[Any]:
        """History items answering ``calls`` with ``texts``."""
        if self.name == "openai-chat":
            return [
                {"role": "tool", "tool_call_id": c.call_id, "content": t}
                for c, t in zip(calls, texts, strict=True)
            ]
        if self.name == "anthropic-messages":
            blocks = [
                {"type": "tool_result", "tool_use_id": c.call_id, "content": t}
                for c, t in zip(calls, texts, strict=True)
            ]
            return [{"role": "user", "content": blocks}]
        return [
            {"type": "function_call_output", "call_id": c.call_id, "output": t}
            for c, t in zip(calls, texts, strict=True)
        ]

    def stream(self, recovery: frozenset[str], splice: Optional[Stream] = None) -> Stream:
        if self.name == "openai-chat":
            return _ChatStream(recovery, splice)
        if self.name == "anthropic-messages":
            return _AnthropicStream(recovery, splice)
        return _ResponsesStream(recovery, splice)


def _chat_items(message: dict[str, Any]) -> tuple[list[Any], list[Call]]:
    calls = [
        Call(str(c.get("id")), str(c["function"].get("name")), c["function"].get("arguments"))
        for c in message.get("tool_calls") or []
        if isinstance(c, dict) and isinstance(c.get("function"), dict)
    ]
    item: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        item["tool_calls"] = message["tool_calls"]
    return [item], calls


def _anthropic_items(content: list[Any]) -> tuple[list[Any], list[Call]]:
    calls = [
        Call(str(b.get("id")), str(b.get("name")), b.get("input"))
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    return [{"role": "assistant", "content": content}], calls


def _responses_items(output: list[Any]) -> tuple[list[Any], list[Call]]:
    calls = [
        Call(str(i.get("call_id")), str(i.get("name")), i.get("arguments"))
        for i in output
        if isinstance(i, dict) and i.get("type") == "function_call"
    ]
    return [i for i in output if isinstance(i, dict)], calls


# -------------------------------------------------------------------- streamed replies


class _ChatStream(Stream):
    """Chat Completions chunks: a recovery call shows as a ``tool_calls`` delta with its
    name; a continuation's chunks go on as they are (a repeated role delta is harmless)."""

    def __init__(self, recovery: frozenset[str], splice: Optional[Stream] = None) -> None:
        super().__init__(recovery, splice)
        self.content: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}

    def feed(self, event: Event) -> list[bytes]:
        data = event.data
        starts = False
        if isinstance(data, dict):
            for choice in data.get("choices") or []:
                delta = choice.get("delta") or {}
                if isinstance(delta.get("content"), str):
                    self.content.append(delta["content"])
                for part in delta.get("tool_calls") or []:
                    call = self.tool_calls.setdefault(
                        int(part.get("index", 0)),
                        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    if part.get("id"):
                        call["id"] = part["id"]
                    function = part.get("function") or {}
                    if function.get("name"):
                        call["function"]["name"] += function["name"]
                        starts = starts or call["function"]["name"] in self.recovery
                    if function.get("arguments"):
                        call["function"]["arguments"] += function["arguments"]
        self.calls = [
            Call(c["id"], c["function"]["name"], c["function"]["arguments"])
            for _, c in sorted(self.tool_calls.items())
        ]
        return self._pass(event, starts)

    def items(self) -> list[Any]:
        message = {
            "role": "assistant",
            "content": "".join(self.content) or None,
            "tool_calls": [c for _, c in sorted(self.tool_calls.items())],
        }
        return _chat_items(message)[0]


class _AnthropicStream(Stream):
    """Messages events: a recovery call starts with ``content_block_start`` of a
    ``tool_use``. A continuation drops its ``message_start`` and numbers its blocks on from
    the blocks the client has seen."""

    def __init__(self, recovery: frozenset[str], splice: Optional[Stream] = None) -> None:
        super().__init__(recovery, splice)
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json: dict[int, str] = {}

    def feed(self, event: Event) -> list[bytes]:
        data = event.data if isinstance(event.data, dict) else {}
        kind = data.get("type")
        starts = False
        if kind == "content_block_start":
            block = dict(data.get("content_block") or {})
            self.blocks[int(data["index"])] = block
            starts = block.get("type") == "tool_use" and block.get("name") in self.recovery
            if not self.holding and not starts:
                self.forwarded_items += 1
        elif kind == "content_block_delta":
            self._delta(int(data["index"]), data.get("delta") or {})
        elif kind == "content_block_stop":
            index = int(data["index"])
            block = self.blocks.get(index, {})
            if block.get("type") == "tool_use":
                text = self.json.get(index, "")
                block["input"] = json.loads(text) if text else block.get("input") or {}
                self.calls.append(Call(str(block["id"]), str(block["name"]), block["input"]))
        if self.base is not None and not self.holding and not starts:
            if kind == "message_start":
                return []
            if "index" in data:
                offset = self.base.forwarded_items
                moved = {**data, "index": int(data["index"]) + offset}
                return [_encode_event(event.name, moved)]
        return self._pass(event, starts)

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "input_json_delta":
            self.json[index] = self.json.get(index, "") + delta.get("partial_json", "")

    def items(self) -> list[Any]:
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return _anthropic_items(content)[0]


class _ResponsesStream(Stream):
    """Responses events: a recovery call starts with ``response.output_item.added`` of a
    ``function_call``. A continuation drops its ``response.created`` and
    ``response.in_progress``, numbers ``output_index`` and ``sequence_number`` on, keeps the
    first response's id, and its ``response.completed`` lists the items the client has seen
    first."""

    def __init__(self, recovery: frozenset[str], splice: Optional[Stream] = None) -> None:
        super().__init__(recovery, splice)
        self.done: dict[int, dict[str, Any]] = {}
        self.seen: list[Any] = list(splice.seen) if isinstance(splice, _ResponsesStream) else []
        self.sequence: int = splice.sequence if isinstance(splice, _ResponsesStream) else 0
        self.response_id: Any = splice.response_id if isinstance(splice, _ResponsesStream) else None

    def feed(self, event: Event) -> list[bytes]:
        data = event.data if isinstance(event.data, dict) else {}
        kind = data.get("type")
        starts = False
        if kind == "response.output_item.added":
            item = data.get("item") or {}
            starts = item.get("type") == "function_call" and item.get("name") in self.recovery
        elif kind == "response.output_item.done":
            item = data.get("item") or {}
            self.done[int(data.get("output_index", len(self.done)))] = item
            if item.get("type") == "function_call":
                self.calls.append(
                    Call(str(item.get("call_id")), str(item.get("name")), item.get("arguments"))
                )
            elif not self.holding:
                self.seen.append(item)
        if starts or self.holding:
            return self._pass(event, starts)
        if kind == "response.output_item.added":
            self.forwarded_items += 1
        if self.base is None:
            self.sequence = int(data.get("sequence_number", self.sequence)) + 1
            if kind == "response.created":
                self.response_id = (data.get("response") or {}).get("id")
            return [event.raw]
        if kind in ("response.created", "response.in_progress"):
            return []
        moved = dict(data)
        base_items = self.base.forwarded_items
        if "output_index" in moved:
            moved["output_index"] = int(moved["output_index"]) + base_items
        if "sequence_number" in moved:
            moved["sequence_number"] = self.sequence
            self.sequence += 1
        if isinstance(moved.get("response"), dict):
            # one response for the client: the first one's id, every item it was sent
            response = dict(moved["response"])
            if self.response_id is not None:
                response["id"] = self.response_id
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                response["output"] = [*self.seen_before(), *(response.get("output") or [])]
            moved["response"] = response
        return [_encode_event(event.name, moved)]

    def seen_before(self) -> list[Any]:
        base = self.base
        return list(base.seen) if isinstance(base, _ResponsesStream) else []

    def items(self) -> list[Any]:
        return [self.done[i] for i in sorted(self.done)]


CHAT = Wire("openai-chat", "/chat/completions", "openai", "messages", None, OpenAIChatCodec)
RESPONSES = Wire(
    "openai-responses", "/responses", "openai", "input", "instructions", OpenAIResponsesCodec
)
ANTHROPIC = Wire(
    "anthropic-messages", "/messages", "anthropic", "messages", "system", AnthropicMessagesCodec
)
