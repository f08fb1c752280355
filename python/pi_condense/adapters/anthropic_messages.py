"""Anthropic Messages API ``messages`` <-> Pi messages (the system prompt is not an item).

Decoding: a ``user`` message with ``tool_result`` blocks is several Pi messages (a unit whose
message is a list): one toolResult per block, named after the ``tool_use`` with that id (the
latest before it), then a user message for its other blocks, if any. Text and base64 image
blocks become Pi blocks, any other block is kept as it is. An ``assistant`` message maps
``text``, ``thinking`` (its ``signature`` as ``thinkingSignature``), ``redacted_thinking``
(Pi's redacted thinking block carrying ``data``) and ``tool_use`` (``input`` as
``arguments``) to Pi blocks.

Encoding follows pi-ai's ``anthropic-messages`` conversion (consecutive tool results in one
user message, whitespace-only text skipped, thinking without a signature sent as text), then
merges adjacent messages of the same role into one, so that roles alternate and every tool
result sits in the user message right after its call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Union

from .base import Out, PiMessage, Unit
from .blocks import accepted_tool_content, text_of
from .prepare import Keep, assistant_message, prepare

__all__ = ["AnthropicMessagesCodec"]

REDACTED_THINKING_TEXT = "[Reasoning redacted]"
IMAGE_ONLY_TOOL_TEXT = "(see attached image)"
_BASE64_KEYS = {"type", "media_type", "data"}
_TEXT_KEYS = {"type", "text", "cache_control", "citations"}
_API = "anthropic-messages"
_PROVIDER = "anthropic"


def _block_in(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str) and block.keys() <= _TEXT_KEYS:
        return {"type": "text", **{k: v for k, v in block.items() if k != "type"}}
    if kind == "image" and block.keys() == {"type", "source"}:
        image = _base64_image(block["source"])
        if image is not None:
            return image
    return block


def _base64_image(source: Any) -> Optional[dict[str, Any]]:
    if not isinstance(source, dict) or source.keys() != _BASE64_KEYS:
        return None
    if source["type"] != "base64":
        return None
    return {"type": "image", "data": source["data"], "mimeType": source["media_type"]}


def _assistant_block_in(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "thinking" and block.keys() == {"type", "thinking", "signature"}:
        return {
            "type": "thinking",
            "thinking": block["thinking"],
            "thinkingSignature": block["signature"],
        }
    if kind == "redacted_thinking" and block.keys() == {"type", "data"}:
        return {
            "type": "thinking",
            "thinking": REDACTED_THINKING_TEXT,
            "thinkingSignature": block["data"],
            "redacted": True,
        }
    if kind == "tool_use" and block.keys() >= {"id", "name", "input"}:
        # extra keys (cache_control) stay in the caller's untouched message only
        return {
            "type": "toolCall",
            "id": block["id"],
            "name": block["name"],
            "arguments": block["input"],
        }
    return _block_in(block)


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


class _Names:
    """Tool names by ``tool_use`` id: the latest seen walking forward, the prefix on demand."""

    def __init__(self, items: Sequence[Any], start: int) -> None:
        self._items = items
        self._start = start
        self._names: dict[Any, Any] = {}

    @staticmethod
    def _uses(item: Any) -> list[dict[str, Any]]:
        if not isinstance(item, dict) or item.get("role") != "assistant":
            return []
        return [
            b
            for b in _blocks(item.get("content"))
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]

    def add(self, item: Any) -> None:
        for use in self._uses(item):
            self._names[use.get("id")] = use.get("name")

    def get(self, call_id: Any) -> Any:
        if call_id in self._names:
            return self._names[call_id]
        for item in reversed(self._items[: self._start]):
            for use in self._uses(item):
                if use.get("id") == call_id:
                    return use.get("name")
        return ""


def _user_in(item: dict[str, Any], index: int, names: _Names) -> Union[PiMessage, list[PiMessage]]:
    content = item.get("content")
    if not isinstance(content, list):
        return {"role": "user", "content": content if isinstance(content, str) else ""}
    messages: list[PiMessage] = []
    others: list[Any] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            result = accepted_tool_content(
                block.get("content"), index, call_id, "Messages API", "content blocks"
            )
            messages.append(
                {
                    "role": "toolResult",
                    "toolCallId": block.get("tool_use_id"),
                    "toolName": names.get(block.get("tool_use_id")),
                    "content": [_block_in(b) for b in _blocks(result)],
                    "isError": block.get("is_error") is True,
                }
            )
        else:
            others.append(_block_in(block))
    if others or not messages:
        messages.append({"role": "user", "content": others})
    return messages[0] if len(messages) == 1 else messages


class AnthropicMessagesCodec:
    """Anthropic ``messages`` (dicts) <-> Pi messages (see the module doc).

    ``merge_same_role`` (default True) merges adjacent messages of one role into one, which
    every gateway accepts; a merged message is a new object, so an untouched message next to
    a new one (a prompt followed by a compressed chain or a summary) loses its identity.
    False keeps them apart (the Messages API itself joins consecutive same-role turns).
    """

    name = "anthropic-messages"

    def __init__(self, merge_same_role: bool = True) -> None:
        self.merge_same_role = merge_same_role

    def decode(self, items: Sequence[Any], start: int = 0) -> list[Unit]:
        """One unit per message; a user message with tool results is a list unit."""
        names = _Names(items, start)
        units: list[Unit] = []
        for index in range(start, len(items)):
            item = items[index]
            message: Union[PiMessage, list[PiMessage], None] = None
            role = item.get("role") if isinstance(item, dict) else None
            if role == "user":
                message = _user_in(item, index, names)
            elif role == "assistant":
                names.add(item)
                blocks = [_assistant_block_in(b) for b in _blocks(item.get("content"))]
                message = assistant_message(blocks, _API, _PROVIDER)
            units.append(Unit(message, index, index + 1))
        return units

    def encode(self, outs: Sequence[Out]) -> list[Any]:
        """Anthropic messages for the render's output, adjacent same roles merged."""
        staged: list[tuple[str, Any]] = []
        results: list[dict[str, Any]] = []
        for segment in prepare(outs):
            message = None if isinstance(segment, Keep) else segment.message
            if results and (message is None or message.get("role") != "toolResult"):
                staged.append(("user", {"role": "user", "content": results}))
                results = []
            if isinstance(segment, Keep):
                staged.extend((_role(item), item) for item in segment.items)
            elif message is not None and message.get("role") == "toolResult":
                results.append(_tool_result(message))
            elif message is not None:
                converted = _message_out(message)
                if converted is not None:
                    staged.append((converted["role"], converted))
        if results:
            staged.append(("user", {"role": "user", "content": results}))
        if not self.merge_same_role:
            return [item for _, item in staged]
        return _merge(staged)


