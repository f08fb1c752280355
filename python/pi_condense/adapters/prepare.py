"""The Pi-side half of every codec's ``encode``: what Pi does to a context before a provider
sees it, applied to the render's output.

- ``convertToLlm`` (coding-agent ``messages.ts``): ``custom`` messages become user messages
  (string content -> one text block), ``bashExecution`` / ``branchSummary`` /
  ``compactionSummary`` become user text, unknown roles are dropped;
- ``transformMessages`` (pi-ai ``transform-messages.ts``): assistant messages with
  ``stopReason`` ``error``/``aborted`` are skipped, and every tool call left without a result
  gets a synthetic ``"No result provided"`` error result before the next assistant or user
  message (and, unlike Pi, also at the end of the list: a request must not end on an open call);
- beyond Pi: a tool result that answers no open call (its call was skipped or already
  answered) is dropped, so the request never holds a result without its call.

Untouched host items keep their identity through this: a segment is either the caller's own
items (:class:`Keep`) or a Pi message to convert (:class:`New`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Optional, Union

from .base import Out, PiMessage, unit_messages

__all__ = [
    "Keep",
    "New",
    "Segment",
    "assistant_message",
    "bash_execution_text",
    "prepare",
    "to_llm",
    "tool_calls",
]

NO_RESULT_TEXT = "No result provided"
COMPACTION_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUFFIX = "\n</summary>"
BRANCH_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUFFIX = "</summary>"


class Keep(NamedTuple):
    """The caller's own items, returned as they are (``messages``: their Pi messages)."""

    items: tuple[Any, ...]
    messages: tuple[PiMessage, ...]


class New(NamedTuple):
    """A Pi message (user, assistant or toolResult) the codec converts to host items."""

    message: PiMessage


Segment = Union[Keep, New]


def assistant_message(content: list[Any], api: str, provider: str) -> PiMessage:
    """A decoded Pi assistant message (no timestamp; usage unknown, so zero)."""
    calls = any(isinstance(b, dict) and b.get("type") == "toolCall" for b in content)
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    return {
        "role": "assistant",
        "content": content,
        "api": api,
        "provider": provider,
        "model": "",
        "usage": {**zero, "totalTokens": 0, "cost": {**zero, "total": 0}},
        "stopReason": "toolUse" if calls else "stop",
    }


