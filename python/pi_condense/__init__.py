"""pi-condense: keep long LLM-agent sessions cheap (Rust core, Python API).

The public names are imported on first use (PEP 562), so ``import pi_condense`` (and the
command line's start-up, which imports this package first) costs only the native module.
"""

from __future__ import annotations

import sys
import types

from . import frozen as _frozen  # noqa: F401  (counts CPython 3.12's immortals first)
from ._core import __version__
from .lazy import TYPE_CHECKING, lazy_names

if TYPE_CHECKING:
    from typing import Any

    from .condenser import Condenser
    from .config import Config, load_config, save_config
    from .errors import CondenseError, CondenseWarning, ConfigError, JsonError, SessionError
    from .render import RenderDiagnostic, RenderResult, render
    from .session import LoadWarning, SessionContext, SessionFile
    from .state import PrunerState
    from .summarize import Summarizer, make_summarizer
    from .tools import ContextTreeQuery, ToolRegistry, condense_tools

_HOME = {
    "render": "render",
    "RenderDiagnostic": "render",
    "RenderResult": "render",
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

_SHADOWED = frozenset({"render"})
"""Public functions named as the submodule that defines them."""


class _Package(types.ModuleType):
    """This package's module type: binding a submodule of :data:`_SHADOWED` (which the import
    system does once it has loaded it) binds its function of the same name instead, so
    ``pi_condense.render`` stays the function without importing the module up front."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
