"""The quality benchmark's real-model mode, against a loopback Anthropic Messages server (the
real SDK over real HTTP): the model's tool calls run against pi-condense's session and count."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from support.llm_servers import LoopbackLLMServer, Recorded, Reply

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benches.quality.model import ModelAgent
from benches.quality.strategies import PiCondense
from benches.quality.workload import Fact, Probe


def _model(request: Recorded) -> Reply:
    """Calls context_tree_query for t1 once, then answers with the tool result's text."""
    messages = request.body["messages"]
    last = messages[-1]["content"]
    results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
    if results:
        content: list[dict[str, Any]] = [{"type": "text", "text": str(results[0]["content"])}]
        stop = "end_turn"
    else:
        args = {"toolCallIds": ["t1"]}
        content = [
            {"type": "tool_use", "id": "toolu_q", "name": "context_tree_query", "input": args}
        ]
        stop = "tool_use"
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return Reply(headers={"Content-Type": "application/json"}, body=json.dumps(body).encode())


@pytest.mark.usefixtures("loopback_only")
def test_model_mode_recovers_through_the_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    with LoopbackLLMServer(_model) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        agent = ModelAgent.from_spec("anthropic:m")
        strategy = PiCondense("pi-condense defaults", {})
        try:
            body = "\n".join(f"line {n}" for n in range(300)) + "\nNOTE: the port is P4821Q"
            use = {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a.py"}}
            result = {"type": "tool_result", "tool_use_id": "c1", "content": body}
            history: list[Any] = [
                {"role": "user", "content": "read a.py"},
                {"role": "assistant", "content": [use]},
                {"role": "user", "content": [result]},
                {"role": "assistant", "content": [{"type": "text", "text": "read"}]},
                {"role": "user", "content": "next"},
            ]
            sent = strategy.prepare(history)
            assert "P4821Q" not in json.dumps(sent)
            fact = Fact("k", "P4821Q", "In a.py, what is the port?", "the port", "c1", 0,
                        "tail", 0, "")  # fmt: skip
            assert agent.answer(Probe(fact, 1, ()), sent, strategy) == (True, 1)
        finally:
            strategy.close()
        first = server.requests[0].body
        assert "context_tree_query" in [t["name"] for t in first["tools"]]
        assert "In a.py, what is the port?" in json.dumps(first["messages"][-1])
