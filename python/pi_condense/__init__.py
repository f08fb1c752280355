"""pi-condense: keep long LLM-agent sessions cheap (Rust core, Python API)."""

from __future__ import annotations

from ._core import __version__
from .condenser import Condenser
from .config import Config, load_config, save_config
from .errors import CondenseError, CondenseWarning, ConfigError, JsonError, SessionError
from .render import RenderDiagnostic, RenderResult, render
from .session import LoadWarning, SessionContext, SessionFile
from .state import PrunerState
from .summarize import Summarizer, make_summarizer
from .tools import ContextTreeQuery, ToolRegistry, condense_tools

__all__ = [
    "CondenseError",
    "CondenseWarning",
    "Condenser",
    "Config",
    "ConfigError",
    "ContextTreeQuery",
    "JsonError",
    "LoadWarning",
    "PrunerState",
    "RenderDiagnostic",
    "RenderResult",
    "SessionContext",
    "SessionError",
    "SessionFile",
    "Summarizer",
    "ToolRegistry",
    "__version__",
    "condense_tools",
    "load_config",
    "make_summarizer",
    "render",
    "save_config",
]