def _role(item: Any) -> str:
    role = item.get("role") if isinstance(item, dict) else None
    return role if isinstance(role, str) else ""


def _merge(staged: list[tuple[str, Any]]) -> list[Any]:
    merged: list[Any] = []
    last_role: Optional[str] = None
    for role, item in staged:
        if merged and role == last_role and role in ("user", "assistant"):
            previous = merged[-1]
            content = _blocks(previous.get("content")) + _blocks(item.get("content"))
            merged[-1] = {"role": role, "content": content}
        else:
            merged.append(item)
        last_role = role
    return merged


def _block_out(block: Any) -> Any:
    text = text_of(block)
    if text is not None:
        return {k: v for k, v in block.items() if k in _TEXT_KEYS}
    if isinstance(block, dict) and block.get("type") == "image":
        source = {"type": "base64", "media_type": block.get("mimeType"), "data": block.get("data")}
        return {"type": "image", "source": source}
    return block


def _keep_block(block: Any) -> bool:
    text = text_of(block)
    return text is None or bool(text.strip())


def _message_out(message: PiMessage) -> Optional[dict[str, Any]]:
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        if isinstance(content, str):
            return {"role": "user", "content": content} if content.strip() else None
        blocks = (
            [_block_out(b) for b in content if _keep_block(b)] if isinstance(content, list) else []
        )
        return {"role": "user", "content": blocks} if blocks else None
    blocks = []
    for block in content if isinstance(content, list) else []:
        converted = _assistant_block_out(block)
        if converted is not None:
            blocks.append(converted)
    return {"role": "assistant", "content": blocks} if blocks else None


def _assistant_block_out(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "thinking":
        signature = block.get("thinkingSignature")
        if block.get("redacted"):
            return {"type": "redacted_thinking", "data": signature}
        thinking = block.get("thinking")
        if not isinstance(thinking, str) or not thinking.strip():
            return None
        if not isinstance(signature, str) or not signature.strip():
            return {"type": "text", "text": thinking}
        return {"type": "thinking", "thinking": thinking, "signature": signature}
    if kind == "toolCall":
        arguments = block.get("arguments")
        return {
            "type": "tool_use",
            "id": block.get("id"),
            "name": block.get("name"),
            "input": arguments if isinstance(arguments, dict) else {},
        }
    return _block_out(block) if _keep_block(block) else None


def _tool_result(message: PiMessage) -> dict[str, Any]:
    content = message.get("content")
    blocks = content if isinstance(content, list) else _blocks(content)
    value: Any
    if any(isinstance(b, dict) and b.get("type") != "text" for b in blocks):
        value = [_block_out(b) for b in blocks]
        if not any(text_of(b) is not None for b in blocks):
            value.insert(0, {"type": "text", "text": IMAGE_ONLY_TOOL_TEXT})
    else:
        value = "\n".join(t for t in (text_of(b) for b in blocks) if t is not None)
    return {
        "type": "tool_result",
        "tool_use_id": message.get("toolCallId"),
        "content": value,
        "is_error": message.get("isError") is True,
    }
