"""The conformance summarizer: the replay vectors' fake model, reproduced exactly.

The TypeScript reference's conformance vectors were produced with a fake summarizer model whose
output is a pure function of the prompt (conformance/README.md, "The fake summarizer"). With
this summarizer and the replay event model (:mod:`pi_condense.replay`), a replay of the vectors'
input reproduces their session, contexts and summarizer log byte for byte.

Output grammar:

- range prompt (holds ``<sub-task-summaries>``): ``Fused range summary (oracle fake): <n> bullet
  lines.`` then ``Refs: ...`` (distinct `` `tN` `` / `` `bN` `` tokens of the body, first-seen
  order, or ``none``), then the first 120 code points of the first ``- `` line of the body;
- otherwise, per ``[[N:name]] Tool: `` line, one bullet ``- [[N:name]] name STATUS: <first 80
  code points of the first later "Result (OK|ERROR): ..." line's rest, or "(empty)">``, joined
  with ``"\\n"``; ``- (no tool calls found)`` when there is none.

JavaScript regex semantics are kept: ``.`` does not match ``\\r``, U+2028 or U+2029, and ``$`` is
the end of the line (no multiline flag), so a ``Result`` line holding one of those characters does
not match and the search goes on. "Code points" are JS ``Array.from`` elements: a surrogate pair
is one, a lone surrogate is one.

Usage: input = number of prompt lines, output = number of output lines, total = their sum, every
cache and cost field 0; stop reason ``stop``.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Literal

from .base import Completion, CompletionRequest, Cost, ModelRef, Usage

__all__ = [
    "FAKE_MODEL",
    "ConformanceSummarizer",
    "PromptKind",
    "fake_assistant_message",
    "fake_summarize",
    "prompt_kind",
]

PromptKind = Literal["batch", "range", "other"]
"""How the replay's summarizer log classifies a prompt."""

FAKE_MODEL: dict[str, Any] = {
    "id": "oracle-fake-summarizer",
    "name": "Oracle Fake Summarizer",
    "api": "oracle-fake",
    "provider": "oracle",
    "baseUrl": "http://oracle.invalid",
    "reasoning": False,
    "input": ["text"],
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    "contextWindow": 200000,
    "maxTokens": 8192,
}
"""The fake model's description, as the vectors' ``meta.json`` records it (Pi ``Model`` shape)."""

_RANGE_TAG = "<sub-task-summaries>"
_RANGE_OPEN = "<sub-task-summaries>\n"
_RANGE_CLOSE = "\n</sub-task-summaries>"
_BATCH_TAG = "<tool-call-batch>"

_LABEL = re.compile(r"\[\[([0-9]+):([^\]\n]+)\]\] Tool: ")
# JS /^Result \((OK|ERROR)\): (.*)$/ without flags: "." excludes every line terminator.
_RESULT = re.compile("Result \\((OK|ERROR)\\): ([^\n\r\u2028\u2029]*)")
_REF = re.compile(r"`([tb][0-9]+)`")


def _code_points(text: str, count: int) -> str:
    """The first ``count`` elements of JS ``Array.from(text)``, joined."""
    if len(text) <= count:
        return text
    end = 0
    taken = 0
    size = len(text)
    while end < size and taken < count:
        if (
            "\ud800" <= text[end] <= "\udbff"
            and end + 1 < size
            and "\udc00" <= text[end + 1] <= "\udfff"
        ):
            end += 2
        else:
            end += 1
        taken += 1
    return text[:end]


def prompt_kind(prompt: str) -> PromptKind:
    """``range`` for a fusion prompt, ``batch`` for a tool-call batch, else ``other``."""
    if _RANGE_TAG in prompt:
        return "range"
    return "batch" if _BATCH_TAG in prompt else "other"


