"""Which message format a list looks like (for warnings that name the adapter to use)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Optional

__all__ = ["FORMATS", "detect_format"]

FORMATS = ("pi", "openai-chat", "openai-responses", "anthropic-messages")

_PI_ROLES = {"toolResult", "custom", "bashExecution", "branchSummary", "compactionSummary"}
_RESPONSES_TYPES = {
    "message",
    "function_call",
    "function_call_output",
    "reasoning",
    "item_reference",
    "computer_call",
    "computer_call_output",
    "web_search_call",
    "file_search_call",
    "custom_tool_call",
    "custom_tool_call_output",
}
_BLOCK_FORMATS = {
    "toolCall": "pi",
    "tool_use": "anthropic-messages",
    "tool_result": "anthropic-messages",
    "redacted_thinking": "anthropic-messages",
    "document": "anthropic-messages",
    "image_url": "openai-chat",
    "input_audio": "openai-chat",
    "file": "openai-chat",
    "refusal": "openai-chat",
    "input_text": "openai-responses",
    "output_text": "openai-responses",
    "input_image": "openai-responses",
    "input_file": "openai-responses",
}


def _block_signal(block: Any) -> Optional[str]:
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "image":
        return "anthropic-messages" if "source" in block else "pi"
    if kind == "thinking":
        return "anthropic-messages" if "signature" in block else "pi"
    return _BLOCK_FORMATS.get(str(kind))


def _signals(item: Any) -> Iterable[str]:
    if not isinstance(item, dict):
        return
    role = item.get("role")
    if item.get("type") in _RESPONSES_TYPES:
        yield "openai-responses"
    if role in _PI_ROLES:
        yield "pi"
    if role in ("tool", "function") or "tool_calls" in item or "tool_call_id" in item:
        yield "openai-chat"
    if role in ("user", "assistant") and isinstance(item.get("timestamp"), (int, float)):
        yield "pi"
    content = item.get("content")
    for block in content if isinstance(content, list) else ():
        signal = _block_signal(block)
        if signal is not None:
            yield signal


def detect_format(messages: Any) -> Optional[str]:
    """The format a message list looks like: ``"pi"``, ``"openai-chat"``,
    ``"openai-responses"``, ``"anthropic-messages"``, or None when nothing tells them apart
    (plain ``{"role", "content": str}`` messages fit every provider format) or the value is
    not a list."""
    if not isinstance(messages, (list, tuple)):
        return None
    votes = Counter(signal for item in messages for signal in _signals(item))
    ranked = votes.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]
