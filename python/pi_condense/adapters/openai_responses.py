"""OpenAI Responses API input items <-> Pi messages (the item dicts the OpenAI Agents SDK
hands a ``call_model_input_filter``).

Decoding: a run of consecutive assistant-side items (``reasoning``, assistant ``message``,
``function_call``) is ONE Pi assistant message (one unit spanning them). As pi-ai's
``openai-responses`` provider stores them, a reasoning item is a thinking block whose
``thinkingSignature`` is the item's JSON, and a function call is a toolCall whose id is
``call_id|id`` (just ``call_id`` when the item has no id). An assistant message item is a text
block whose ``textSignature`` is the item's JSON with its one text part emptied (the whole
item when it holds several parts; none for a plain ``{"role", "content": str}`` message).
A ``function_call_output`` is a toolResult named after the latest call with its ``call_id``.
User messages keep string content; ``input_text`` parts and ``input_image`` parts with a data
URL and ``detail: "auto"`` become Pi blocks, other parts are kept as they are. System and
developer messages and every other item type are host-only.

Encoding rebuilds items from those signatures (fresh messages are plain ``{"role",
"content"}`` messages); thinking without a reasoning item signature is dropped, as pi-ai does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from ..errors import JsonError
from ..js import json as jsjson
from .base import Out, PiMessage, Unit
from .blocks import arguments_text, data_url, image_from_data_url, parse_arguments, text_of
from .prepare import Keep, assistant_message, prepare

__all__ = ["OpenAIResponsesCodec"]

_API = "openai-responses"
_PROVIDER = "openai"
_MESSAGE_ROLES = ("user", "assistant", "system", "developer")


def _kind(item: Any) -> str:
    """``user``, ``assistant`` (part of an assistant run), ``result`` or ``host``."""
    if not isinstance(item, dict):
        return "host"
    kind = item.get("type")
    if kind in (None, "message") and item.get("role") in _MESSAGE_ROLES:
        role = item["role"]
        return role if role in ("user", "assistant") else "host"
    if kind in ("reasoning", "function_call"):
        return "assistant"
    if kind == "function_call_output":
        return "result"
    return "host"


def _part_in(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "input_text" and part.keys() == {"type", "text"}:
        return {"type": "text", "text": part["text"]}
    if kind == "input_image" and part.keys() == {"type", "image_url", "detail"}:
        image = image_from_data_url(part["image_url"]) if part["detail"] == "auto" else None
        if image is not None:
            return image
    return part


def _parts_in(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [_part_in(p) for p in content] if isinstance(content, list) else []


def _thinking(item: dict[str, Any]) -> dict[str, Any]:
    summary = item.get("summary")
    texts = [
        str(s["text"])
        for s in (summary if isinstance(summary, list) else [])
        if isinstance(s, dict) and isinstance(s.get("text"), str)
    ]
    return {
        "type": "thinking",
        "thinking": "\n\n".join(texts),
        "thinkingSignature": jsjson.dumps(item),
    }


def _text(item: dict[str, Any]) -> dict[str, Any]:
    content = item.get("content")
    if isinstance(content, str):
        if item.keys() == {"role", "content"}:
            return {"type": "text", "text": content}
        return {"type": "text", "text": content, "textSignature": _signature(item, "")}
    parts = content if isinstance(content, list) else []
    only = parts[0] if len(parts) == 1 and isinstance(parts[0], dict) else None
    if only is not None and only.get("type") == "output_text" and isinstance(only.get("text"), str):
        template = {**item, "content": [{**only, "text": ""}]}
        return {"type": "text", "text": only["text"], "textSignature": jsjson.dumps(template)}
    texts = [str(p.get("text")) for p in parts if isinstance(p, dict) and "text" in p]
    return {"type": "text", "text": "".join(texts), "textSignature": jsjson.dumps(item)}


def _signature(item: dict[str, Any], content: Any) -> str:
    return jsjson.dumps({**item, "content": content})


def _call_id(block_id: Any) -> tuple[Any, Optional[str]]:
    """``call_id`` and item id of a Pi toolCall id (``call_id|id``)."""
    if isinstance(block_id, str) and "|" in block_id:
        call_id, item_id = block_id.split("|", 1)
        return call_id, item_id
    return block_id, None


class _Calls:
    """Pi toolCall id and name by ``call_id``: the latest call before an output."""

    def __init__(self, items: Sequence[Any], start: int) -> None:
        self._items = items
        self._start = start
        self._calls: dict[Any, tuple[Any, Any]] = {}

    @staticmethod
    def _pi_id(item: dict[str, Any]) -> Any:
        call_id, item_id = item.get("call_id"), item.get("id")
        return f"{call_id}|{item_id}" if isinstance(item_id, str) else call_id

    def add(self, item: dict[str, Any]) -> None:
        self._calls[item.get("call_id")] = (self._pi_id(item), item.get("name"))

    def get(self, call_id: Any) -> tuple[Any, Any]:
        if call_id in self._calls:
            return self._calls[call_id]
        for item in reversed(self._items[: self._start]):
            if _is_call(item) and item.get("call_id") == call_id:
                return self._pi_id(item), item.get("name")
        return call_id, ""


def _is_call(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call"


class OpenAIResponsesCodec:
    """Responses input items (dicts) <-> Pi messages (see the module doc)."""

    name = "openai-responses"

    def decode(self, items: Sequence[Any], start: int = 0) -> list[Unit]:
        """Units for ``items[start:]``: an assistant run is one unit."""
        calls = _Calls(items, start)
        units: list[Unit] = []
        index = start
        while index < len(items):
            item = items[index]
            kind = _kind(item)
            if kind == "assistant":
                stop = index
                blocks: list[Any] = []
                while stop < len(items) and _kind(items[stop]) == "assistant":
                    blocks.append(self._block(items[stop], calls))
                    stop += 1
                units.append(Unit(assistant_message(blocks, _API, _PROVIDER), index, stop))
                index = stop
                continue
            message: Optional[PiMessage] = None
            if kind == "user":
                content = item.get("content")
                if not isinstance(content, str):
                    content = [_part_in(p) for p in content] if isinstance(content, list) else ""
                message = {"role": "user", "content": content}
            elif kind == "result":
                pi_id, name = calls.get(item.get("call_id"))
                message = {
                    "role": "toolResult",
                    "toolCallId": pi_id,
                    "toolName": name,
                    "content": _parts_in(item.get("output")),
                    "isError": False,
                }
            units.append(Unit(message, index, index + 1))
            index += 1
        return units

    @staticmethod
    def _block(item: dict[str, Any], calls: _Calls) -> dict[str, Any]:
        if item.get("type") == "reasoning":
            return _thinking(item)
        if _is_call(item):
            calls.add(item)
            return {
                "type": "toolCall",
                "id": calls.get(item.get("call_id"))[0],
                "name": item.get("name"),
                "arguments": parse_arguments(item.get("arguments")),
            }
        return _text(item)

    def encode(self, outs: Sequence[Out]) -> list[Any]:
        """Input items for the render's output (see :class:`pi_condense.adapters.base.Codec`)."""
        result: list[Any] = []
        for segment in prepare(outs):
            if isinstance(segment, Keep):
                result.extend(segment.items)
                continue
            message = segment.message
            role = message.get("role")
            if role == "user":
                user = _user_out(message)
                if user is not None:
                    result.append(user)
            elif role == "assistant":
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    item = _assistant_item(block)
                    if item is not None:
                        result.append(item)
            else:
                result.append(_output(message))
        return result


