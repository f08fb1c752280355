"""Compatibility alias of :mod:`pi_condense.js.time` (JavaScript ``Date`` semantics)."""

from __future__ import annotations

from .js.time import (
    MAX_TIME_MS,
    date_parse,
    date_value,
    now_ms,
    time_clip,
    to_iso_string,
    to_js_string,
)

__all__ = [
    "MAX_TIME_MS",
    "date_parse",
    "date_value",
    "now_ms",
    "time_clip",
    "to_iso_string",
    "to_js_string",
]
