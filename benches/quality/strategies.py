"""The strategies compared, each through the real code users run.

Every strategy takes the full history (Anthropic Messages form) before a model call and returns
the messages it would send, in the same form (peers' formats are converted there and back).
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any, Callable

from pi_condense.replay_log import RecordingSummarizer
from pi_condense.summarize.deterministic import DeterministicSummarizer

from .measure import tokens, wire
from .workload import SYSTEM, TOOLS

Messages = list[dict[str, Any]]


class Strategy:
    """No pruning: the history as it is."""

    name = "none"
    recovers = False

    def prepare(self, history: Messages) -> Messages:
        return history

    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def execute(self, name: str, args: dict[str, Any]) -> str:
        raise KeyError(name)

    def summarizer_inputs(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


class PiCondense(Strategy):
    """pi-condense through its Anthropic Messages hook (``MessagesCondenser``)."""

    recovers = True

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        from pi_condense.integrations.anthropic_messages import MessagesCondenser

        self.name = name
        self._tmp = tempfile.TemporaryDirectory(prefix="pi-condense-quality-")
        self._clock = iter(range(1_780_000_000_000, 1_790_000_000_000, 1000))
        self.summarizer = RecordingSummarizer(DeterministicSummarizer())
        self.hook = MessagesCondenser(
            session=Path(self._tmp.name) / "session.jsonl",
            config={"enabled": True, **config},
            summarizer=self.summarizer,
            cwd=self._tmp.name,
            clock=lambda: next(self._clock),
        )
        self._tools = TOOLS + self.hook.tools

    def prepare(self, history: Messages) -> Messages:
        return self.hook.condense(history, system=SYSTEM)

    def tools(self) -> list[dict[str, Any]]:
        return self._tools

    def execute(self, name: str, args: dict[str, Any]) -> str:
        return self.hook.execute(name, args)

    def summarizer_inputs(self) -> list[str]:
        return [call.prompt for call in self.summarizer.calls]

    def close(self) -> None:
        self.hook.close()
        self._tmp.cleanup()


class AnthropicClearToolUses(Strategy):
    """Anthropic's server-side ``clear_tool_uses_20250919`` with its documented defaults:
    when the request's input exceeds 100,000 tokens, every tool result but those of the 3 most
    recent tool uses is replaced by a placeholder (inputs kept, nothing excluded, no
    clear_at_least). It runs on each request independently; the client keeps the full history."""

    name = "anthropic clear_tool_uses"
    trigger = 100_000
    keep = 3
    placeholder = "[cleared]"

    def prepare(self, history: Messages) -> Messages:
        if tokens(wire(SYSTEM, TOOLS, history)) <= self.trigger:
            return history
        ids = [
            b["id"]
            for m in history
            if m["role"] == "assistant"
            for b in m["content"]
            if b.get("type") == "tool_use"
        ]
        uses = len(ids)
        out = []
        seen = 0
        for m in history:
            if m["role"] == "assistant":
                seen += sum(1 for b in m["content"] if b.get("type") == "tool_use")
                out.append(m)
                continue
            if isinstance(m["content"], list) and uses - seen >= self.keep:
                # the results in this message answer tool uses older than the kept ones
                m = {
                    **m,
                    "content": [
                        {**b, "content": self.placeholder} if b.get("type") == "tool_result" else b
                        for b in m["content"]
                    ],
                }
            out.append(m)
        return out


# ---------------------------------------------------------------- LangChain


def _to_langchain(message: dict[str, Any]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    content = message["content"]
    if message["role"] == "assistant":
        text = "\n".join(b["text"] for b in content if b.get("type") == "text")
        calls = [
            {"id": b["id"], "name": b["name"], "args": b["input"], "type": "tool_call"}
            for b in content
            if b.get("type") == "tool_use"
        ]
        return [AIMessage(content=text, tool_calls=calls)]
    if isinstance(content, str):
        return [HumanMessage(content=content)]
    out: list[Any] = []
    for b in content:
        if b.get("type") == "tool_result":
            out.append(
                ToolMessage(
                    content=_lc_blocks(b["content"]),
                    tool_call_id=b["tool_use_id"],
                    status="error" if b.get("is_error") else "success",
                )
            )
        else:
            out.append(HumanMessage(content=_lc_blocks([b])))
    return out


def _map_blocks(content: Any, image: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """Text blocks as they are, image blocks through ``image``; a string as it is."""
    if isinstance(content, str):
        return content
    return [
        image(b) if b.get("type") == "image" else {"type": "text", "text": b["text"]}
        for b in content
    ]


def _lc_blocks(content: Any) -> Any:
    return _map_blocks(content, lambda b: {
        "type": "image",
        "source_type": "base64",
        "data": b["source"]["data"],
        "mime_type": b["source"]["media_type"],
    })  # fmt: skip


def _blocks_back(content: Any) -> Any:
    return _map_blocks(content, lambda b: {
        "type": "image",
        "source": {"type": "base64", "media_type": b["mime_type"], "data": b["data"]},
    })  # fmt: skip


def _append(out: Messages, role: str, blocks: list[dict[str, Any]]) -> None:
    if out and out[-1]["role"] == role and isinstance(out[-1]["content"], list):
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": list(blocks)})


def _from_langchain(messages: list[Any]) -> Messages:
    out: Messages = []
    for m in messages:
        if m.type == "ai":
            blocks = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
                for c in m.tool_calls
            ]
            _append(out, "assistant", blocks)
        elif m.type == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id,
                "content": _blocks_back(m.content),
            }
            if m.status == "error":
                block["is_error"] = True
            _append(out, "user", [block])
        elif isinstance(m.content, str):
            if out and out[-1]["role"] == "user":
                _append(out, "user", [{"type": "text", "text": m.content}])
            else:
                out.append({"role": "user", "content": m.content})
        else:
            _append(out, "user", _blocks_back(m.content))
    return out


class LangChainClearToolUses(Strategy):
    """``ContextEditingMiddleware(edits=[ClearToolUsesEdit()])`` (its defaults: trigger 100,000
    approximate tokens, keep 3), run through the middleware's own ``wrap_model_call`` on the
    agent's message list, as ``create_agent`` runs it."""

    name = "langchain ClearToolUsesEdit"

    def __init__(self) -> None:
        from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        self.middleware = ContextEditingMiddleware(edits=[ClearToolUsesEdit()])
        self.model = FakeListChatModel(responses=["ok"])
        self.state: list[Any] = []  # the agent's state: messages as LangChain objects
        self._seen = 0

    def prepare(self, history: Messages) -> Messages:
        from langchain.agents.middleware.types import ModelRequest, ModelResponse
        from langchain_core.messages import AIMessage

        for m in history[self._seen :]:
            self.state.extend(_to_langchain(m))
        self._seen = len(history)
        request = ModelRequest(
            model=self.model, messages=self.state, system_prompt=SYSTEM, tools=[]
        )
        captured: list[Any] = []

        def handler(req: Any) -> Any:
            captured.append(list(req.messages))
            return ModelResponse(result=[AIMessage(content="ok")])

        self.middleware.wrap_model_call(request, handler)
        return _from_langchain(captured[0])


