"""pydantic-ai message objects (``ModelRequest`` / ``ModelResponse``) <-> Pi messages.

One ``ModelRequest`` holds several parts that Pi keeps apart (a system prompt, a user prompt,
several tool returns), so the codec works on *host items* one level down:
:func:`expand` turns a pydantic-ai history into one :class:`RequestPart` per request part and
the ``ModelResponse`` objects as they are, and :func:`assemble` turns the codec's output back
into messages. A request whose parts all come back, in order and alone, is returned as the very
same object; one the render changed is rebuilt (``dataclasses.replace``) with its own metadata
and its surviving and new parts; new parts with no request of their own make a new one.

Decoding: a ``UserPromptPart`` is a Pi user message; a ``ToolReturnPart`` a toolResult
(``isError`` when its outcome is ``failed``/``retried``/...), its text as pydantic-ai sends it
(``model_response_str``); a legacy ``RetryPromptPart`` with a tool name an errored toolResult,
without one (and a ``RetryFeedbackPart``) a user message with the text the model is shown; every
other request part (system prompts, instruction and settings bookkeeping, tool-search and
capability-load returns) is host-only and stays where it was. A ``ModelResponse`` is one Pi
assistant message: text, thinking (its ``signature`` as ``thinkingSignature``) and one toolCall per
``ToolCallPart`` (``args`` as a dict, JSON text parsed); its other parts (native tools, files,
compaction) are kept only while the response is untouched.

Encoding: a stub is a ``ToolReturnPart`` with the stub text and the same call id and tool name,
an errored result a ``ToolReturnPart`` with outcome ``failed``, a summary or compressed chain a
``UserPromptPart``; a changed assistant a new ``ModelResponse``. New parts take the Pi message's
timestamp, so the same render gives the same objects' contents on every call, and the tool
returns the codec makes carry :data:`MARK` as their ``metadata`` (see :func:`is_rendered`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Optional, Union

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryFeedbackPart,
    RetryPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from .base import Out, PiMessage, Unit
from .blocks import parse_arguments, text_blocks
from .prepare import Keep, New, assistant_message, prepare

__all__ = [
    "MARK",
    "HostItem",
    "PydanticAICodec",
    "RequestPart",
    "assemble",
    "expand",
    "is_rendered",
]

_API = "pydantic-ai"

MARK = {"pi_condense": "rendered"}
"""The ``metadata`` of the tool returns the codec makes (stubs, results it fills in): kept by
pydantic-ai's serializer, so a saved history shows where it holds condensed output."""


class RequestPart:
    """One part of a ``ModelRequest`` as a host item (``owner`` None: a part the codec made).

    Two are equal when their parts are (the very same object, else equal), whatever request
    holds them, so a history that holds the codec's own output again compares equal to it.
    """

    __slots__ = ("owner", "part")

    def __init__(self, part: ModelRequestPart, owner: Optional[ModelRequest]) -> None:
        self.part = part
        self.owner = owner

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestPart):
            return NotImplemented
        return self.part is other.part or bool(self.part == other.part)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RequestPart({self.part!r})"


HostItem = Union[RequestPart, ModelResponse]
"""What :class:`PydanticAICodec` decodes: a request's part, or a whole response."""


class _EmptyRequest:
    """Stands for a request without parts (kept in place, host-only)."""

    part_kind = "empty"


_EMPTY: Any = _EmptyRequest()


def expand(
    messages: Sequence[ModelMessage], reuse: Optional[dict[int, RequestPart]] = None
) -> list[HostItem]:
    """The host items of a pydantic-ai history (see the module docstring).

    ``reuse`` maps ``id(part)`` to the items of an earlier call: a part still held by the same
    request gets the very same item again (the driver then sees an identical prefix); it is
    refilled with this call's items.
    """
    old = reuse if reuse is not None else {}
    new: dict[int, RequestPart] = {}
    items: list[HostItem] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            items.append(message)
            continue
        parts: Sequence[Any] = message.parts or [_EMPTY]
        for part in parts:
            key = id(part) if part is not _EMPTY else id(message)
            item = old.get(key)
            if item is None or item.owner is not message or (item.part is not part):
                item = RequestPart(part, message)
            new[key] = item
            items.append(item)
    if reuse is not None:
        reuse.clear()
        reuse.update(new)
    return items


