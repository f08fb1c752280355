"""Small conversions every codec shares: tool arguments, data-URL images, text joins."""

from __future__ import annotations

import re
from typing import Any, Optional

from ..errors import JsonError
from ..js import json as jsjson

__all__ = [
    "accepted_tool_content",
    "arguments_text",
    "data_url",
    "image_from_data_url",
    "parse_arguments",
    "text_blocks",
    "text_of",
]

_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


def parse_arguments(text: Any) -> Any:
    """Tool-call arguments as Pi stores them: the JSON object the text holds.

    Text that is not a JSON object (invalid JSON, an array, a number) is kept as the string
    itself, so that :func:`arguments_text` gives the very same text back.
    """
    if not isinstance(text, str):
        return text
    try:
        value = jsjson.loads(text)
    except (JsonError, ValueError):
        return text
    return value if isinstance(value, dict) else text


def arguments_text(arguments: Any) -> str:
    """The JSON text a provider expects for Pi arguments (``JSON.stringify``, as Pi does)."""
    if isinstance(arguments, str):
        return arguments
    return jsjson.dumps({} if arguments is None else arguments)


def image_from_data_url(url: Any) -> Optional[dict[str, Any]]:
    """A Pi image block for a ``data:<mime>;base64,<data>`` URL, else None."""
    if not isinstance(url, str):
        return None
    match = _DATA_URL.fullmatch(url)
    if match is None:
        return None
    return {"type": "image", "data": match.group(2), "mimeType": match.group(1)}


def data_url(block: dict[str, Any]) -> str:
    """The data URL of a Pi image block."""
    return f"data:{block.get('mimeType')};base64,{block.get('data')}"


def text_of(block: Any) -> Optional[str]:
    """The text of a Pi text block, else None."""
    if isinstance(block, dict) and block.get("type") == "text":
        text = block.get("text")
        return text if isinstance(text, str) else ""
    return None


def text_blocks(content: Any) -> list[str]:
    """The texts of a Pi content list's text blocks (a string content is one text)."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [t for t in (text_of(b) for b in content) if t is not None]


def accepted_tool_content(content: Any, index: int, call_id: Any, api: str, parts: str) -> Any:
    """A tool result's content as the host gave it, when the provider takes that: a string,
    a list of parts (JSON objects; a tuple is sent as a list by the SDKs, and becomes one),
    or ``None`` / absent (an empty result). ``index`` is the message's position in the
    history, ``call_id`` the call it answers, ``api`` and ``parts`` name what the provider
    takes in the error.

    Raises:
        TypeError: anything else (bytes, a number, a bool, a dict, a list holding a
            non-object): the provider refuses it, and storing it as an empty result would
            lose the tool's output without a word.
    """
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        bad = next((i for i, part in enumerate(content) if not isinstance(part, dict)), None)
        if bad is None:
            return list(content)
        what = f"content[{bad}] is {_kind(content[bad])}, not a JSON object"
    else:
        what = f"content is {_kind(content)}"
    raise TypeError(
        f"message {index} of the history (the tool result of call {call_id!r}): {what}; "
        f"the {api} takes a string or a list of {parts}"
    )


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__
