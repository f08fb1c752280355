"""OpenAI Chat Completions messages <-> Pi messages.

Decoding: ``system``/``developer`` messages (and legacy ``function`` messages, and assistant
messages using the legacy ``function_call``) are host-only; a ``user`` message keeps a string
content as it is and maps content parts to Pi blocks (``text``; an ``image_url`` with a plain
data URL becomes a Pi image, any other part is kept as it is); an ``assistant`` message gives
a thinking block for a ``reasoning_content``/``reasoning``/``reasoning_text`` field (its
field name as ``thinkingSignature``, as pi-ai's provider stores it), text blocks, and a
toolCall per function tool call; a ``tool`` message gives a toolResult named after the call
with its ``tool_call_id`` (the latest such call before it).

Encoding follows pi-ai's ``openai-completions`` conversion: assistant text as one string,
thinking sent back only under the field it came from, arguments as ``JSON.stringify`` text,
a tool result's images sent in a user message after the run of tool messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from .base import Out, PiMessage, Unit
from .blocks import (
    accepted_tool_content,
    arguments_text,
    data_url,
    image_from_data_url,
    parse_arguments,
    text_of,
)
from .prepare import Keep, New, assistant_message, prepare, tool_calls

__all__ = ["OpenAIChatCodec"]

REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
IMAGES_FROM_TOOL_TEXT = "Attached image(s) from tool result:"
IMAGE_ONLY_TOOL_TEXT = "(see attached image)"
_API = "openai-completions"
_PROVIDER = "openai"


def _user_part(part: Any) -> Any:
    if isinstance(part, dict):
        if part.get("type") == "text" and part.keys() == {"type", "text"}:
            return {"type": "text", "text": part["text"]}
        image = part.get("image_url")
        plain = part.get("type") == "image_url" and part.keys() == {"type", "image_url"}
        if plain and isinstance(image, dict) and image.keys() == {"url"}:
            block = image_from_data_url(image["url"])
            if block is not None:
                return block
    return part


def _content_blocks(content: Any) -> Any:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [_user_part(p) for p in content]
    return ""


def _tool_content(content: Any, index: int, call_id: Any) -> list[Any]:
    content = accepted_tool_content(
        content, index, call_id, "Chat Completions API", "content parts"
    )
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [_user_part(p) for p in content]
    return []


def _function(call: Any) -> dict[str, Any]:
    """A tool call's ``function`` (or a custom tool's ``custom``: name and raw ``input``)."""
    if not isinstance(call, dict):
        return {}
    function = call.get("function", call.get("custom"))
    return function if isinstance(function, dict) else {}


def _assistant(item: dict[str, Any]) -> PiMessage:
    content: list[Any] = []
    for field in REASONING_FIELDS:
        reasoning = item.get(field)
        if isinstance(reasoning, str) and reasoning:
            content.append({"type": "thinking", "thinking": reasoning, "thinkingSignature": field})
            break
    text = item.get("content")
    if isinstance(text, str):
        if text:
            content.append({"type": "text", "text": text})
    elif isinstance(text, list):
        content.extend(_user_part(p) for p in text)
    for call in item.get("tool_calls") or ():
        function = _function(call)
        content.append(
            {
                "type": "toolCall",
                "id": call.get("id") if isinstance(call, dict) else None,
                "name": function.get("name"),
                "arguments": parse_arguments(function.get("arguments", function.get("input"))),
            }
        )
    return assistant_message(content, _API, _PROVIDER)


class _Names:
    """Tool names by call id: the latest call seen walking forward, the prefix on demand."""

    def __init__(self, items: Sequence[Any], start: int) -> None:
        self._items = items
        self._start = start
        self._names: dict[Any, Any] = {}

    def add(self, item: dict[str, Any]) -> None:
        for call in item.get("tool_calls") or ():
            if isinstance(call, dict):
                self._names[call.get("id")] = _function(call).get("name")

    def get(self, call_id: Any) -> Any:
        if call_id in self._names:
            return self._names[call_id]
        for item in reversed(self._items[: self._start]):
            if isinstance(item, dict) and item.get("role") == "assistant":
                for call in item.get("tool_calls") or ():
                    if isinstance(call, dict) and call.get("id") == call_id:
                        return _function(call).get("name")
        return None


class OpenAIChatCodec:
    """OpenAI Chat Completions ``messages`` (dicts) <-> Pi messages (see the module doc)."""

    name = "openai-chat"

    def decode(self, items: Sequence[Any], start: int = 0) -> list[Unit]:
        """One unit per message (see :class:`pi_condense.adapters.base.Codec`)."""
        names = _Names(items, start)
        units: list[Unit] = []
        for index in range(start, len(items)):
            units.append(Unit(self._decode_one(items[index], index, names), index, index + 1))
        return units

    @staticmethod
    def _decode_one(item: Any, index: int, names: _Names) -> Optional[PiMessage]:
        if not isinstance(item, dict):
            return None
        role = item.get("role")
        if role == "user":
            return {"role": "user", "content": _content_blocks(item.get("content"))}
        if role == "assistant" and item.get("function_call") is None:
            names.add(item)
            return _assistant(item)
        if role == "tool":
            call_id = item.get("tool_call_id")
            name = names.get(call_id)
            if name is None:
                name = item.get("name") if isinstance(item.get("name"), str) else ""
            return {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": _tool_content(item.get("content"), index, call_id),
                "isError": False,
            }
        return None

    def encode(self, outs: Sequence[Out]) -> list[Any]:
        """Chat messages for the render's output (see :class:`pi_condense.adapters.base.Codec`)."""
        result: list[Any] = []
        images: list[dict[str, Any]] = []
        for segment in prepare(outs):
            is_tool = (
                isinstance(segment, New) and segment.message.get("role") == "toolResult"
            ) or (
                isinstance(segment, Keep)
                and bool(segment.messages)
                and all(m.get("role") == "toolResult" for m in segment.messages)
            )
            if images and not is_tool:
                result.append(_images_message(images))
                images = []
            if isinstance(segment, Keep):
                result.extend(segment.items)
                continue
            message = segment.message
            role = message.get("role")
            if role == "user":
                user = _user(message)
                if user is not None:
                    result.append(user)
            elif role == "assistant":
                assistant = _assistant_out(message)
                if assistant is not None:
                    result.append(assistant)
            else:
                result.append(_tool(message, images))
        if images:
            result.append(_images_message(images))
        return result


