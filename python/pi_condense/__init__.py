"""pi-condense: keep long LLM-agent sessions cheap (Rust core, Python API)."""

from __future__ import annotations

from ._core import __version__
from .config import Config, load_config, save_config
from .errors import CondenseError, ConfigError, JsonError, SessionError
from .render import RenderDiagnostic, RenderResult, render
from .session import LoadWarning, SessionContext, SessionFile
from .state import PrunerState

__all__ = [
    "CondenseError",
    "Config",
    "ConfigError",
    "JsonError",
    "LoadWarning",
    "PrunerState",
    "RenderDiagnostic",
    "RenderResult",
    "SessionContext",
    "SessionError",
    "SessionFile",
    "__version__",
    "load_config",
    "render",
    "save_config",
]
