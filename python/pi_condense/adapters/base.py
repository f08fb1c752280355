"""The contract between a provider message format and the live driver (:mod:`pi_condense.live`).

A *codec* converts one host format (OpenAI chat messages, Responses input items, Anthropic
messages, a framework's message objects) to Pi's message shapes and back:

- :meth:`Codec.decode` groups the host's items into :class:`Unit` s, each one Pi message
  *without* its ``timestamp`` (the driver assigns timestamps) or ``None`` for an item Pi has no
  message for (a system or developer message, a format's bookkeeping item). Units are
  contiguous, in order, and cover every item. Decoding is deterministic: the same items give
  the same messages (the driver compares them to the session's stored messages after a
  restart), and every value is JSON-shaped (dict, list, str, int, float, bool, None).
- :meth:`Codec.encode` turns the render's output back into host items. Each :data:`Out` is
  either a Pi message the render did not touch, together with the host items it was decoded
  from (returned as they are: the very same objects, so the prompt-cache prefix stays
  byte-stable), or a message the render made (a stub, a summary, a compressed chain, a copied
  assistant) with no items, to be converted. Host-only items (``message`` None) come back at
  their place. The result must be a request the provider accepts: every tool result paired
  with its call and every call with a result, roles valid for the format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Optional, Protocol, TypeVar

__all__ = ["Codec", "Out", "Unit"]

H = TypeVar("H")
"""A host item: a dict for the wire formats, a framework's message object otherwise."""


class Unit(NamedTuple):
    """Host items ``items[start:stop]`` and the one Pi message they make (None: host-only)."""

    message: Optional[dict[str, Any]]
    start: int
    stop: int


class Out(NamedTuple):
    """One element of the render's output, as :meth:`Codec.encode` receives it.

    ``message`` is the Pi message (None for a host-only item); ``items`` the host items it was
    decoded from when the render kept it untouched (and for host-only items), else empty.
    """

    message: Optional[dict[str, Any]]
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