def _part(block: Any) -> Any:
    text = text_of(block)
    if text is not None:
        return {"type": "text", "text": text}
    if isinstance(block, dict) and block.get("type") == "image":
        return {"type": "image_url", "image_url": {"url": data_url(block)}}
    return block


def _user(message: PiMessage) -> Optional[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return {"role": "user", "content": content}
    parts = [_part(b) for b in content] if isinstance(content, list) else []
    if not parts:
        return None
    return {"role": "user", "content": parts}


def _assistant_out(message: PiMessage) -> Optional[dict[str, Any]]:
    blocks = message.get("content")
    blocks = blocks if isinstance(blocks, list) else []
    out: dict[str, Any] = {"role": "assistant", "content": None}
    thinking = [
        b
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "thinking" and str(b.get("thinking")).strip()
    ]
    field = thinking[0].get("thinkingSignature") if thinking else None
    parts: list[Any] = []
    opaque = False
    for block in blocks:
        text = text_of(block)
        if text is not None:
            if text.strip():
                parts.append({"type": "text", "text": text})
        elif isinstance(block, dict) and block.get("type") in ("thinking", "toolCall"):
            continue
        else:
            opaque = True
            parts.append(block)
    if opaque:
        out["content"] = parts
    elif parts:
        out["content"] = "".join(p["text"] for p in parts)
    if field in REASONING_FIELDS:
        out[str(field)] = "\n".join(str(b.get("thinking")) for b in thinking)
    calls = tool_calls(message)
    if calls:
        out["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {
                    "name": c.get("name"),
                    "arguments": arguments_text(c.get("arguments")),
                },
            }
            for c in calls
        ]
    elif out["content"] is None:
        return None
    return out


def _tool(message: PiMessage, images: list[dict[str, Any]]) -> dict[str, Any]:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    text = "\n".join(t for t in (text_of(b) for b in blocks) if t is not None)
    found = [b for b in blocks if isinstance(b, dict) and b.get("type") == "image"]
    images.extend({"type": "image_url", "image_url": {"url": data_url(b)}} for b in found)
    if isinstance(content, str):
        text = content
    return {
        "role": "tool",
        "tool_call_id": message.get("toolCallId"),
        "content": IMAGE_ONLY_TOOL_TEXT if found and not text else text,
    }


def _images_message(images: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": IMAGES_FROM_TOOL_TEXT}, *images]}
