"""Where the proxy keeps its conversations, and how a conversation names its file.

Every conversation is one Pi session file in the proxy's sessions directory
(``--sessions``, else ``$PI_CONDENSE_PROXY_SESSIONS``, else
``<Pi agent dir>/sessions/--pi-condense-proxy--``), named as Pi names a session:
``<ISO time of creation>_<session id>.jsonl``. The session id is a UUID:

- the value of the request header ``x-pi-condense-session`` when that is a UUID, else a UUID
  derived from that value (:func:`session_id_for_name`);
- without the header, a UUID derived from the conversation's beginning
  (:func:`conversation_key`): the wire format, the system prompt, the first user message and
  the tool definitions, with the client's ``cache_control`` markers left out (clients move
  them from request to request).

The proxy answers every condensed request with the header ``x-pi-condense-session-id``;
:func:`find_session` finds the file of an id again (a restarted proxy does the same).
Nothing here imports the HTTP stack: the MCP server and the CLI use it as it is.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from ..config import agent_dir
from ..js import json as jsjson

__all__ = [
    "ENV_PROXY_SESSIONS",
    "SESSION_HEADER",
    "SESSION_ID_HEADER",
    "conversation_key",
    "default_sessions_dir",
    "find_session",
    "session_id_for_key",
    "session_id_for_name",
]

ENV_PROXY_SESSIONS = "PI_CONDENSE_PROXY_SESSIONS"
"""The proxy's sessions directory, when ``--sessions`` does not name one."""

SESSION_HEADER = "x-pi-condense-session"
"""A request header naming the conversation (any text, or a session id)."""

SESSION_ID_HEADER = "x-pi-condense-session-id"
"""The response header giving the session id a request was kept under."""


def default_sessions_dir() -> Path:
    """``$PI_CONDENSE_PROXY_SESSIONS``, else ``<agent dir>/sessions/--pi-condense-proxy--``."""
    configured = os.environ.get(ENV_PROXY_SESSIONS)
    if configured:
        return Path(configured).expanduser()
    return agent_dir() / "sessions" / "--pi-condense-proxy--"


def _uuid_of(digest: str) -> str:
    return str(uuid.UUID(digest[:32], version=4))


def session_id_for_name(name: str) -> str:
    """The session id the header ``x-pi-condense-session: <name>`` stands for: ``name``
    itself when it is a UUID, else a UUID derived from it."""
    try:
        return str(uuid.UUID(name))
    except ValueError:
        return _uuid_of(hashlib.sha256(f"pi-condense proxy name\n{name}".encode()).hexdigest())


def session_id_for_key(key: str) -> str:
    """The session id of a conversation whose beginning gives ``key``
    (see :func:`conversation_key`)."""
    return _uuid_of(key)


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def conversation_key(
    api: str, system: Any, first_user: Optional[Mapping[str, Any]], tools: Sequence[Any]
) -> str:
    """A hex digest of a conversation's beginning: the wire format (``api``), its system
    prompt (any JSON value), its first user message's content and its tool definitions."""
    content = first_user.get("content") if first_user is not None else None
    parts = [api, system, content, list(tools)]
    text = jsjson.dumps(_without_cache_control(parts))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def find_session(directory: Path, session_id: str) -> Optional[Path]:
    """The session file of ``session_id`` in ``directory`` (the newest, should there be
    several), or None."""
    if not directory.is_dir():
        return None
    found = sorted(directory.glob(f"*_{session_id}.jsonl"))
    return found[-1] if found else None
