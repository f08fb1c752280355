"""Compatibility alias of :mod:`pi_condense.js.time` (JavaScript ``Date`` semantics)."""

from __future__ import annotations

from .js.time import *  # noqa: F403  (the alias exports exactly what js.time does)
from .js.time import __all__ as __all__