# ---------------------------------------------------------------- OpenAI Agents SDK


def _to_responses(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    if message["role"] == "assistant":
        out: list[dict[str, Any]] = []
        text = "\n".join(b["text"] for b in content if b.get("type") == "text")
        if text:
            out.append({"role": "assistant", "content": text})
        for b in content:
            if b.get("type") == "tool_use":
                out.append(
                    {
                        "type": "function_call",
                        "call_id": b["id"],
                        "name": b["name"],
                        "arguments": json.dumps(b["input"]),
                    }
                )
        return out
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out = []
    for b in content:
        if b.get("type") == "tool_result":
            c = b["content"]
            output: Any = c if isinstance(c, str) else [
                {"type": "input_image", "image_url": _data_url(x["source"])}
                if x.get("type") == "image" else {"type": "input_text", "text": x["text"]}
                for x in c
            ]  # fmt: skip
            out.append(
                {"type": "function_call_output", "call_id": b["tool_use_id"], "output": output}
            )
        else:
            out.append({"role": "user", "content": [{"type": "input_text", "text": b["text"]}]})
    return out


def _data_url(source: dict[str, str]) -> str:
    return f"data:{source['media_type']};base64,{source['data']}"


def _source(url: str) -> dict[str, str]:
    head, data = url.split(",", 1)
    return {"type": "base64", "media_type": head[5:].split(";")[0], "data": data}


def _from_responses(items: list[Any]) -> Messages:
    out: Messages = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            _append(
                out,
                "assistant",
                [
                    {
                        "type": "tool_use",
                        "id": item["call_id"],
                        "name": item["name"],
                        "input": json.loads(item["arguments"]),
                    }
                ],
            )
        elif kind == "function_call_output":
            o = item["output"]
            content: Any = o if isinstance(o, str) else [
                {"type": "image", "source": _source(x["image_url"])}
                if x.get("type") == "input_image" else {"type": "text", "text": x["text"]}
                for x in o
            ]  # fmt: skip
            _append(
                out,
                "user",
                [{"type": "tool_result", "tool_use_id": item["call_id"], "content": content}],
            )
        elif item.get("role") == "assistant":
            _append(out, "assistant", [{"type": "text", "text": item["content"]}])
        elif isinstance(item.get("content"), str):
            if out and out[-1]["role"] == "user":
                _append(out, "user", [{"type": "text", "text": item["content"]}])
            else:
                out.append({"role": "user", "content": item["content"]})
        else:
            _append(out, "user", [{"type": "text", "text": x["text"]} for x in item["content"]])
    return out


class AgentsToolOutputTrimmer(Strategy):
    """The Agents SDK's ``ToolOutputTrimmer()`` (defaults: recent_turns 2, max_output_chars
    500, preview_chars 200), called as ``RunConfig.call_model_input_filter`` is."""

    name = "agents ToolOutputTrimmer"

    def __init__(self) -> None:
        from agents.extensions import ToolOutputTrimmer

        self.trimmer = ToolOutputTrimmer()
        self.items: list[dict[str, Any]] = []
        self._seen = 0

    def prepare(self, history: Messages) -> Messages:
        from agents.run_config import CallModelData, ModelInputData

        for m in history[self._seen :]:
            self.items.extend(_to_responses(m))
        self._seen = len(history)
        data = CallModelData(
            model_data=ModelInputData(input=list(self.items), instructions=SYSTEM),
            agent=None,
            context=None,
        )  # type: ignore[arg-type]
        result = self.trimmer(data)
        # is_error does not survive Responses items (they have no such field): restore it so
        # the only difference measured is the trimming
        errors = {
            b["tool_use_id"]
            for m in history
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("is_error")
        }
        out = _from_responses(copy.copy(result.input))
        for m in out:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result" and b["tool_use_id"] in errors:
                    b["is_error"] = True
        return out


PRESETS: dict[str, dict[str, Any]] = {
    "pi-condense defaults": {},
    'pi-condense compat "reference"': {"compat": "reference"},
    "pi-condense batchingMode agent-message": {"batchingMode": "agent-message"},
}


def all_strategies() -> list[Strategy]:
    """A fresh instance of every strategy, no pruning first."""
    return [
        Strategy(),
        *(PiCondense(name, config) for name, config in PRESETS.items()),
        LangChainClearToolUses(),
        AgentsToolOutputTrimmer(),
        AnthropicClearToolUses(),
    ]
