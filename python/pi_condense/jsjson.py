"""Compatibility alias of :mod:`pi_condense.js.json` (JSON with JavaScript semantics)."""

from __future__ import annotations

from .js.json import (
    MAX_DEPTH,
    dumps,
    dumps_bytes,
    length,
    loads,
    loads_with_depth,
    reformat,
    utf8_len,
    utf16_len,
)

__all__ = [
    "MAX_DEPTH",
    "dumps",
    "dumps_bytes",
    "length",
    "loads",
    "loads_with_depth",
    "reformat",
    "utf8_len",
    "utf16_len",
]
