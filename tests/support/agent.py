"""Test support: a tiny agent loop that drives a Condenser the way Pi's agent loop does.

Event order per conformance/README.md: a message's ``message_end`` reaches the condenser
before the host appends it; ``turn_end`` carries the per-prompt turn index; the ``context``
event comes before each assistant message.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

from pi_condense.condenser import Condenser
from pi_condense.config import Config
from pi_condense.render import RenderResult
from pi_condense.replay_log import counter_ids
from pi_condense.session import SessionFile
from pi_condense.summarize.base import Completion, CompletionRequest, Cost, ModelRef, Usage

T0 = 1_700_000_000_000


class Clock:
    """A manual epoch-ms clock."""

    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms

    def tick(self, ms: int = 1000) -> int:
        self.ms += ms
        return self.ms


def config(**settings: Any) -> Config:
    """An enabled config (``compat`` may be given as a setting)."""
    return Config.from_settings_dict({"enabled": True, **settings})


def user(text: str, ts: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


Call = tuple[str, str, dict[str, Any]]


def assistant(ts: int, *calls: Call, text: str = "", thinking: str = "") -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking})
    if text:
        content.append({"type": "text", "text": text})
    for call_id, name, args in calls:
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
    return {
        "role": "assistant",
        "content": content,
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": ts,
    }


def result(call_id: str, name: str, text: str, ts: int, is_error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "timestamp": ts,
    }


@dataclass
class ScriptedSummarizer:
    """A summarizer answering with ``answer(prompt)`` (a label per tool by default)."""

    answer: Optional[Callable[[str], Optional[str]]] = None
    usage: Usage = field(default_factory=lambda: Usage(input=10, output=5, cost=Cost(total=0.5)))
    prompts: list[str] = field(default_factory=list)

    @property
    def model(self) -> ModelRef:
        return ModelRef("test", "scripted", "Scripted")

    async def complete(
        self, request: CompletionRequest, on_event: Callable[[], None]
    ) -> Completion:
        on_event()
        self.prompts.append(request.prompt)
        text = (
            self.answer(request.prompt)
            if self.answer is not None
            else label_bullets(request.prompt)
        )
        if text is None:
            return Completion("", "error", self.usage, self.model, "scripted failure")
        return Completion(text, "stop", self.usage, self.model)


def label_bullets(prompt: str) -> str:
    """``- [[N:name]] done`` for every ``[[N:name]] Tool:`` line of a batch prompt."""
    lines = [
        "- " + line.split(" Tool:")[0] + " done"
        for line in prompt.split("\n")
        if line.startswith("[[") and " Tool: " in line
    ]
    return "\n".join(lines) or "- nothing"


class Agent:
    """Appends an agent's messages to ``session`` and sends the events to ``condenser``."""

    def __init__(self, session: SessionFile, condenser: Condenser, clock: Clock) -> None:
        self.session = session
        self.condenser = condenser
        self.clock = clock
        self.turn_index = 0
        self.contexts: list[RenderResult] = []

    @property
    def messages(self) -> list[Any]:
        return self.session.build_context().messages

    async def _deliver(self, message: dict[str, Any]) -> Any:
        outcome = await self.condenser.message_end(message)
        self.session.append_message(message)
        return outcome

    async def prompt(self, text: str) -> None:
        self.turn_index = 0
        await self._deliver(user(text, self.clock.tick()))

    def context(self) -> RenderResult:
        rendered = self.condenser.context(list(self.messages))
        self.contexts.append(rendered)
        return rendered

    async def tools(
        self, calls: Sequence[tuple[str, str, dict[str, Any], str]], text: str = ""
    ) -> Any:
        """One tool turn: context, assistant with the calls, their results, ``turn_end``."""
        self.context()
        message = assistant(self.clock.tick(), *[(c[0], c[1], c[2]) for c in calls], text=text)
        await self._deliver(message)
        results = []
        for call_id, name, _args, output in calls:
            item = result(call_id, name, output, self.clock.tick(10))
            await self._deliver(item)
            results.append(item)
        outcome = await self.condenser.turn_end(message, results, self.turn_index)
        self.turn_index += 1
        return outcome

    async def reply(self, text: str = "done") -> Any:
        """The final answer: context, ``message_end`` (flush), append, ``turn_end``,
        ``agent_end``."""
        self.context()
        message = assistant(self.clock.tick(), text=text)
        outcome = await self._deliver(message)
        await self.condenser.turn_end(message, [], self.turn_index)
        self.condenser.agent_end()
        return outcome


def read_gz(path: Path) -> bytes:
    """The uncompressed bytes of a ``.gz`` file."""
    with gzip.open(path) as handle:
        return handle.read()


def new_session(
    tmp: Optional[Union[str, Path]] = None, clock: Optional[Clock] = None, sid: str = "s1"
) -> SessionFile:
    """A session with counter ids: a file in ``tmp`` when given, else in memory."""
    clock = clock or Clock()
    if tmp is None:
        return SessionFile.in_memory("/w", session_id=sid, clock=clock, id_source=counter_ids())
    return SessionFile.create(
        Path(tmp) / f"{sid}.jsonl", "/w", session_id=sid, clock=clock, id_source=counter_ids()
    )


def custom_entries(session: SessionFile, custom_type: Optional[str] = None) -> list[dict[str, Any]]:
    """The pruner entries of the session (all ``context-prune-*``, or one type), in order."""
    out = []
    for entry in session.entries:
        kind = entry.get("customType")
        if (
            entry.get("type") in ("custom", "custom_message")
            and isinstance(kind, str)
            and kind.startswith("context-prune-")
            and (custom_type is None or kind == custom_type)
        ):
            out.append(entry)
    return out


def pruner_types(session: SessionFile) -> list[str]:
    """The ``customType`` of every pruner entry, in order (short: without the prefix)."""
    return [e["customType"].removeprefix("context-prune-") for e in custom_entries(session)]
