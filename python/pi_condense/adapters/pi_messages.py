"""The codec for hosts that already speak Pi's message shapes (timestamps optional).

Each item is one Pi message; a ``timestamp`` it carries is ignored (the driver assigns its own),
and ``system`` items are the host's own (kept in place, never condensed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .base import Out, Unit

__all__ = ["PiCodec"]


class PiCodec:
    """Pi messages in, Pi messages out."""

    name = "pi"

    def decode(self, items: Sequence[Mapping[str, Any]], start: int = 0) -> list[Unit]:
        """One unit per item; ``system`` items are host-only."""
        units = []
        for i in range(start, len(items)):
            item = items[i]
            if item.get("role") == "system":
                units.append(Unit(None, i, i + 1))
            else:
                units.append(Unit({k: v for k, v in item.items() if k != "timestamp"}, i, i + 1))
        return units

    def encode(self, outs: Sequence[Out]) -> list[Any]:
        """The caller's own items where the render kept them, else the render's messages."""
        result: list[Any] = []
        for out in outs:
            if out.items:
                result.extend(out.items)
            elif out.message is not None:
                result.append(out.message)
        return result