class _Group:
    def __init__(self, owner: Optional[ModelRequest], part: ModelRequestPart) -> None:
        self.owner = owner
        self.parts = [part]
        self.touched = owner is None

    def intact(self) -> bool:
        owner = self.owner
        if owner is None or self.touched:
            return False
        if not owner.parts:
            return len(self.parts) == 1 and isinstance(self.parts[0], _EmptyRequest)
        return len(self.parts) == len(owner.parts) and all(
            a is b for a, b in zip(self.parts, owner.parts, strict=True)
        )


def _requests(run: list[RequestPart]) -> list[ModelMessage]:
    """The requests for a run of parts between two responses."""
    groups: list[_Group] = []
    for item in run:
        last = groups[-1] if groups else None
        if last is not None and last.owner is item.owner:
            last.parts.append(item.part)
        else:
            groups.append(_Group(item.owner, item.part))
    # new parts join a neighbouring request that changed anyway
    merged: list[_Group] = []
    for group in groups:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and group.owner is None
            and prev.owner is not None
            and not prev.intact()
        ):
            prev.parts.extend(group.parts)
            prev.touched = True
        elif (
            prev is not None
            and prev.owner is None
            and group.owner is not None
            and not group.intact()
        ):
            group.parts[:0] = prev.parts
            group.touched = True
            merged[-1] = group
        elif prev is not None and prev.owner is group.owner and group.owner is not None:
            prev.parts.extend(group.parts)
            prev.touched = True
        else:
            merged.append(group)
    out: list[ModelMessage] = []
    for group in merged:
        parts = [p for p in group.parts if not isinstance(p, _EmptyRequest)]
        if group.intact():
            out.append(group.owner)  # type: ignore[arg-type]
        elif group.owner is not None:
            out.append(dataclasses.replace(group.owner, parts=parts))
        elif parts:
            stamp = getattr(parts[0], "timestamp", None)
            out.append(ModelRequest(parts=parts, timestamp=stamp))
    return out


def assemble(items: Sequence[HostItem]) -> list[ModelMessage]:
    """The pydantic-ai history for host items (the codec's output, or :func:`expand`'s)."""
    out: list[ModelMessage] = []
    run: list[RequestPart] = []
    for item in items:
        if isinstance(item, RequestPart):
            run.append(item)
            continue
        if run:
            out.extend(_requests(run))
            run = []
        out.append(item)
    if run:
        out.extend(_requests(run))
    return out


# ---------------------------------------------------------------------------- decode


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    blocks: list[Any] = []
    for item in content:
        if isinstance(item, str):
            blocks.append({"type": "text", "text": item})
        elif isinstance(item, BinaryContent) and item.is_image:
            data = base64.b64encode(item.data).decode("ascii")
            blocks.append({"type": "image", "data": data, "mimeType": item.media_type})
        else:
            kind = getattr(item, "kind", type(item).__name__)
            where = getattr(item, "url", None) or getattr(item, "file_id", None) or ""
            blocks.append({"type": "text", "text": f"[{kind} {where}]".replace(" ]", "]")})
    return blocks


def _tool_result(call_id: str, name: str, text: str, is_error: bool) -> PiMessage:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
    }


def _request_message(part: Any) -> Optional[PiMessage]:
    kind = type(part)
    if kind is UserPromptPart:
        return {"role": "user", "content": _user_content(part.content)}
    if kind is ToolReturnPart:
        text = part.model_response_str()
        return _tool_result(part.tool_call_id, part.tool_name, text, part.outcome != "success")
    if kind is RetryPromptPart:
        if part.tool_name is not None:
            return _tool_result(part.tool_call_id, part.tool_name, part.model_response(), True)
        return {"role": "user", "content": [{"type": "text", "text": part.model_response()}]}
    if kind is RetryFeedbackPart:
        return {"role": "user", "content": [{"type": "text", "text": part.model_response()}]}
    return None


def _response_message(response: ModelResponse) -> PiMessage:
    content: list[Any] = []
    parts: Sequence[Any] = response.parts  # matched on exact types: no subclasses
    for part in parts:
        kind = type(part)
        if kind is TextPart:
            content.append({"type": "text", "text": part.content})
        elif kind is ThinkingPart:
            block: dict[str, Any] = {"type": "thinking", "thinking": part.content}
            if part.signature is not None:
                block["thinkingSignature"] = part.signature
            content.append(block)
        elif kind is ToolCallPart:
            args = part.args
            arguments = {} if args is None else parse_arguments(args)
            content.append(
                {
                    "type": "toolCall",
                    "id": part.tool_call_id,
                    "name": part.tool_name,
                    "arguments": arguments,
                }
            )
    message = assistant_message(content, _API, response.provider_name or _API)
    message["model"] = response.model_name or ""
    return message


