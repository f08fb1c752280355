"""pi-condense as an HTTP proxy: any agent that lets its user set the model's base URL gets
its history condensed, with every original kept recoverable.

``pi-condense proxy`` serves :func:`create_app`: ``POST /v1/chat/completions`` (OpenAI Chat
Completions), ``POST /v1/responses`` (OpenAI Responses) and ``POST /v1/messages`` (Anthropic
Messages). Each request's history is condensed by the hooks' live driver
(:class:`~pi_condense.live.LiveDriver`, one per conversation, its session a Pi session file:
see :mod:`pi_condense.proxy.sessions`), sent to the upstream API with the client's own key,
and the answer comes back as the upstream sent it (a stream event by event).

The HTTP stack (Starlette, uvicorn, httpx: the ``proxy`` extra) is imported when
:func:`create_app` is first used, not with this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names
from .sessions import (
    ENV_PROXY_SESSIONS,
    SESSION_HEADER,
    SESSION_ID_HEADER,
    conversation_key,
    default_sessions_dir,
    find_session,
    session_id_for_key,
    session_id_for_name,
)

if TYPE_CHECKING:
    from .app import ProxySettings, create_app

__all__ = [
    "ENV_PROXY_SESSIONS",
    "SESSION_HEADER",
    "SESSION_ID_HEADER",
    "ProxySettings",
    "conversation_key",
    "create_app",
    "default_sessions_dir",
    "find_session",
    "session_id_for_key",
    "session_id_for_name",
]


_HOME = {"create_app": "app", "ProxySettings": "app"}

__getattr__, __dir__ = lazy_names(__name__, globals(), _HOME, frozenset(_HOME.values()))
