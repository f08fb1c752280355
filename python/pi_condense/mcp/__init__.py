"""pi-condense as an MCP server: ``context_tree_query`` and the session recovery tools over
the session files Pi, a hook or the proxy writes, for any agent that loads MCP servers.

``pi-condense mcp`` serves them over stdio (the default) or streamable HTTP. Which session
the tools read is chosen when the server starts (:class:`SessionChoice`): a session file, a
sessions directory and a session id, or the newest session of a directory; see
:mod:`pi_condense.mcp.sessions`. The answers are the in-process tools' own
(:class:`SessionTools`).

The MCP SDK (the ``mcp`` extra) is imported with :mod:`pi_condense.mcp.server`
(:func:`create_server`), not with this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
    from .runner import TOOL_SPECS, SessionTools
    from .server import create_server, serve_http, serve_stdio
    from .sessions import SessionChoice, SessionNotFound

_HOME = {
    "TOOL_SPECS": "runner",
    "SessionTools": "runner",
    "create_server": "server",
    "serve_http": "server",
    "serve_stdio": "server",
    "SessionChoice": "sessions",
    "SessionNotFound": "sessions",
}

__all__ = [
    "TOOL_SPECS",
    "SessionChoice",
    "SessionNotFound",
    "SessionTools",
    "create_server",
    "serve_http",
    "serve_stdio",
]

__getattr__, __dir__ = lazy_names(__name__, globals(), _HOME, frozenset(_HOME.values()))
