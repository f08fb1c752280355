"""The summarizer contract: what the flush pipeline asks of a model, and what comes back.

A summarizer is one model endpoint. The flush pipeline builds the prompt text (see
`summarize.prompt`), and the call mechanics (timeouts, outage fallback, retries, concurrency;
see `summarize.runner`) drive `Summarizer.complete`. Built-ins: the embedded deterministic
summarizer, the conformance test summarizer, and the OpenAI / Anthropic clients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal, Optional, Protocol, runtime_checkable

from ..errors import CondenseError

RequestKind = Literal["batch", "range"]
ThinkingLevel = Literal["minimal", "low", "medium", "high", "xhigh"]
StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]


@dataclass(frozen=True)
class ModelRef:
    """Identity of a model as Pi's registry names it (`provider/id`, display `name`)."""

    provider: str
    id: str
    name: Optional[str] = None

    @property
    def label(self) -> str:
        """The label the reference uses in messages: the model name, else `provider/id`."""
        return self.name or f"{self.provider}/{self.id}"


@dataclass(frozen=True)
class Cost:
    """Cost of one call in dollars, split as Pi's `usage.cost`."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


@dataclass(frozen=True)
class Usage:
    """Token usage of one call, as Pi's `usage` object."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = field(default_factory=Cost)


@dataclass(frozen=True)
class CompletionRequest:
    """One summarizer call: a single user message holding `prompt`, no system prompt, no tools.

    `thinking` is None for the model's default; `"off"` asks for no reasoning.
    `timestamp` is the epoch-ms clock reading given to the user message.
    """

    prompt: str
    kind: RequestKind
    timestamp: int
    thinking: Optional[str] = None


@dataclass(frozen=True)
class Completion:
    """What a model returned: text blocks joined with "\\n", the stop reason, usage."""

    text: str
    stop_reason: StopReason
    usage: Usage
    model: ModelRef
    error_message: Optional[str] = None


class SummarizerError(CondenseError):
    """A summarizer call failed. `auth` failures never trip the outage fallback."""

    def __init__(self, message: str, *, auth: bool = False) -> None:
        super().__init__(message)
        self.auth = auth


@runtime_checkable
class Summarizer(Protocol):
    """A model endpoint the flush pipeline can ask for summaries.

    `complete` must call `on_event()` for every streamed event (text, thinking or tool-call
    delta; once per response for non-streaming clients) so the idle timer can be reset, and
    must raise `SummarizerError` (or let the SDK's exception through) on failure. It may be
    cancelled (asyncio) by the timeout machinery at any await point.
    """

    @property
    def model(self) -> ModelRef: ...

    async def complete(
        self, request: CompletionRequest, on_event: Callable[[], None]
    ) -> Completion: ...
