"""Provider message formats <-> Pi message shapes (see :mod:`pi_condense.adapters.base`)."""

from __future__ import annotations

from .base import Codec, Out, PiMessage, Unit, unit_messages

__all__ = ["Codec", "Out", "PiMessage", "Unit", "unit_messages"]
