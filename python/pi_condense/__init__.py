"""pi-condense: keep long LLM-agent sessions cheap (Rust core, Python API)."""

from __future__ import annotations

from ._core import __version__
from .errors import CondenseError, ConfigError, JsonError, SessionError

__all__ = [
    "CondenseError",
    "ConfigError",
    "JsonError",
    "SessionError",
    "__version__",
]
