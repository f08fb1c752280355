"""The per-request image cap, ``maxImagesPerRequest`` (pi-condense 2.11.0).

Every image a model has seen stays in the transcript, so a long session can carry more images
than a provider accepts in one request and then fail on every request. Once a request holds
more than the cap, the oldest image blocks become a text note, in steps of half the cap, so
the prompt prefix (and the provider's prompt cache) changes once per step rather than with
every new image. The cap guards the request's validity, not its size: it applies even with
pruning disabled. The session file is never changed.
"""

from __future__ import annotations

import math
from typing import Any, Optional

__all__ = ["ANTHROPIC_MESSAGES_IMAGE_LIMIT", "IMAGE_OMITTED_NOTE", "cap_images", "image_limit"]

IMAGE_OMITTED_NOTE = (
    "[earlier image omitted from this request: over maxImagesPerRequest; read the file again "
    "to view it]"
)
"""The text block an omitted image becomes."""

ANTHROPIC_MESSAGES_IMAGE_LIMIT = 100
"""The Anthropic Messages API's documented maximum of images per request."""


def image_limit(configured: Optional[int], api: Optional[str]) -> Optional[int]:
    """The cap for a request: ``maxImagesPerRequest`` when set, else the built-in limit of the
    model's wire API (100 for ``"anthropic-messages"``), else None (no cap)."""
    if configured is not None:
        return configured
    return ANTHROPIC_MESSAGES_IMAGE_LIMIT if api == "anthropic-messages" else None


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "image"


def cap_images(messages: list[Any], limit: int) -> Optional[list[Any]]:
    """``messages`` with the oldest image blocks replaced by :data:`IMAGE_OMITTED_NOTE` once
    there are more than ``limit``; None when nothing changes. The input is not mutated:
    changed messages are shallow copies with a new ``content`` list."""
    total = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            total += sum(1 for block in content if _is_image(block))
    if total <= limit:
        return None
    step = max(1, math.ceil(limit / 2))
    to_omit = min(total, math.ceil((total - limit) / step) * step)
    out: Optional[list[Any]] = None
    for i, message in enumerate(messages):
        if to_omit <= 0:
            break
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        replaced: Optional[list[Any]] = None
        for j, block in enumerate(content):
            if to_omit <= 0:
                break
            if not _is_image(block):
                continue
            if replaced is None:
                replaced = list(content)
            replaced[j] = {"type": "text", "text": IMAGE_OMITTED_NOTE}
            to_omit -= 1
        if replaced is not None:
            if out is None:
                out = list(messages)
            out[i] = {**message, "content": replaced}
    return out
