"""The contract between a provider message format and the live driver (:mod:`pi_condense.live`).

A *codec* converts one host format (OpenAI chat messages, Responses input items, Anthropic
messages, a framework's message objects) to Pi's message shapes and back:

- :meth:`Codec.decode` groups the host's items into :class:`Unit` s, each one Pi message
  *without* its ``timestamp`` (the driver assigns timestamps) or ``None`` for an item Pi has no
  message for (a system or developer message, a format's bookkeeping item), or a *list* of
  several Pi messages when one host item holds several (an Anthropic user message carrying
  several ``tool_result`` blocks is one toolResult message per block, then a user message for
  its other blocks); the driver gives each of them its own timestamp. Units are
  contiguous, in order, and cover every item. Decoding is deterministic: the same items give
  the same messages (the driver compares them to the session's stored messages after a
  restart), and every value is JSON-shaped (dict, list, str, int, float, bool, None).
- :meth:`Codec.encode` turns the render's output back into host items. Each :data:`Out` is
  either a Pi message the render did not touch, together with the host items it was decoded
  from (returned as they are: the very same objects, so the prompt-cache prefix stays
  byte-stable), or a message the render made (a stub, a summary, a compressed chain, a copied
  assistant) with no items, to be converted. Host-only items (``message`` None) come back at
  their place. A unit whose message is a list is handed back as ONE :class:`Out` carrying the
  list and the unit's items only when every one of its messages came back untouched, in
  order and adjacent; otherwise each of its surviving messages is an :class:`Out` of its own
  with no items (converted afresh). The result must be a request the provider accepts:
  every tool result paired with its call and every call with a result, roles valid for the format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, TypeVar, Union

__all__ = ["Codec", "Out", "PiMessage", "Unit", "unit_messages"]

H = TypeVar("H")
"""A host item: a dict for the wire formats, a framework's message object otherwise."""


PiMessage = dict[str, Any]
"""A Pi message (``role``, ``content``, ...), JSON-shaped."""


class Unit(NamedTuple):
    """Host items ``items[start:stop]`` and the Pi message they make (None: host-only; a list:
    several Pi messages, in order)."""

    message: Union[PiMessage, list[PiMessage], None]
    start: int
    stop: int


class Out(NamedTuple):
    """One element of the render's output, as :meth:`Codec.encode` receives it.

    ``message`` is the Pi message (None for a host-only item; the unit's list when a
    several-message unit came back whole); ``items`` the host items it was decoded from when
    the render kept it untouched (and for host-only items), else empty.
    """

    message: Union[PiMessage, list[PiMessage], None]
    items: tuple[Any, ...]


class Codec(Protocol[H]):
    """A host format's converter (see the module docstring)."""

    name: str

    def decode(self, items: Sequence[H], start: int = 0) -> list[Unit]:
        """Units for ``items[start:]`` (``start`` is a unit boundary of an earlier decode of
        the same prefix); items before ``start`` may be consulted (a tool's name, say)."""
        ...

    def encode(self, outs: Sequence[Out]) -> list[H]:
        """Host items for the render's output, in order."""
        ...


def unit_messages(message: Union[PiMessage, list[PiMessage], None]) -> list[PiMessage]:
    """The Pi messages of a :class:`Unit` or :class:`Out` ``message``, as a list."""
    if message is None:
        return []
    if isinstance(message, list):
        return message
    return [message]
