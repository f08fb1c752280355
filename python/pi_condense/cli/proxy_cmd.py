"""`pi-condense proxy`: the OpenAI- and Anthropic-compatible proxy (:mod:`pi_condense.proxy`)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, cast

import typer

from ._common import config_option, fail, load_cli_config

if TYPE_CHECKING:
    from ..live import JoinMode

__all__ = ["proxy_command"]


def proxy_command(
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on (loopback by default)."
    ),
    port: int = typer.Option(8787, "--port", help="Port to listen on (0: any free port)."),
    openai_base_url: str = typer.Option(
        "https://api.openai.com/v1",
        "--openai-base-url",
        envvar="PI_CONDENSE_OPENAI_BASE_URL",
        help="Upstream for /v1/chat/completions and /v1/responses (any OpenAI-compatible "
        "API root: OpenRouter, vLLM, Ollama, llama.cpp).",
    ),
    anthropic_base_url: str = typer.Option(
        "https://api.anthropic.com/v1",
        "--anthropic-base-url",
        envvar="PI_CONDENSE_ANTHROPIC_BASE_URL",
        help="Upstream for /v1/messages.",
    ),
    sessions: Optional[Path] = typer.Option(
        None,
        "--sessions",
        help="Directory of the conversations' session files (default: "
        "$PI_CONDENSE_PROXY_SESSIONS, else <Pi agent dir>/sessions/--pi-condense-proxy--).",
    ),
    recovery: str = typer.Option(
        "proxy",
        "--recovery",
        help='"proxy": offer the recovery tools and answer their calls here, unseen by the '
        'client; "client": add no tools, pass every call on (a client that loads '
        "`pi-condense mcp`).",
    ),
    max_conversations: int = typer.Option(
        64,
        "--max-conversations",
        min=1,
        help="Conversations kept open at most (one worker thread each); the least recently "
        "used idle one is closed for a new one, and reopened from its file when it returns.",
    ),
    join: str = typer.Option(
        "flush",
        "--join",
        help="A conversation that reaches the proxy with whole earlier runs it has no session "
        'for (a client started first): "flush" condenses its first request, summarizing them '
        'first (a slower first request); "defer" stores them and sends that request on as it '
        "came, condensing from the next one.",
    ),
    config: Optional[Path] = config_option(),
    summarizer: Optional[str] = typer.Option(
        None, "--summarizer", help="Summarizer spec (default: the offline summarizer)."
    ),
) -> None:
    """Serve OpenAI Chat Completions, OpenAI Responses and Anthropic Messages, condensing
    each conversation's history on its way upstream."""
    if recovery not in ("proxy", "client"):
        fail(f'--recovery must be "proxy" or "client", not {recovery!r}')
    if join not in ("flush", "defer"):
        fail(f'--join must be "flush" or "defer", not {join!r}')
    try:
        import uvicorn

        from ..proxy.app import ProxySettings, create_app
    except ImportError as exc:
        fail(f"the proxy needs its extra: pip install 'pi-condense[proxy]' ({exc})")
    settings: dict[str, Any] = {}
    if config is not None:
        settings["config"] = load_cli_config(config, None, enable=True)
    app = create_app(
        ProxySettings(
            openai_base_url=openai_base_url,
            anthropic_base_url=anthropic_base_url,
            sessions_dir=sessions,
            recovery=recovery,
            summarizer=summarizer,
            max_conversations=max_conversations,
            join=cast("JoinMode", join),
            **settings,
        )
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    sock.listen(2048)  # connections wait in the backlog until the server takes them
    bound = sock.getsockname()[1]
    where = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"pi-condense proxy: listening on http://{where}:{bound}\n")
    sys.stderr.flush()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])