def _part_out(block: Any) -> Any:
    text = text_of(block)
    if text is not None:
        return {"type": "input_text", "text": text}
    if isinstance(block, dict) and block.get("type") == "image":
        return {"type": "input_image", "detail": "auto", "image_url": data_url(block)}
    return block


def _user_out(message: PiMessage) -> Optional[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return {"role": "user", "content": content}
    parts = [_part_out(b) for b in content] if isinstance(content, list) else []
    return {"role": "user", "content": parts} if parts else None


def _parse(signature: Any) -> Optional[dict[str, Any]]:
    if not isinstance(signature, str):
        return None
    try:
        value = jsjson.loads(signature)
    except (JsonError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _assistant_item(block: Any) -> Optional[dict[str, Any]]:
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "thinking":
        item = _parse(block.get("thinkingSignature"))
        return item if item is not None and item.get("type") == "reasoning" else None
    if kind == "toolCall":
        call_id, item_id = _call_id(block.get("id"))
        call: dict[str, Any] = {"type": "function_call", "call_id": call_id}
        if item_id is not None:
            call["id"] = item_id
        call["name"] = block.get("name")
        call["arguments"] = arguments_text(block.get("arguments"))
        return call
    text = text_of(block)
    if text is None:
        return None
    return _message_item(text, _parse(block.get("textSignature")))


def _message_item(text: str, template: Optional[dict[str, Any]]) -> dict[str, Any]:
    if template is not None and template.get("role") == "assistant":
        content = template.get("content")
        if content == "":
            return {**template, "content": text}
        parts = content if isinstance(content, list) else []
        if len(parts) == 1 and isinstance(parts[0], dict) and parts[0].get("text") == "":
            return {**template, "content": [{**parts[0], "text": text}]}
        texts = [str(p.get("text")) for p in parts if isinstance(p, dict) and "text" in p]
        if parts and "".join(texts) == text:
            return template
    return {"role": "assistant", "content": text}


def _output(message: PiMessage) -> dict[str, Any]:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    text = "\n".join(t for t in (text_of(b) for b in blocks) if t is not None)
    output: Any = text
    if any(text_of(b) is None for b in blocks):
        parts = [{"type": "input_text", "text": text}] if text else []
        parts.extend(_part_out(b) for b in blocks if text_of(b) is None)
        output = parts
    call_id, _ = _call_id(message.get("toolCallId"))
    return {"type": "function_call_output", "call_id": call_id, "output": output}
