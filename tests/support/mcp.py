"""`pi-condense mcp` as a real server (a subprocess, over stdio or streamable HTTP), driven
by the MCP SDK's own client from synchronous test code."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Union

import anyio.from_thread
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

MCP = [sys.executable, "-m", "pi_condense", "mcp"]


def child_env(agent_dir: Path) -> dict[str, str]:
    """What the server process needs of this one: the package (PYTHONPATH in a checkout) and
    an agent dir of its own (no developer settings)."""
    env = {"PI_CODING_AGENT_DIR": str(agent_dir)}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


class McpClient:
    """A connected :class:`mcp.Client` whose calls block (an anyio portal runs its loop)."""

    def __init__(self, portal: Any, client: Client) -> None:
        self.portal = portal
        self.client = client

    def tools(self) -> list[Any]:
        result = self.portal.call(self.client.list_tools)
        return list(result.tools)

    def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        call = functools.partial(self.client.call_tool, name, arguments)
        result = self.portal.call(call)
        assert isinstance(result, CallToolResult)
        return result

    def execute(self, name: str, arguments: Any) -> str:
        """The text the model gets (one text block, as the in-process tools give)."""
        result = self.call(name, arguments)
        assert not result.is_error, text(result)
        return text(result)


def text(result: CallToolResult) -> str:
    (block,) = [b for b in result.content if isinstance(b, TextContent)]
    return block.text


@contextmanager
def connect(server: Union[StdioServerParameters, str]) -> Iterator[McpClient]:
    with ExitStack() as stack:
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        client = stack.enter_context(
            portal.wrap_async_context_manager(Client(server, read_timeout_seconds=60))
        )
        yield McpClient(portal, client)


def stdio(args: list[str], agent_dir: Path) -> StdioServerParameters:
    """``pi-condense mcp ARGS`` started by the client over stdio."""
    return StdioServerParameters(command=MCP[0], args=[*MCP[1:], *args], env=child_env(agent_dir))


@contextmanager
def http_server(args: list[str], agent_dir: Path) -> Iterator[str]:
    """``pi-condense mcp --transport http --port 0 ARGS`` running; yields its URL."""
    proc = subprocess.Popen(
        [*MCP, "--transport", "http", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **child_env(agent_dir)},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        prefix = "pi-condense mcp: listening on "
        assert line.startswith(prefix), line + proc.stderr.read()
        yield line[len(prefix) :].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()
