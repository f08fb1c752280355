"""The MCP server on the official MCP Python SDK (``mcp`` >= 2, its low-level ``Server``):
tool registrations as the in-process tools have them, answers from
:class:`~pi_condense.mcp.runner.SessionTools`, served over stdio or streamable HTTP."""

from __future__ import annotations

import os
import socket
import sys
from typing import Any, Optional

import anyio
import anyio.to_thread
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .._core import __version__
from ..tools.base import ToolResult, ToolSpec
from .runner import SessionTools

__all__ = ["SERVER_NAME", "create_server", "serve_http", "serve_stdio"]

SERVER_NAME = "pi-condense"

_READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.label,
        description=spec.description,
        input_schema=dict(spec.parameters),
        annotations=_READ_ONLY,
    )


def _content(result: ToolResult) -> types.CallToolResult:
    blocks: list[Any] = [types.TextContent(type="text", text=result.text)]
    for image in result.images:
        data, mime = image.get("data"), image.get("mimeType")
        if isinstance(data, str) and isinstance(mime, str):
            blocks.append(types.ImageContent(type="image", data=data, mime_type=mime))
    return types.CallToolResult(content=blocks, is_error=result.is_error)


def create_server(tools: SessionTools) -> Server[Any]:
    """An MCP server listing ``tools``' registrations and answering their calls."""
    listed = types.ListToolsResult(tools=[_tool(spec) for spec in tools.specs])

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: Optional[types.PaginatedRequestParams]
    ) -> types.ListToolsResult:
        return listed

    async def call_tool(
        _ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # the tools read files: off the event loop, so HTTP clients are served meanwhile
        result = await anyio.to_thread.run_sync(tools.call, params.name, params.arguments)
        return _content(result)

    return Server(
        SERVER_NAME,
        version=__version__,
        title="pi-condense recovery tools",
        instructions=tools.guidelines(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(tools: SessionTools) -> None:
    """Serve over the process's stdin and stdout until the client closes them."""
    server = create_server(tools)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


def serve_http(tools: SessionTools, host: str, port: int, path: str = "/mcp") -> None:
    """Serve streamable HTTP at ``http://host:port/path`` (``port`` 0: any free port); the
    address is printed on stderr once the socket listens."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if os.name != "nt":  # (on Windows it would let two servers share the port)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    app = create_server(tools).streamable_http_app(streamable_http_path=path, host=host)
    where = f"[{host}]" if ":" in host else host
    sys.stderr.write(
        f"pi-condense mcp: listening on http://{where}:{sock.getsockname()[1]}{path}\n"
    )
    sys.stderr.flush()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])
