"""Agent loops on the real ``openai`` and ``anthropic`` SDKs, pointed at a base URL (the
proxy), for the three wire formats, streaming or not: call the model, run the ``read`` tool
it asks for, append, repeat until it answers."""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

import anthropic
import openai

from support.hook_runs import QUERY, run_read

READ_PARAMETERS = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = {
    "chat": [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file.",
                "parameters": READ_PARAMETERS,
            },
        }
    ],
    "responses": [
        {
            "type": "function",
            "name": "read",
            "description": "Read a file.",
            "parameters": READ_PARAMETERS,
        }
    ],
    "messages": [{"name": "read", "description": "Read a file.", "input_schema": READ_PARAMETERS}],
}
KEY = "sk-test-5ecret-d0-not-store-7f3a"
"""The client's API key: it must reach the upstream and be kept nowhere."""


Recover = Callable[[str, Any], str]
"""Runs a recovery tool for the client: (name, arguments) -> the result's text."""


class Agent:
    """One conversation through ``base_url`` in wire format ``kind`` (chat, responses,
    messages); ``headers`` go with every request. ``tools`` are offered besides ``read``;
    ``recover`` answers the model's ``context_tree_query`` calls (without it such a call
    fails the test: the proxy should have answered it)."""

    def __init__(
        self,
        kind: str,
        base_url: str,
        system: str,
        *,
        stream: bool = False,
        headers: Optional[dict[str, str]] = None,
        history: Optional[list[Any]] = None,
        timeout: float = 30.0,
        tools: Optional[list[Any]] = None,
        recover: Optional[Recover] = None,
    ) -> None:
        self.kind = kind
        self.tools = TOOLS[kind] + list(tools or [])
        self.recover = recover
        self.system = system
        self.stream = stream
        self.headers = dict(headers or {})
        self.history: list[Any] = list(history or [])
        self.session_ids: list[str] = []
        if kind == "messages":
            self.api: Any = anthropic.Anthropic(
                base_url=base_url, api_key=KEY, max_retries=0, timeout=timeout
            )
        else:
            self.api = openai.OpenAI(
                base_url=base_url + "/v1", api_key=KEY, max_retries=0, timeout=timeout
            )
        if kind == "chat" and not self.history:
            self.history.append({"role": "system", "content": system})

    def prompt(self, text: str, limit: int = 20) -> str:
        """Send ``text`` and run the loop to the model's answer; returns its text."""
        self.history.append({"role": "user", "content": text})
        for _ in range(limit):
            answer, calls = self._call()
            if not calls:
                return answer
            for call_id, name, arguments in calls:
                if name == QUERY and self.recover is not None:
                    parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
                    self._result(call_id, self.recover(name, parsed))
                    continue
                assert name != QUERY, "the client saw a recovery call the proxy should answer"
                self._result(call_id, run_read(arguments))
        raise AssertionError("the loop did not end")

    def _call(self) -> tuple[str, list[tuple[str, str, Any]]]:
        if self.kind == "chat":
            return self._chat()
        if self.kind == "responses":
            return self._responses()
        return self._messages()

    def _note(self, stream_or_raw: Any) -> None:
        """Keep the session id the proxy answered with (a raw response, or an SDK stream)."""
        raw = getattr(stream_or_raw, "response", None) or getattr(stream_or_raw, "_response", None)
        headers = getattr(raw if raw is not None else stream_or_raw, "headers", {})
        self.session_ids.append(headers.get("x-pi-condense-session-id", ""))

    def _chat(self) -> tuple[str, list[tuple[str, str, Any]]]:
        kwargs = {"model": "m", "messages": self.history, "tools": self.tools}
        if self.stream:
            with self.api.chat.completions.stream(**kwargs, extra_headers=self.headers) as s:
                self._note(s)
                final = s.get_final_completion()
        else:
            raw = self.api.chat.completions.with_raw_response.create(
                **kwargs, extra_headers=self.headers
            )
            self._note(raw)
            final = raw.parse()
        message = final.choices[0].message
        item = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [c.to_dict() for c in message.tool_calls]
        self.history.append(item)
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        return message.content or "", calls

    def _responses(self) -> tuple[str, list[tuple[str, str, Any]]]:
        kwargs = {
            "model": "m",
            "instructions": self.system,
            "input": self.history,
            "tools": self.tools,
        }
        if self.stream:
            with self.api.responses.stream(**kwargs, extra_headers=self.headers) as s:
                self._note(s)
                final = s.get_final_response()
        else:
            raw = self.api.responses.with_raw_response.create(**kwargs, extra_headers=self.headers)
            self._note(raw)
            final = raw.parse()
        items = [o.to_dict() for o in final.output]
        self.history.extend(items)
        calls = [
            (o["call_id"], o["name"], o["arguments"]) for o in items if o["type"] == "function_call"
        ]
        return final.output_text, calls

    def _messages(self) -> tuple[str, list[tuple[str, str, Any]]]:
        kwargs = {
            "model": "m",
            "max_tokens": 1024,
            "system": self.system,
            "messages": self.history,
            "tools": self.tools,
        }
        if self.stream:
            with self.api.messages.stream(**kwargs, extra_headers=self.headers) as s:
                self._note(s)
                final = s.get_final_message()
        else:
            raw = self.api.messages.with_raw_response.create(**kwargs, extra_headers=self.headers)
            self._note(raw)
            final = raw.parse()
        blocks = [b.to_dict() for b in final.content]
        self.history.append({"role": "assistant", "content": blocks})
        calls = [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        return text, calls

    def _result(self, call_id: str, text: str) -> None:
        if self.kind == "chat":
            self.history.append({"role": "tool", "tool_call_id": call_id, "content": text})
        elif self.kind == "responses":
            self.history.append(
                {"type": "function_call_output", "call_id": call_id, "output": text}
            )
        else:
            block = {"type": "tool_result", "tool_use_id": call_id, "content": text}
            last = self.history[-1]
            if last["role"] == "user" and isinstance(last["content"], list):
                last["content"].append(block)
            else:
                self.history.append({"role": "user", "content": [block]})


def dumped(history: list[Any]) -> str:
    return json.dumps(history)
