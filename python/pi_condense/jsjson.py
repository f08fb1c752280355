"""Compatibility alias of :mod:`pi_condense.js.json` (JSON with JavaScript semantics)."""

from __future__ import annotations

from .js.json import *  # noqa: F403  (the alias exports exactly what js.json does)
from .js.json import __all__ as __all__
