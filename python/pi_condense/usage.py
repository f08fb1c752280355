"""Pi's context-usage estimate: ``ceil(chars / 4)`` per message, and the last reported usage.

What Pi's ``estimateTokens`` and ``estimateContextTokens`` compute; the replay, the live driver
and the corpus facts report context usage from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from .js import json as jsjson

__all__ = ["TokenMemo", "estimate_context_tokens", "estimate_tokens", "reported_usage"]

_IMAGE_CHARS = 4800

Number = Union[int, float]


def _chars(text: Any) -> int:
    return jsjson.utf16_len(text) if isinstance(text, str) else 0


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return jsjson.utf16_len(content)
    total = 0
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and block.get("text"):
            total += _chars(block["text"])
        elif block.get("type") == "image":
            total += _IMAGE_CHARS
    return total


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """Pi's per-message token estimate (``ceil(chars / 4)`` of the countable parts)."""
    role = message.get("role")
    if role in ("user", "custom", "toolResult"):
        return math.ceil(_content_chars(message.get("content")) / 4)
    if role == "assistant":
        total = 0
        for block in message.get("content") or ():
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                total += _chars(block.get("text"))
            elif kind == "thinking":
                total += _chars(block.get("thinking"))
            elif kind == "toolCall":
                total += _chars(block.get("name")) + jsjson.length(block.get("arguments"))
        return math.ceil(total / 4)
    if role == "bashExecution":
        return math.ceil((_chars(message.get("command")) + _chars(message.get("output"))) / 4)
    if role in ("branchSummary", "compactionSummary"):
        return math.ceil(_chars(message.get("summary")) / 4)
    return 0


def _usage_tokens(usage: Mapping[str, Any]) -> Number:
    total = usage.get("totalTokens")
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total:
        return total
    parts = [usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")]
    if all(isinstance(p, (int, float)) for p in parts):
        return sum(parts)  # type: ignore[arg-type]
    return math.nan


def reported_usage(message: Any) -> Optional[Mapping[str, Any]]:
    """The usage of an assistant message Pi's context estimate starts from, if usable."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return None
    usage = message.get("usage")
    if message.get("stopReason") in ("aborted", "error") or not isinstance(usage, dict):
        return None
    return usage if _usage_tokens(usage) > 0 else None


TokenMemo = dict[int, tuple[Any, Optional[Mapping[str, Any]], int]]
"""What :func:`estimate_context_tokens` learned of each message (by ``id``: the message, its
usable usage, its estimate), for a caller whose messages never change once seen."""


def estimate_context_tokens(messages: Sequence[Any], memo: Optional[TokenMemo] = None) -> Number:
    """Pi's context estimate: the last usable assistant usage plus estimates after it.

    With ``memo`` each message is read once (the messages must not change afterwards)."""
    if memo is None:
        for i in range(len(messages) - 1, -1, -1):
            usage = reported_usage(messages[i])
            if usage is not None:
                return _usage_tokens(usage) + sum(estimate_tokens(m) for m in messages[i + 1 :])
        return sum(estimate_tokens(m) for m in messages if isinstance(m, dict))
    known = [_learn(m, memo) if isinstance(m, dict) else None for m in messages]
    for i in range(len(messages) - 1, -1, -1):
        fact = known[i]
        if fact is not None and fact[1] is not None:
            after = known[i + 1 :]
            if any(f is None for f in after):  # not a message: raises as without the memo
                return _usage_tokens(fact[1]) + sum(estimate_tokens(m) for m in messages[i + 1 :])
            return _usage_tokens(fact[1]) + sum(f[2] for f in after if f is not None)
    return sum(f[2] for f in known if f is not None)


def _learn(
    message: dict[str, Any], memo: TokenMemo
) -> tuple[Any, Optional[Mapping[str, Any]], int]:
    fact = memo.get(id(message))
    if fact is None or fact[0] is not message:
        fact = (message, reported_usage(message), estimate_tokens(message))
        memo[id(message)] = fact
    return fact