# ---------------------------------------------------------------------------- encode


def _datetime(message: PiMessage) -> datetime:
    ts = message.get("timestamp")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return datetime.fromtimestamp(ts / 1000, tz=UTC)
    return datetime.fromtimestamp(0, tz=UTC)


def _binary(block: Any) -> Optional[BinaryContent]:
    if not (isinstance(block, dict) and block.get("type") == "image"):
        return None
    try:
        data = base64.b64decode(str(block.get("data")), validate=True)
    except (binascii.Error, ValueError):
        return None
    return BinaryContent(data=data, media_type=str(block.get("mimeType")))


def _user_part(message: PiMessage) -> UserPromptPart:
    content = message.get("content")
    when = _datetime(message)
    if isinstance(content, str):
        return UserPromptPart(content, timestamp=when)
    items: list[Any] = []
    for block in content if isinstance(content, list) else []:
        image = _binary(block)
        if image is not None:
            items.append(image)
        else:
            items.extend(text_blocks([block]))
    if len(items) == 1 and isinstance(items[0], str):
        return UserPromptPart(items[0], timestamp=when)
    return UserPromptPart(items, timestamp=when)


def _tool_part(message: PiMessage) -> ToolReturnPart:
    content = message.get("content")
    text = "\n".join(text_blocks(content))
    images = [b for b in (_binary(x) for x in content or []) if b is not None]
    value: Any = [text, *images] if images else text
    return ToolReturnPart(
        tool_name=str(message.get("toolName") or ""),
        content=value,
        tool_call_id=str(message.get("toolCallId")),
        timestamp=_datetime(message),
        outcome="failed" if message.get("isError") else "success",
        metadata=dict(MARK),
    )


def _response(message: PiMessage) -> ModelResponse:
    parts: list[ModelResponsePart] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(str(block.get("text", ""))))
        elif kind == "thinking":
            signature = block.get("thinkingSignature")
            parts.append(
                ThinkingPart(
                    str(block.get("thinking", "")),
                    signature=signature if isinstance(signature, str) else None,
                )
            )
        elif kind == "toolCall":
            args = block.get("arguments")
            parts.append(
                ToolCallPart(
                    str(block.get("name")),
                    args if isinstance(args, (dict, str)) else None,
                    tool_call_id=str(block.get("id")),
                )
            )
    model = message.get("model")
    provider = message.get("provider")
    return ModelResponse(
        parts=parts,
        model_name=model if isinstance(model, str) and model else None,
        timestamp=_datetime(message),
        # the provider a response came from is part of what it decodes to: without it a
        # restarted process could not tell its own earlier output (ProcessHistory) again
        provider_name=provider if isinstance(provider, str) and provider != _API else None,
    )


def is_rendered(messages: Sequence[ModelMessage]) -> bool:
    """Whether a history holds tool returns the codec made (condensed output written back)."""
    return any(
        isinstance(message, ModelRequest)
        and any(getattr(part, "metadata", None) == MARK for part in message.parts)
        for message in messages
    )


class PydanticAICodec:
    """pydantic-ai host items (:func:`expand`) <-> Pi messages (see the module docstring)."""

    name = "pydantic-ai"

    def decode(self, items: Sequence[HostItem], start: int = 0) -> list[Unit]:
        """One unit per item: a request part's message, or a response's assistant message."""
        units: list[Unit] = []
        for i in range(start, len(items)):
            item = items[i]
            if isinstance(item, RequestPart):
                units.append(Unit(_request_message(item.part), i, i + 1))
            else:
                units.append(Unit(_response_message(item), i, i + 1))
        return units

    def encode(self, outs: Sequence[Out]) -> list[HostItem]:
        """Host items for the render's output; :func:`assemble` makes messages of them."""
        items: list[HostItem] = []
        for segment in prepare(outs):
            if isinstance(segment, Keep):
                items.extend(segment.items)
                continue
            assert isinstance(segment, New)
            message = segment.message
            role = message.get("role")
            if role == "assistant":
                items.append(_response(message))
            elif role == "toolResult":
                items.append(RequestPart(_tool_part(message), None))
            else:
                items.append(RequestPart(_user_part(message), None))
        return items
