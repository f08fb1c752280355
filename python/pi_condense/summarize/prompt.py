"""Summarizer prompts: the wire texts the reference sends to the model (spec 05 section 13).

A batch request is one user message holding :data:`SYSTEM_PROMPT`, then the batch wrapped in
``<tool-call-batch>`` tags; a range-fusion request is :data:`RANGE_SYSTEM_PROMPT`, then the
per-batch summaries wrapped in ``<sub-task-summaries>`` tags. Both texts are part of the
contract: the summaries a model writes from them end up in the model context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Union

from ..js import json as jsjson
from ..js.values import to_string

__all__ = [
    "HEAD_TAIL_CHARS",
    "MAX_RESULT_CHARS",
    "RANGE_SYSTEM_PROMPT",
    "SYSTEM_PROMPT",
    "batch_prompt",
    "range_prompt",
    "serialize_batch",
    "utf16_slice",
]

SYSTEM_PROMPT = (
    "You are summarizing a batch of tool calls made by an AI coding assistant.\n"
    "For each tool call provide:\n"
    "- Tool name and a one-sentence description of what it did\n"
    "- Key outcome, plus any file paths, identifiers, signatures, or error strings copied "
    "verbatim - never reword these\n"
    "- Any findings the future conversation needs to remember\n"
    "\n"
    "Keep each tool call to 1-3 bullet points. Skip calls that succeeded with nothing reusable "
    "to record. Be concise.\n"
    "\n"
    "A result line of the form [image returned: <type> sha256:<hash>] means the tool returned an "
    "image you cannot see: state that an image was returned, and never describe or guess its "
    "content.\n"
    "\n"
    "Begin the first bullet of each tool call with that tool's [[N:toolname]] label, copied "
    "verbatim (both the number and the name) from its line in the input, as the plain, first "
    "thing on the line - no bold, backticks, or list numbering around it. Do not renumber, "
    "rename, or invent labels; if you skip a tool, skip its label too."
)
"""Instructions of a batch summary request (11 lines, no trailing newline; the image paragraph
is pi-condense 2.11.2's)."""

RANGE_SYSTEM_PROMPT = (
    "You are fusing several per-step summaries of one CLOSED sub-task from an AI coding "
    "assistant's history into a SINGLE cohesive summary.\n"
    "- Merge overlapping or repeated information; do not restate each step separately.\n"
    "- Preserve concrete outcomes, decisions, file paths, identifiers, and anything later work "
    "needs to remember.\n"
    "- Keep any reference tokens like `t12` or `b3` intact.\n"
    "- Be concise: a short narrative or a few grouped bullets, not one bullet per step."
)
"""Instructions of a range-fusion request (5 lines, no trailing newline)."""

MAX_RESULT_CHARS = 2000
"""Result texts longer than this many UTF-16 units are cut in the batch serialization (the
reference's cut, kept under ``compat: "reference"``)."""

HEAD_TAIL_CHARS = 4000
"""Ours: a result text longer than twice this many UTF-16 units is sent as its first and its
last this many units around a ``...[N chars truncated]...`` line, so what a log or a file says
at its end (errors, results, totals) reaches the summarizer too."""


class BatchLike(Protocol):
    """What the serialization reads from a captured batch."""

    @property
    def assistant_text(self) -> str: ...

    @property
    def tool_calls(self) -> Sequence[Mapping[str, Any]]: ...


def utf16_slice(text: str, start: int, end: int) -> str:
    """JavaScript ``text.slice(start, end)`` for non-negative indices in UTF-16 units.

    A cut through a surrogate pair leaves a lone surrogate, as in JavaScript.
    """
    if jsjson.utf16_len(text) == len(text):
        return text[start:end]
    units = text.encode("utf-16-le", "surrogatepass")
    return units[2 * start : 2 * end].decode("utf-16-le", "surrogatepass")


def _clip(result_text: str, head_tail: bool) -> str:
    length = jsjson.utf16_len(result_text)
    if head_tail:
        if length <= 2 * HEAD_TAIL_CHARS:
            return result_text
        head = utf16_slice(result_text, 0, HEAD_TAIL_CHARS)
        tail = utf16_slice(result_text, length - HEAD_TAIL_CHARS, length)
        return f"{head}\n...[{length - 2 * HEAD_TAIL_CHARS} chars truncated]...\n{tail}"
    if length <= MAX_RESULT_CHARS:
        return result_text
    head = utf16_slice(result_text, 0, MAX_RESULT_CHARS)
    return f"{head} ...[{length - MAX_RESULT_CHARS} chars truncated]"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else to_string(value)


def serialize_batch(batch: BatchLike, *, head_tail: bool = False) -> str:
    """The reference's ``serializeBatchForSummarizer``: assistant prose, then one labelled part
    per tool call (``[[N:name]] Tool: name(<args, 2-space JSON>)`` and its result). A result is
    cut to its first :data:`MAX_RESULT_CHARS` units, or with ``head_tail`` (ours) to its first
    and last :data:`HEAD_TAIL_CHARS`."""
    parts: list[str] = []
    if batch.assistant_text:
        parts.append(f"Assistant said: {batch.assistant_text}\n")
    tool_parts = []
    for number, call in enumerate(batch.tool_calls, start=1):
        name = _text(call.get("toolName"))
        status = "ERROR" if call.get("isError") else "OK"
        args = jsjson.dumps(call.get("args"), indent=2)
        result = _clip(_text(call.get("resultText", "")), head_tail)
        tool_parts.append(f"[[{number}:{name}]] Tool: {name}({args})\nResult ({status}): {result}")
    parts.append("\n---\n".join(tool_parts))
    return "\n".join(parts)


def batch_prompt(batch: BatchLike, *, head_tail: bool = False) -> str:
    """The full text of a batch summary request (``head_tail``: see :func:`serialize_batch`)."""
    body = serialize_batch(batch, head_tail=head_tail)
    return f"{SYSTEM_PROMPT}\n\n<tool-call-batch>\n{body}\n</tool-call-batch>"


def range_prompt(summaries: Union[str, Sequence[str]]) -> str:
    """The full text of a range-fusion request: the span's per-batch summary texts (in body
    order, joined here with a blank line), or that text already joined."""
    joined = summaries if isinstance(summaries, str) else "\n\n".join(summaries)
    return f"{RANGE_SYSTEM_PROMPT}\n\n<sub-task-summaries>\n{joined}\n</sub-task-summaries>"