def tool_calls(message: PiMessage) -> list[dict[str, Any]]:
    """The ``toolCall`` blocks of an assistant message."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def bash_execution_text(message: PiMessage) -> str:
    """The user text Pi sends for a ``bashExecution`` message."""
    text = f"Ran `{message.get('command')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code != 0:
        text += f"\n\nCommand exited with code {exit_code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message.get('fullOutputPath')}]"
    return text


def to_llm(message: PiMessage) -> Optional[PiMessage]:
    """``convertToLlm`` for one message: a user, assistant or toolResult message, or None."""
    role = message.get("role")
    if role in ("user", "assistant", "toolResult"):
        return message
    text: Optional[str] = None
    if role == "custom":
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        return {"role": "user", "content": content}
    if role == "bashExecution" and not message.get("excludeFromContext"):
        text = bash_execution_text(message)
    elif role == "branchSummary":
        text = BRANCH_PREFIX + str(message.get("summary")) + BRANCH_SUFFIX
    elif role == "compactionSummary":
        text = COMPACTION_PREFIX + str(message.get("summary")) + COMPACTION_SUFFIX
    if text is None:
        return None
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _no_result(call: dict[str, Any]) -> PiMessage:
    return {
        "role": "toolResult",
        "toolCallId": call.get("id"),
        "toolName": call.get("name"),
        "content": [{"type": "text", "text": NO_RESULT_TEXT}],
        "isError": True,
    }


class _Entry(NamedTuple):
    group: int  # index of the Out it came from; -1 for a synthetic result
    message: Optional[PiMessage]  # None: host-only


def _flatten(outs: Sequence[Out]) -> Iterator[_Entry]:
    for index, out in enumerate(outs):
        message = out.message
        if message is None:
            yield _Entry(index, None)
        elif out.items and not isinstance(message, list):
            yield _Entry(index, message)
        else:
            for one in unit_messages(message):
                converted = one if out.items else to_llm(one)
                if converted is not None:
                    yield _Entry(index, converted)


def _pair(entries: Iterator[_Entry]) -> list[_Entry]:
    """Skip errored assistants, add missing results, drop results answering no open call."""
    result: list[_Entry] = []
    pending: list[dict[str, Any]] = []
    unanswered: set[Any] = set()

    def close() -> None:
        nonlocal pending
        if unanswered:
            for call in pending:
                if call.get("id") in unanswered:
                    unanswered.discard(call.get("id"))
                    result.append(_Entry(-1, _no_result(call)))
        pending = []
        unanswered.clear()

    for entry in entries:
        message = entry.message
        if message is None:
            result.append(entry)
            continue
        role = message.get("role")
        if role == "toolResult":
            call_id = message.get("toolCallId")
            if call_id in unanswered:
                unanswered.discard(call_id)
                result.append(entry)
            continue
        if pending:
            close()
        if role == "assistant":
            if message.get("stopReason") in ("error", "aborted"):
                continue
            pending = tool_calls(message)
            unanswered.update(call.get("id") for call in pending)
        result.append(entry)
    close()
    return result


def _kept_whole(outs: Sequence[Out]) -> Optional[list[Segment]]:
    """The segments of ``outs`` when :func:`prepare` would keep every one as it is: each a
    single message or host-only, with its items; no errored assistant; every tool call
    answered, once, by the results that follow its assistant, and no other result. None
    otherwise (also for a call id that cannot be a set member: :func:`_pair` decides then).
    One pass, no per-message entries: a late join's untouched history."""
    segments: list[Segment] = []
    append = segments.append
    unanswered: set[Any] = set()
    try:
        for message, items in outs:
            if message is None:
                if items:
                    append(Keep(items, ()))
                continue
            if not items or type(message) is not dict:
                return None
            role = message.get("role")
            if role == "toolResult":
                call_id = message.get("toolCallId")
                if call_id not in unanswered:
                    return None  # dropped: it answers no open call
                unanswered.discard(call_id)
            elif unanswered:
                return None  # a call left without a result: a synthetic one comes here
            elif role == "assistant":
                if message.get("stopReason") in ("error", "aborted"):
                    return None
                content = message.get("content")
                if isinstance(content, list):
                    for block in content:
                        if isinstance(block, dict) and block.get("type") == "toolCall":
                            call_id = block.get("id")
                            if call_id in unanswered:
                                return None  # two calls of one id: let _pair decide
                            unanswered.add(call_id)
            append(Keep(items, (message,)))
    except TypeError:  # an unhashable call id
        return None
    return None if unanswered else segments


def prepare(outs: Sequence[Out]) -> list[Segment]:
    """The render's output as the segments a provider request is built from (module doc)."""
    outs = list(outs)
    kept = _kept_whole(outs)
    if kept is not None:
        return kept
    paired = _pair(_flatten(outs))
    segments: list[Segment] = []
    index = 0
    while index < len(paired):
        group = paired[index].group
        stop = index + 1
        while stop < len(paired) and paired[stop].group == group:
            stop += 1
        out = outs[group] if group >= 0 else None
        # an untouched Out is kept when all its messages survived, adjacent (a group's
        # entries stay in order; a dropped or inserted message shortens its run)
        if out is not None and out.items:
            expected = len(out.message) if isinstance(out.message, list) else 1
            if stop - index == expected:
                segments.append(Keep(out.items, tuple(unit_messages(out.message))))
                index = stop
                continue
        for entry in paired[index:stop]:
            if entry.message is not None:
                segments.append(New(entry.message))
        index = stop
    return segments
