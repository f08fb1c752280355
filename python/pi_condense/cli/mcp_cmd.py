"""`pi-condense mcp`: the recovery tools as an MCP server (:mod:`pi_condense.mcp`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from ..errors import CondenseError
from ..mcp.runner import SessionTools
from ..mcp.sessions import SessionChoice, SessionNotFound
from ..session import SessionFile
from ._common import fail, fail_at

__all__ = ["mcp_command"]

ENV_SESSIONS = ("PI_CONDENSE_PROXY_SESSIONS", "PI_CONDENSE_SESSION_DIR")
"""The proxy's sessions directory, then the hooks' one: the default of ``--sessions`` when
no SESSION is given."""


def _choice(
    session: Optional[Path], sessions: Optional[Path], session_id: Optional[str]
) -> SessionChoice:
    if session is not None and (sessions is not None or session_id is not None):
        fail("give SESSION or --sessions (with --session-id), not both")
    if session is None and sessions is None:
        configured = next((os.environ[name] for name in ENV_SESSIONS if os.environ.get(name)), None)
        if configured is None:
            fail(
                "no session: give SESSION (a session file) or --sessions DIR "
                f"(or set {' or '.join(ENV_SESSIONS)})"
            )
        sessions = Path(configured).expanduser()
    try:
        choice = SessionChoice(path=session, directory=sessions, session_id=session_id)
        choice.check()
    except (ValueError, SessionNotFound) as exc:
        fail(str(exc))
    if choice.path is not None:  # named outright: it must be a session now
        try:
            SessionFile.load(choice.path)
        except (CondenseError, OSError) as exc:
            fail_at(choice.path, "cannot read session file", exc)
    return choice


def mcp_command(
    session: Optional[Path] = typer.Argument(
        None,
        metavar="SESSION",
        help="The session file the tools read (else --sessions).",
    ),
    sessions: Optional[Path] = typer.Option(
        None,
        "--sessions",
        help="A sessions directory (Pi's, or the proxy's --sessions): the tools read the "
        "session written most recently, chosen again at every call, or --session-id's. "
        "Default without SESSION: $PI_CONDENSE_PROXY_SESSIONS, else $PI_CONDENSE_SESSION_DIR.",
    ),
    session_id: Optional[str] = typer.Option(
        None, "--session-id", help="The session id of the file in --sessions (<time>_<id>.jsonl)."
    ),
    transport: str = typer.Option(
        "stdio",
        "--transport",
        help='"stdio" (the client starts the server) or "http" '
        "(streamable HTTP at http://HOST:PORT/mcp).",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP: address to listen on."),
    port: int = typer.Option(8788, "--port", help="HTTP: port to listen on (0: any free port)."),
    paging: bool = typer.Option(
        True,
        "--paging/--no-paging",
        help="An answer over 2000 lines / 50 KB names the ref of its next part (<ref>#<line>); "
        "--no-paging: the reference extension's answers.",
    ),
    recorded_session_dir: Optional[str] = typer.Option(
        None,
        "--recorded-session-dir",
        help="Directory the session was written in, if it has moved since (spill paths "
        "under it are looked up next to the session file instead).",
    ),
) -> None:
    """Serve context_tree_query and the session recovery tools over MCP (stdio or HTTP)."""
    if transport not in ("stdio", "http"):
        fail(f'--transport must be "stdio" or "http", not {transport!r}')
    choice = _choice(session, sessions, session_id)
    try:
        from ..mcp import server
    except ImportError as exc:
        fail(f"the MCP server needs its extra: pip install 'pi-condense[mcp]' ({exc})")
    tools = SessionTools(choice, paging=paging, recorded_session_dir=recorded_session_dir)
    if transport == "stdio":
        server.serve_stdio(tools)
        return
    try:
        server.serve_http(tools, host, port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
