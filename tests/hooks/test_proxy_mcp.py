"""The proxy and the MCP server together, as a client that loads ``pi-condense mcp`` uses
them: ``pi-condense proxy --recovery client`` and ``pi-condense mcp`` as real processes over
the same sessions directory (the proxy's default one: neither is told where it is), the real
``openai`` / ``anthropic`` SDKs as the client's model API, the MCP SDK's client as its MCP
host, and a loopback upstream whose scripted model checks every request as the provider's
API does (tests/support/proxy_wire.py).

The model calls ``context_tree_query`` with a ref it finds in the condensed context; the
proxy passes the call on; the client runs it on the MCP server and sends the result back
through the proxy; the upstream receives the original output byte for byte."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pi_condense.session import SessionFile
from support.hook_runs import QUERY, Script, chars, check_queries
from support.llm_servers import LoopbackLLMServer
from support.mcp import child_env, connect, stdio
from support.proxy import proxy_process
from support.proxy_agents import Agent
from support.proxy_wire import WireModel

pytestmark = pytest.mark.usefixtures("loopback_only")


def offered(kind: str, tool: Any) -> dict[str, Any]:
    """An MCP tool as the client offers it to the model in wire format ``kind``."""
    if kind == "chat":
        function = {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        }
        return {"type": "function", "function": function}
    if kind == "responses":
        return {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        }
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


@pytest.mark.parametrize(
    ("kind", "stream"), [("chat", False), ("responses", True), ("messages", True)]
)
def test_a_recovery_through_the_clients_mcp_server_comes_back_byte_exact(
    tmp_path: Path, kind: str, stream: bool
) -> None:
    agent_dir = tmp_path / "agent"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_CONDENSE_")}
    env.update(child_env(agent_dir))
    script = Script(turns=3, query_prompt=3)
    model = WireModel(kind, lambda body: script)
    sessions = agent_dir / "sessions" / "--pi-condense-proxy--"
    answers: list[str] = []
    sessions.mkdir(parents=True)  # the proxy has run on this machine before
    with LoopbackLLMServer(model) as upstream:
        base = upstream.url + "/v1"
        args = ["--recovery", "client", "--openai-base-url", base, "--anthropic-base-url", base]
        mcp_server = stdio([], agent_dir)
        mcp_server.env = env
        with proxy_process(args, env) as url, connect(mcp_server) as mcp:
            tools = mcp.tools()
            assert QUERY in [t.name for t in tools]

            def recover(name: str, arguments: Any) -> str:
                answers.append(mcp.execute(name, arguments))
                return answers[-1]

            agent = Agent(
                kind,
                url,
                "You are careful.",
                stream=stream,
                tools=[offered(kind, t) for t in tools],
                recover=recover,
            )
            for p in range(6):
                assert agent.prompt(f"task {p}: read the files") == f"done {p}"

    assert model.violations == []
    # one recovery, run by the client on the MCP server: the upstream got the original
    # output byte for byte, and it is the MCP server's answer as it came
    assert check_queries(script, model.pairs) == 1
    assert len(answers) == 1
    ((ref, _path),) = script.queries
    assert QUERY in json.dumps(agent.history)
    results = [pair.result for pairs in model.pairs for pair in pairs if pair.name == QUERY]
    assert results[0] == answers[0]
    assert answers[0].startswith(f"## toolRef: {ref}\n")
    # the proxy offered no tool of its own: the model's tools are the client's, as it sent them
    served = ["read", *(t.name for t in tools)]
    for body in model.bodies:
        names = [t["function"]["name"] if kind == "chat" else t["name"] for t in body["tools"]]
        assert names == served
    # condensed all the same
    assert chars(model.requests[-1:]) < 0.5 * len(json.dumps(agent.history))
    # one conversation, one session file, which holds the recovery as the client's own
    # tool call and result
    (path,) = sorted(sessions.glob("*.jsonl"))
    messages = [e["message"] for e in SessionFile.load(path).branch() if e["type"] == "message"]
    calls = [
        block["id"]
        for m in messages
        if m["role"] == "assistant"
        for block in m["content"]
        if block.get("type") == "toolCall" and block["name"] == QUERY
    ]
    assert len(calls) == 1
    (result,) = [m for m in messages if m["role"] == "toolResult" and m["toolCallId"] == calls[0]]
    assert result["content"] == [{"type": "text", "text": answers[0]}]
