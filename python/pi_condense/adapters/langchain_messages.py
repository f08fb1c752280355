"""LangChain message objects (``langchain_core.messages``) <-> Pi messages.

Decoding, one Pi message per LangChain message:

- ``HumanMessage`` -> user: a string content stays a string; in a content list a string or a
  plain ``{"type": "text", "text"}`` block is a Pi text block, a base64 image (the standard
  ``{"type": "image", "base64", "mime_type"}`` block, the older ``source_type: "base64"``
  form, or an ``image_url`` part holding a data URL) is a Pi image, any other block is kept
  as it is;
- ``AIMessage`` -> assistant: text and ``thinking`` blocks (``signature`` as
  ``thinkingSignature``) become Pi blocks, other blocks are kept as they are, except the
  ``tool_use`` / ``tool_call`` blocks that repeat one of ``tool_calls``; every entry of
  ``tool_calls`` is a Pi ``toolCall`` (``args`` as ``arguments``);
- ``ToolMessage`` -> toolResult with its ``tool_call_id``, named by its ``name`` or else by the
  latest call with that id before it; ``status == "error"`` is ``isError``;
- ``SystemMessage`` and any other message type are the host's own (kept in place).

Message ids, metadata and usage are not part of the Pi message: a message the render did not
touch goes back as the caller's very object, with all of them. A message the render made is
converted afresh: a stub is a ``ToolMessage`` with the same ``tool_call_id`` and name, a
summary or compressed chain a ``HumanMessage``, a rewritten assistant an ``AIMessage`` with
the same tool calls. Pi's request preparation (:mod:`pi_condense.adapters.prepare`) runs first,
so every tool call of the request is answered and every result has its call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from .base import Out, PiMessage, Unit
from .blocks import image_from_data_url, text_of
from .prepare import Keep, assistant_message, prepare, tool_calls

__all__ = ["LangChainCodec"]

_API = "langchain"
_PROVIDER = "langchain"
_THINKING_KEYS = ({"type", "thinking"}, {"type", "thinking", "signature"})


def _image(block: dict[str, Any]) -> Optional[dict[str, Any]]:
    """A Pi image for a LangChain base64 image block, else None."""
    kind = block.get("type")
    if kind == "image":
        keys = block.keys()
        if keys == {"type", "base64", "mime_type"}:
            return {"type": "image", "data": block["base64"], "mimeType": block["mime_type"]}
        if keys == {"type", "source_type", "data", "mime_type"} and block["source_type"] == (
            "base64"
        ):
            return {"type": "image", "data": block["data"], "mimeType": block["mime_type"]}
    if kind == "image_url" and block.keys() == {"type", "image_url"}:
        url = block["image_url"]
        if isinstance(url, dict) and url.keys() == {"url"}:
            return image_from_data_url(url["url"])
        return image_from_data_url(url)
    return None


def _block_in(block: Any) -> Any:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, dict):
        return block
    if block.get("type") == "text" and block.keys() == {"type", "text"}:
        return {"type": "text", "text": block["text"]}
    image = _image(block)
    return image if image is not None else dict(block)


def _blocks_in(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [_block_in(b) for b in content]
    return []


def _user_in(message: HumanMessage) -> PiMessage:
    content = message.content
    return {
        "role": "user",
        "content": content if isinstance(content, str) else _blocks_in(content),
    }


def _assistant_blocks(raw: list[Any], call_ids: set[Any]) -> list[Any]:
    content: list[Any] = []
    for block in raw:
        if isinstance(block, str):
            if block:
                content.append({"type": "text", "text": block})
            continue
        if not isinstance(block, dict):
            content.append(block)
            continue
        kind = block.get("type")
        if kind in ("tool_use", "tool_call") and block.get("id") in call_ids:
            continue
        if kind == "thinking" and block.keys() in _THINKING_KEYS:
            pi = {"type": "thinking", "thinking": block["thinking"]}
            if "signature" in block:
                pi["thinkingSignature"] = block["signature"]
            content.append(pi)
            continue
        content.append(_block_in(block))
    return content


def _assistant_in(message: AIMessage) -> PiMessage:
    calls = message.tool_calls
    raw = message.content
    content: list[Any]
    if isinstance(raw, str):  # the common case: no blocks to sort out
        content = [{"type": "text", "text": raw}] if raw else []
    else:
        content = _assistant_blocks(raw, {c.get("id") for c in calls})
    for call in calls:
        content.append(
            {
                "type": "toolCall",
                "id": call.get("id"),
                "name": call.get("name"),
                "arguments": dict(call.get("args") or {}),
            }
        )
    return assistant_message(content, _API, _PROVIDER)


def _tool_in(message: ToolMessage, name: Any) -> PiMessage:
    return {
        "role": "toolResult",
        "toolCallId": message.tool_call_id,
        "toolName": name if isinstance(name, str) else "",
        "content": _blocks_in(message.content),
        "isError": message.status == "error",
    }


class _Names:
    """Tool names by call id: the latest call seen walking forward, the prefix on demand."""

    def __init__(self, items: Sequence[Any], start: int) -> None:
        self._items = items
        self._start = start
        self._names: dict[Any, Any] = {}

    def add(self, message: AIMessage) -> None:
        for call in message.tool_calls:
            self._names[call.get("id")] = call.get("name")

    def get(self, call_id: Any) -> Any:
        if call_id in self._names:
            return self._names[call_id]
        for item in reversed(self._items[: self._start]):
            if isinstance(item, AIMessage):
                for call in item.tool_calls:
                    if call.get("id") == call_id:
                        return call.get("name")
        return None


class LangChainCodec:
    """``langchain_core`` messages <-> Pi messages (see the module doc)."""

    name = "langchain"

    def decode(self, items: Sequence[Any], start: int = 0) -> list[Unit]:
        """One unit per message (see :class:`pi_condense.adapters.base.Codec`)."""
        names = _Names(items, start)
        units: list[Unit] = []
        for index in range(start, len(items)):
            item = items[index]
            message: Optional[PiMessage] = None
            if isinstance(item, HumanMessage):
                message = _user_in(item)
            elif isinstance(item, AIMessage):
                names.add(item)
                message = _assistant_in(item)
            elif isinstance(item, ToolMessage):
                name = item.name if item.name else names.get(item.tool_call_id)
                message = _tool_in(item, name)
            units.append(Unit(message, index, index + 1))
        return units

    def encode(self, outs: Sequence[Out]) -> list[Any]:
        """LangChain messages for the render's output (see
        :class:`pi_condense.adapters.base.Codec`)."""
        result: list[Any] = []
        for segment in prepare(outs):
            if isinstance(segment, Keep):
                result.extend(segment.items)
                continue
            message = segment.message
            role = message.get("role")
            converted: Optional[BaseMessage]
            if role == "user":
                converted = _user_out(message)
            elif role == "assistant":
                converted = _assistant_out(message)
            else:
                converted = _tool_out(message)
            if converted is not None:
                result.append(converted)
        return result


def _block_out(block: Any) -> Any:
    text = text_of(block)
    if text is not None:
        return {"type": "text", "text": text}
    if isinstance(block, dict) and block.get("type") == "image" and "mimeType" in block:
        return {"type": "image", "base64": block.get("data"), "mime_type": block.get("mimeType")}
    if isinstance(block, dict) and block.get("type") == "thinking":
        out = {"type": "thinking", "thinking": block.get("thinking")}
        if block.get("thinkingSignature") is not None:
            out["signature"] = block["thinkingSignature"]
        return out
    return block


def _content_out(blocks: list[Any]) -> Any:
    """One text block (or none) as a string, else the converted blocks."""
    converted = [_block_out(b) for b in blocks]
    if not converted:
        return ""
    if len(converted) == 1 and text_of(converted[0]) is not None:
        return converted[0]["text"]
    return converted


def _user_out(message: PiMessage) -> Optional[HumanMessage]:
    content = message.get("content")
    if isinstance(content, str):
        return HumanMessage(content=content)
    blocks = content if isinstance(content, list) else []
    if not blocks:
        return None
    return HumanMessage(content=_content_out(blocks))


def _assistant_out(message: PiMessage) -> Optional[AIMessage]:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    body = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "toolCall")]
    texts = [text_of(b) for b in body]
    text: Any
    if all(t is not None for t in texts):
        text = "".join(t for t in texts if t is not None)
    else:
        text = [_block_out(b) for b in body]
    calls = [
        {
            "type": "tool_call",
            "id": c.get("id"),
            "name": c.get("name") or "",
            "args": _args(c.get("arguments")),
        }
        for c in tool_calls(message)
    ]
    if not calls and not text:
        return None
    return AIMessage(content=text, tool_calls=calls)


def _args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    if arguments is None:
        return {}
    return {"input": arguments}


def _tool_out(message: PiMessage) -> ToolMessage:
    content = message.get("content")
    body = (
        content
        if isinstance(content, str)
        else _content_out(content if isinstance(content, list) else [])
    )
    name = message.get("toolName")
    return ToolMessage(
        content=body,
        tool_call_id=str(message.get("toolCallId")),
        name=name if isinstance(name, str) and name else None,
        status="error" if message.get("isError") else "success",
    )