def _fuse(prompt: str) -> str:
    start = prompt.find(_RANGE_OPEN)
    end = prompt.rfind(_RANGE_CLOSE)
    body = (
        prompt[start + len(_RANGE_OPEN) : end]
        if start >= 0 and end >= start + len(_RANGE_OPEN)
        else ""
    )
    bullets = [line for line in body.split("\n") if line.startswith("- ")]
    refs: list[str] = []
    for match in _REF.finditer(body):
        if match.group(1) not in refs:
            refs.append(match.group(1))
    listed = ", ".join(f"`{ref}`" for ref in refs) or "none"
    text = f"Fused range summary (oracle fake): {len(bullets)} bullet lines.\nRefs: {listed}"
    if bullets:
        text += "\n" + _code_points(bullets[0], 120)
    return text


def _bullets(prompt: str) -> str:
    lines = prompt.split("\n")
    bullets: list[str] = []
    for i, line in enumerate(lines):
        label = _LABEL.match(line)
        if label is None:
            continue
        status, rest = "OK", ""
        for later in lines[i + 1 :]:
            result = _RESULT.fullmatch(later)
            if result is not None:
                status, rest = result.group(1), result.group(2)
                break
        number, name = label.group(1), label.group(2)
        snippet = _code_points(rest, 80) or "(empty)"
        bullets.append(f"- [[{number}:{name}]] {name} {status}: {snippet}")
    return "\n".join(bullets) if bullets else "- (no tool calls found)"


def fake_summarize(prompt: str) -> str:
    """The fake model's output for ``prompt`` (a pure function; see the module docstring)."""
    return _fuse(prompt) if _RANGE_TAG in prompt else _bullets(prompt)


def _usage(prompt: str, text: str) -> Usage:
    lines_in = prompt.count("\n") + 1
    lines_out = text.count("\n") + 1
    return Usage(
        input=lines_in,
        output=lines_out,
        cache_read=0,
        cache_write=0,
        total_tokens=lines_in + lines_out,
        cost=Cost(),
    )


def fake_assistant_message(prompt: str, timestamp: int) -> dict[str, Any]:
    """The complete Pi ``AssistantMessage`` the fake model returns for ``prompt``.

    ``timestamp`` is the (frozen) clock reading at the call.
    """
    text = fake_summarize(prompt)
    usage = _usage(prompt, text)
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": FAKE_MODEL["api"],
        "provider": FAKE_MODEL["provider"],
        "model": FAKE_MODEL["id"],
        "usage": {
            "input": usage.input,
            "output": usage.output,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": usage.total_tokens,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "stop",
        "timestamp": timestamp,
    }


class ConformanceSummarizer:
    """The vectors' fake summarizer model (``oracle/oracle-fake-summarizer``), offline.

    ``clock`` (epoch ms) stamps :attr:`last_message`, the full Pi message of the last call;
    by default the request's own timestamp (the frozen clock of a replay) is used.
    """

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock
        self._model = ModelRef(
            provider=FAKE_MODEL["provider"], id=FAKE_MODEL["id"], name=FAKE_MODEL["name"]
        )
        self.last_message: dict[str, Any] | None = None

    @property
    def model(self) -> ModelRef:
        """``oracle/oracle-fake-summarizer`` ("Oracle Fake Summarizer")."""
        return self._model

    @property
    def description(self) -> dict[str, Any]:
        """The full model description (a copy of :data:`FAKE_MODEL`)."""
        return dict(FAKE_MODEL)

    async def complete(
        self, request: CompletionRequest, on_event: Callable[[], None]
    ) -> Completion:
        """Answer ``request`` with the fake model's output (never fails, never waits)."""
        on_event()
        timestamp = self._clock() if self._clock is not None else request.timestamp
        message = fake_assistant_message(request.prompt, timestamp)
        self.last_message = message
        text = message["content"][0]["text"]
        return Completion(
            text=text,
            stop_reason="stop",
            usage=_usage(request.prompt, text),
            model=self._model,
        )
