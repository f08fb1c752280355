"""Replay plumbing: a frozen clock, counter ids, call logs.

Used by :mod:`pi_condense.replay`; the logs serialize to the conformance vectors' formats
(``contexts.jsonl`` pool encoding, ``summarizer.jsonl``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from .js import json as jsjson
from .js import time as jstime
from .summarize.base import Completion, CompletionRequest, ModelRef, Summarizer
from .summarize.conformance import prompt_kind

__all__ = [
    "CONTEXT_WINDOW",
    "CallSize",
    "ContextLog",
    "FrozenClock",
    "RecordingSummarizer",
    "SummarizerCall",
    "array_chars",
    "counter_ids",
    "iso_ms",
]

CONTEXT_WINDOW = 200000
"""The model window the replay reports context usage against."""

Number = Union[int, float]


# --------------------------------------------------------------------------------- clock, ids


class FrozenClock:
    """A clock that only moves when told to (epoch ms); callable like ``Date.now``."""

    def __init__(self, ms: Number = 0) -> None:
        self.ms: Number = ms

    def __call__(self) -> int:
        ms = self.ms
        if type(ms) is int:
            return ms
        return int(ms) if float(ms).is_integer() else ms  # type: ignore[return-value]

    def set(self, ms: Optional[Number]) -> None:
        """Freeze the clock at ``ms`` (ignored when None or not finite)."""
        if ms is not None and math.isfinite(ms):
            self.ms = ms


def counter_ids(start: int = 0) -> Callable[[], str]:
    """An id source giving ``start + 1``, ``start + 2``, ... as 8 lowercase hex digits."""
    counter = start

    def next_id() -> str:
        nonlocal counter
        counter += 1
        return f"{counter:08x}"

    return next_id


def iso_ms(value: Any) -> Optional[Number]:
    if not isinstance(value, str):
        return None
    ms = jstime.date_parse(value)
    return ms if math.isfinite(ms) else None


def number(value: Any) -> Optional[Number]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


_OVERSIZED = "pruner: skipped pruning turn "
_DEDUPED = "pruner: deduplicated "


def batch_notice(message: str) -> Optional[str]:
    """The batch outcome a condenser notification tells, if any: ``"trivial"`` (under
    ``minBatchChars``), ``"oversized"`` or ``"deduped"``."""
    if message.startswith(_OVERSIZED):
        return "trivial" if "minBatchChars=" in message else "oversized"
    if message.startswith(_DEDUPED) and "(turn " in message:
        return "deduped"
    return None


# -------------------------------------------------------------------------------- recording


@dataclass
class SummarizerCall:
    """One summarizer call: ``kind`` as the vectors classify the prompt, and the output."""

    kind: str
    prompt: str
    output: Optional[str] = None


class RecordingSummarizer:
    """A summarizer wrapper that logs every call (in call order) for ``summarizer.jsonl``.

    Without ``keep_text`` a call's prompt and output are not kept (logged as ``""`` and None):
    for a replay that writes no call log, where every batch's prompt would be held to the end.
    """

    def __init__(self, inner: Summarizer, *, keep_text: bool = True) -> None:
        self.inner = inner
        self.keep_text = keep_text
        self.calls: list[SummarizerCall] = []

    @property
    def model(self) -> ModelRef:
        """The wrapped summarizer's model."""
        return self.inner.model

    async def complete(
        self, request: CompletionRequest, on_event: Callable[[], None]
    ) -> Completion:
        """Forward to the wrapped summarizer; a failed call is not logged."""
        keep = self.keep_text
        call = SummarizerCall(prompt_kind(request.prompt), request.prompt if keep else "")
        self.calls.append(call)
        try:
            completion = await self.inner.complete(request, on_event)
        except BaseException:
            self.calls.remove(call)
            raise
        if keep:
            call.output = completion.text
        return completion

    def jsonl(self) -> str:
        """The log as the vectors' ``summarizer.jsonl``: ``{n, kind, prompt, output}`` lines."""
        return "".join(
            jsjson.dumps({"n": n, "kind": c.kind, "prompt": c.prompt, "output": c.output}) + "\n"
            for n, c in enumerate(self.calls)
        )


@dataclass(frozen=True)
class CallSize:
    """Size of one LLM call's context: UTF-16 length of the JSON array before and after."""

    before: int
    after: int
    changed: bool


def array_chars(lengths: Sequence[int]) -> int:
    return sum(lengths) + max(len(lengths) - 1, 0) + 2


class ContextLog:
    """Every ``context`` call, pool-encoded as the vectors' ``contexts.jsonl`` (optional)."""

    def __init__(self, keep_pool: bool = True) -> None:
        self.keep_pool = keep_pool
        self.lines: list[str] = []
        self.sizes: list[CallSize] = []
        self._pool: dict[str, int] = {}

    def _key(self, text: str) -> int:
        key = self._pool.get(text)
        if key is None:
            key = len(self._pool)
            self._pool[text] = key
            self.lines.append(jsjson.dumps({"p": key, "json": text}))
        return key

    def record(
        self,
        *,
        entries: int,
        next_timestamp: Any,
        changed: bool,
        inputs: Sequence[str],
        outputs: Sequence[str],
        input_chars: int,
        output_lengths: Optional[Sequence[int]],
        output_chars: Optional[int] = None,
    ) -> None:
        """Log one call from the JSON texts of its input and output messages.

        Without a pool, ``output_chars`` (the output array's length) may stand in for
        ``output_lengths`` (then None) and ``outputs``.
        """
        if output_lengths is not None:
            after = array_chars(output_lengths)
        elif output_chars is not None and not self.keep_pool:
            after = output_chars
        else:
            raise ValueError("record: output_lengths are needed (or output_chars without a pool)")
        self.sizes.append(CallSize(input_chars, after, changed))
        if not self.keep_pool:
            return
        full = "[" + ",".join(outputs) + "]"
        head = {
            "call": len(self.sizes) - 1,
            "changed": changed,
            "entries": entries,
            "nextAssistantTimestamp": next_timestamp,
            "outChars": after,
            "outSha256": hashlib.sha256(full.encode("utf-8")).hexdigest(),
            "in": [self._key(text) for text in inputs],
            "out": [self._key(text) for text in outputs],
        }
        self.lines.append(jsjson.dumps(head))

    def jsonl(self) -> str:
        """The ``contexts.jsonl`` text."""
        return "".join(line + "\n" for line in self.lines)
