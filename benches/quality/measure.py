"""What a request costs and whether a provider accepts it.

One estimator for every strategy: a request is serialized as Anthropic Messages JSON (system,
tools, messages; compact separators) with every image's base64 data replaced by a 4,800-char
token (Pi's estimate of an image), and tokens are its chars / 4, as Pi estimates them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

IMAGE_CHARS = 4800
CACHE_READ = 0.1
CACHE_WRITE = 1.25


def _strip_images(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("type") == "base64" and isinstance(value.get("data"), str):
            digest = hashlib.sha256(value["data"].encode()).hexdigest()[:12]
            return {**value, "data": f"<image {digest}>".ljust(IMAGE_CHARS - 40, ".")}
        return {k: _strip_images(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_images(v) for v in value]
    return value


def wire(system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> str:
    """The request as the estimator sees it."""
    body = {"system": system, "tools": tools, "messages": _strip_images(messages)}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def tokens(text: str) -> float:
    """Pi's estimate: chars / 4."""
    return len(text) / 4


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def cache_cost(previous: str, current: str) -> tuple[float, float]:
    """(cost, cached tokens) of ``current`` after ``previous``: the longest byte-identical
    prefix is read from the cache at 0.1x, the rest written at 1.25x (output ignored)."""
    prefix = common_prefix(previous, current)
    return (
        tokens(current[:prefix]) * CACHE_READ + tokens(current[prefix:]) * CACHE_WRITE,
        tokens(current[:prefix]),
    )


def rule_breaks(messages: list[dict[str, Any]]) -> list[str]:
    """What in ``messages`` the Anthropic Messages API refuses: the first message not a user
    one, two messages of one role in a row, empty content, a tool_use without its tool_result
    in the next user message, a tool_result not answering a tool_use of the message before it,
    tool results after other blocks, a request ending on an unanswered tool_use."""
    problems: list[str] = []
    if not messages:
        return ["empty request"]
    if messages[0].get("role") != "user":
        problems.append("first message is not a user message")
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            problems.append(f"message {i}: role {role!r}")
        if i and messages[i - 1].get("role") == role:
            problems.append(f"message {i}: two {role} messages in a row")
        if not content:
            problems.append(f"message {i}: empty content")
        blocks = content if isinstance(content, list) else []
        if role == "assistant":
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if not uses:
                continue
            after = messages[i + 1] if i + 1 < len(messages) else None
            if after is None:
                problems.append(f"message {i}: tool_use without a result (request ends)")
                continue
            answered = [
                b.get("tool_use_id")
                for b in (after.get("content") if isinstance(after.get("content"), list) else [])
                if b.get("type") == "tool_result"
            ]
            if sorted(answered) != sorted(uses):
                problems.append(f"message {i}: tool_use ids {uses} answered by {answered}")
        elif role == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            kinds = [b.get("type") == "tool_result" for b in blocks]
            if results and kinds != sorted(kinds, reverse=True):
                problems.append(f"message {i}: tool_result after other blocks")
            previous = messages[i - 1] if i else None
            prev_blocks = previous.get("content") if previous else None
            uses = {
                b.get("id")
                for b in (prev_blocks if isinstance(prev_blocks, list) else [])
                if b.get("type") == "tool_use"
            }
            for r in results:
                if r.get("tool_use_id") not in uses:
                    problems.append(
                        f"message {i}: tool_result {r.get('tool_use_id')} has no tool_use"
                    )
    return problems
