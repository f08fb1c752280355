"""Provider message formats <-> Pi message shapes (see :mod:`pi_condense.adapters.base`).

One codec per format: :class:`OpenAIChatCodec` (Chat Completions ``messages``),
:class:`OpenAIResponsesCodec` (Responses input items, as the OpenAI Agents SDK hands them),
:class:`AnthropicMessagesCodec` (Messages API ``messages``). :func:`adapter_for` gives the
codec for a format name, :func:`detect_format` names the format a list looks like.
"""

from __future__ import annotations

from typing import Any

from .anthropic_messages import AnthropicMessagesCodec
from .base import Codec, Out, PiMessage, Unit, unit_messages
from .detect import FORMATS, detect_format
from .openai_chat import OpenAIChatCodec
from .openai_responses import OpenAIResponsesCodec

__all__ = [
    "CODECS",
    "FORMATS",
    "AnthropicMessagesCodec",
    "Codec",
    "OpenAIChatCodec",
    "OpenAIResponsesCodec",
    "Out",
    "PiMessage",
    "Unit",
    "adapter_for",
    "detect_format",
    "unit_messages",
]

CODECS: dict[str, type[Any]] = {
    OpenAIChatCodec.name: OpenAIChatCodec,
    OpenAIResponsesCodec.name: OpenAIResponsesCodec,
    AnthropicMessagesCodec.name: AnthropicMessagesCodec,
}


def adapter_for(name: str) -> Codec[Any]:
    """A codec for a format name (``"openai-chat"``, ``"openai-responses"``,
    ``"anthropic-messages"``).

    Raises:
        ValueError: ``"pi"`` (Pi messages need no adapter) or an unknown name.
    """
    codec = CODECS.get(name)
    if codec is None:
        if name == "pi":
            raise ValueError("Pi messages need no adapter")
        known = ", ".join(sorted(CODECS))
        raise ValueError(f"unknown message format {name!r} (known: {known})")
    instance: Codec[Any] = codec()
    return instance
