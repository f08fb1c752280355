"""Real-model mode (``--model openai:MODEL`` or ``--model anthropic:MODEL``): a model, not the
scripted agent, answers each probe.

The model gets the request the strategy would send (system prompt, messages) with the probe's
question added to the last user message, and, for pi-condense strategies, the recovery tools;
every tool call it makes is run against the strategy's session and counted as an extra call
(at most :data:`~benches.quality.agent.MAX_CALLS`). A probe succeeds when the final answer
holds the planted value. Needs the SDK's key (``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``) and
the network; not run in CI. Tool definitions of the workload's own tools are not sent: the
model is asked to answer, not to act.
"""

from __future__ import annotations

import json
from typing import Any

from .agent import MAX_CALLS
from .strategies import Strategy, _to_responses
from .workload import SYSTEM, Probe

ASK = (
    "Side question (answer it, then stop): {question} Reply with the value only. If it is not "
    "in the conversation, use the tools you have to find it; if you cannot, reply UNKNOWN."
)


def _with_question(messages: list[dict[str, Any]], question: str) -> list[dict[str, Any]]:
    out = [dict(m) for m in messages]
    last = out[-1]
    text = {"type": "text", "text": ASK.format(question=question)}
    if last["role"] == "user":
        content = last["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        last["content"] = [*blocks, text]
    else:
        out.append({"role": "user", "content": [text]})
    return out


class ModelAgent:
    """Answers probes with a model through its provider's SDK."""

    def __init__(self, provider: str, model: str) -> None:
        if provider not in ("openai", "anthropic"):
            raise SystemExit(f"--model: unknown provider {provider!r} (openai or anthropic)")
        self.provider, self.model = provider, model
        if provider == "anthropic":
            import anthropic

            self.client: Any = anthropic.Anthropic()
        else:
            import openai

            self.client = openai.OpenAI()

    @classmethod
    def from_spec(cls, spec: str) -> ModelAgent:
        provider, _, model = spec.partition(":")
        if not model:
            raise SystemExit(f"--model {spec!r}: expected openai:MODEL or anthropic:MODEL")
        return cls(provider, model)

    def answer(
        self, probe: Probe, sent: list[dict[str, Any]], strategy: Strategy
    ) -> tuple[bool, int]:
        """(found, extra tool calls) for ``probe`` asked on the request ``sent``."""
        messages = _with_question(sent, probe.fact.question)
        if self.provider == "anthropic":
            return self._anthropic(probe, messages, strategy)
        return self._openai(probe, messages, strategy)

    def _anthropic(
        self, probe: Probe, messages: list[dict[str, Any]], strategy: Strategy
    ) -> tuple[bool, int]:
        tools = strategy.tools()[5:] if strategy.recovers else []  # the recovery tools only
        calls = 0
        while True:
            reply = self.client.messages.create(
                model=self.model, max_tokens=512, system=SYSTEM, messages=messages, tools=tools
            )
            blocks = [b.model_dump(exclude_none=True) for b in reply.content]
            uses = [b for b in blocks if b["type"] == "tool_use"]
            text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
            if not uses or calls >= MAX_CALLS:
                return probe.fact.answer in text, calls
            messages = [*messages, {"role": "assistant", "content": blocks}]
            results = []
            for use in uses:
                calls += 1
                out = strategy.execute(use["name"], use["input"])
                results.append({"type": "tool_result", "tool_use_id": use["id"], "content": out})
            messages.append({"role": "user", "content": results})

    def _openai(
        self, probe: Probe, messages: list[dict[str, Any]], strategy: Strategy
    ) -> tuple[bool, int]:
        items = [item for m in messages for item in _to_responses(m)]
        tools = []
        if strategy.recovers:
            tools = [
                {"type": "function", "name": t["name"], "description": t.get("description", ""),
                 "parameters": t["input_schema"]}
                for t in strategy.tools()[5:]
            ]  # fmt: skip
        calls = 0
        while True:
            reply = self.client.responses.create(
                model=self.model, instructions=SYSTEM, input=items, tools=tools
            )
            uses = [o for o in reply.output if o.type == "function_call"]
            if not uses or calls >= MAX_CALLS:
                return probe.fact.answer in (reply.output_text or ""), calls
            for use in uses:
                calls += 1
                out = strategy.execute(use.name, json.loads(use.arguments or "{}"))
                items.append({"type": "function_call", "call_id": use.call_id,
                              "name": use.name, "arguments": use.arguments})  # fmt: skip
                items.append({"type": "function_call_output", "call_id": use.call_id,
                              "output": out})  # fmt: skip
