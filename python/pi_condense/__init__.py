"""pi-condense: keep long LLM-agent sessions cheap (Rust core, Python API).

The public names are imported on first use (PEP 562), so ``import pi_condense`` (and the
command line's start-up, which imports this package first) costs only the native module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._core import __version__
from .lazy import lazy_names

# Eager: the name is also a submodule's, which an import of it would bind here instead.
from .render import RenderDiagnostic, RenderResult, render

if TYPE_CHECKING:
    from .condenser import Condenser
    from .config import Config, load_config, save_config
    from .errors import CondenseError, CondenseWarning, ConfigError, JsonError, SessionError
    from .session import LoadWarning, SessionContext, SessionFile
    from .state import PrunerState
    from .summarize import Summarizer, make_summarizer
    from .tools import ContextTreeQuery, ToolRegistry, condense_tools

_HOME = {
    "Condenser": "condenser",
    "Config": "config",
    "load_config": "config",
    "save_config": "config",
    "CondenseError": "errors",
    "CondenseWarning": "errors",
    "ConfigError": "errors",
    "JsonError": "errors",
    "SessionError": "errors",
    "LoadWarning": "session",
    "SessionContext": "session",
    "SessionFile": "session",
    "PrunerState": "state",
    "Summarizer": "summarize",
    "make_summarizer": "summarize",
    "ContextTreeQuery": "tools",
    "ToolRegistry": "tools",
    "condense_tools": "tools",
}

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


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOME)
