"""The embedded default summarizer: rule-based, offline, free.

It reads the prompts the flush pipeline builds (spec 05 section 13) and answers without a model:

- a batch prompt (``<tool-call-batch>``, one ``[[N:tool]] Tool: name(args)`` section per call
  with its ``Result (OK|ERROR): text``) gets one bullet per tool call, starting with the call's
  ``[[N:tool]]`` label (so the pipeline turns it into the call's ``tN`` ref): the tool name, its
  key arguments (path, command, pattern, url, ...), the status and the size of the output, then
  the first meaningful output lines and any error lines, within a budget proportional to the
  output so the summary stays a fraction of the raw text;
- a range-fusion prompt (``<sub-task-summaries>``) gets a compact merge: the distinct bullet
  lines of the per-step summaries (capped), and every `` `tN` `` / `` `bN` `` ref they hold.

The model is ``pi-condense/deterministic``; usage is reported as zero tokens and zero cost.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import JsonError
from ..js import json as jsjson
from .base import Completion, CompletionRequest, ModelRef, Usage

__all__ = ["DeterministicSummarizer", "summarize_batch_prompt", "summarize_range_prompt"]

_BATCH_OPEN = "<tool-call-batch>\n"
_BATCH_CLOSE = "\n</tool-call-batch>"
_RANGE_OPEN = "<sub-task-summaries>\n"
_RANGE_CLOSE = "\n</sub-task-summaries>"

_LABEL = re.compile(r"\[\[([0-9]+):([^\]\n]+)\]\] Tool: ")
_RESULT = re.compile(r"\nResult \((OK|ERROR)\): ")
_TRUNCATED = re.compile(r" \.\.\.\[([0-9]+) chars truncated\]\Z")
_CUT_MIDDLE = re.compile(r"\n\.\.\.\[([0-9]+) chars truncated\]\.\.\.\n")
_ERROR_WORD_LIST = (
    "error",
    "exception",
    "traceback",
    "fail",
    "fatal",
    "panic",
    "denied",
    "not found",
    "no such",
    "cannot",
    "can't",
    "unable",
    "invalid",
    "undefined",
)
_ERROR_WORDS = re.compile("|".join(map(re.escape, _ERROR_WORD_LIST)), re.IGNORECASE)
_ERRNO = re.compile(r"\bE[A-Z]{3,}\b")
_THREE_WORD_CHARS = re.compile(r"[A-Za-z0-9](?:[^A-Za-z0-9]*+[A-Za-z0-9]){2}")
_REF = re.compile(r"`([tb][0-9]+)`")
_SPACE = re.compile(r"\s+")

# Arguments worth naming in a bullet, most telling first.
_KEY_ARGS = (
    "path",
    "file_path",
    "filePath",
    "file",
    "paths",
    "command",
    "cmd",
    "pattern",
    "query",
    "url",
    "glob",
    "include",
    "directory",
    "dir",
    "cwd",
    "offset",
    "limit",
    "toolCallIds",
)
_CODE_ARGS = frozenset({"command", "cmd", "pattern"})
_MAX_KEY_ARGS = 3
_ARG_CHARS = 80
_LINE_CHARS = 110
_MAX_DETAIL_LINES = 3
_TOOL_BUDGET_MAX = 420
_TOOL_BUDGET_MIN = 180
_SMALL_OUTPUT = 120
_RANGE_BULLETS = 12
_FOOTER_MARK = "**Summarized tool refs**"
_RANGE_LINE_CHARS = 180


@dataclass(frozen=True)
class _Call:
    number: str
    label_name: str
    name: str
    args: Any
    status: str
    result: str
    raw_chars: int


def _clip(text: str, limit: int) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _size(chars: int) -> str:
    if chars < 1000:
        return f"{chars} chars"
    return f"{chars / 1000:.1f}k chars"


def _between(text: str, start: str, end: str) -> Optional[str]:
    a = text.find(start)
    b = text.rfind(end)
    if a < 0 or b < a + len(start):
        return None
    return text[a + len(start) : b]


def _split_calls(body: str) -> list[tuple[str, str, str]]:
    """(number, label name, section text) per tool call, numbered 1, 2, 3... in order.

    A line that looks like a label but does not carry the next number belongs to the output
    of the call before it.
    """
    starts: list[tuple[int, str, str]] = []
    expected = 1
    offset = 0
    for line in body.split("\n"):
        match = _LABEL.match(line)
        if match is not None and match.group(1) == str(expected):
            starts.append((offset, match.group(1), match.group(2)))
            expected += 1
        offset += len(line) + 1
    sections: list[tuple[str, str, str]] = []
    for i, (start, number, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(body)
        section = body[start:end]
        if i + 1 < len(starts) and section.endswith("\n---\n"):
            section = section[: -len("\n---\n")]
        sections.append((number, name, section))
    return sections


def _parse_call(number: str, label_name: str, section: str) -> _Call:
    header_end = section.find(" Tool: ") + len(" Tool: ")
    result = _RESULT.search(section)
    if result is None:
        head, status, text = section[header_end:], "OK", ""
    else:
        head, status, text = (
            section[header_end : result.start()],
            result.group(1),
            section[result.end() :],
        )
    name, _, args_text = head.partition("(")
    if args_text.endswith(")"):
        args_text = args_text[:-1]
    try:
        args: Any = jsjson.loads(args_text) if args_text else {}
    except JsonError:
        args = args_text
    raw_chars = len(text)
    truncated = _TRUNCATED.search(text)
    middle = _CUT_MIDDLE.search(text)
    if truncated is not None:
        text = text[: truncated.start()]
        raw_chars = len(text) + int(truncated.group(1))
    elif middle is not None:  # ours: the head and the tail of the output, cut between them
        text = text[: middle.start()] + "\n" + text[middle.end() :]
        raw_chars = len(text) - 1 + int(middle.group(1))
    return _Call(number, label_name, name.strip() or label_name, args, status, text, raw_chars)


def _scalar(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, list) and value and all(isinstance(v, (str, int, float)) for v in value):
        return ",".join(str(v) for v in value)
    return None


def _key_args(args: Any) -> str:
    if not isinstance(args, dict):
        return _clip(str(args), _ARG_CHARS) if args else ""
    shown: list[str] = []
    for key in _KEY_ARGS:
        if len(shown) == _MAX_KEY_ARGS:
            break
        value = _scalar(args.get(key))
        if value is None or value == "":
            continue
        if key in _CODE_ARGS:
            first = value.split("\n", 1)[0]
            shown.append(f"`{_clip(first, _ARG_CHARS).replace('`', chr(39))}`")
        else:
            shown.append(f"{key}={_clip(value, _ARG_CHARS)}")
    if not shown:
        for key, raw in args.items():
            value = _scalar(raw)
            if value is not None and 0 < len(value) <= 40 and "\n" not in value:
                shown.append(f"{key}={value}")
            if len(shown) == 2:
                break
    return ", ".join(shown)


def _is_error_line(line: str) -> bool:
    if line.isascii():  # as _ERROR_WORDS matches it, many times faster: its lower case
        lowered = line.lower()
        if any(word in lowered for word in _ERROR_WORD_LIST):
            return True
        return "E" in line and _ERRNO.search(line) is not None
    return _ERROR_WORDS.search(line) is not None or _ERRNO.search(line) is not None


def _may_hold_errors(text: str) -> bool:
    """False only when no line of ``text`` is an error line (a quick test of the whole text:
    neither pattern matches across a line break nor in the whitespace a line's strip removes;
    ASCII text is matched without case as its lower case, the rest line by line)."""
    if not text.isascii():
        return True
    lowered = text.lower()
    if any(word in lowered for word in _ERROR_WORD_LIST):
        return True
    return "E" in text and _ERRNO.search(text) is not None


def _meaningful(line: str) -> bool:
    """At least three ASCII letters or digits."""
    return _THREE_WORD_CHARS.search(line) is not None


def _detail_lines(call: _Call) -> list[str]:
    """The first two meaningful lines and the meaningful error lines (errors first for a
    failed call), distinct, at most three."""
    lines = [line.strip() for line in call.result.split("\n")]
    first: list[str] = []
    for line in lines:
        if _meaningful(line):
            first.append(line)
            if len(first) == 2:
                break
    errors: Iterable[str] = ()
    if _may_hold_errors(call.result):
        errors = (line for line in lines if _meaningful(line) and _is_error_line(line))
    picked: list[str] = []
    ordered = (
        itertools.chain(errors, first) if call.status == "ERROR" else itertools.chain(first, errors)
    )
    for line in ordered:
        if line not in picked:
            picked.append(line)
        if len(picked) == _MAX_DETAIL_LINES:
            break
    return picked


def _bullet(call: _Call, budget: int) -> str:
    label = f"[[{call.number}:{call.label_name}]]"
    keys = _key_args(call.args)
    head = f"- {label} {call.name}{' ' + keys if keys else ''} -> {call.status}"
    if call.raw_chars == 0:
        return head + ", empty"
    if call.raw_chars < _SMALL_OUTPUT:
        return f"{head}: {_clip(call.result, _SMALL_OUTPUT)}"
    lines = call.result.count("\n") + 1
    # A result cut for the prompt shows only its first lines: their count is a lower bound.
    more = "+" if call.raw_chars > len(call.result) else ""
    head += f", {lines}{more} line{'s' if lines != 1 or more else ''}, {_size(call.raw_chars)}"
    details: list[str] = []
    room = budget - len(head)
    for line in _detail_lines(call):
        if room < 24:
            break
        clipped = _clip(line, min(_LINE_CHARS, room - 3))
        details.append(clipped)
        room -= len(clipped) + 3
    return head + (": " + " | ".join(details) if details else "")


def summarize_batch_prompt(prompt: str) -> str:
    """The bullets for a batch prompt (one per ``[[N:tool]]`` section)."""
    body = _between(prompt, _BATCH_OPEN, _BATCH_CLOSE)
    calls = [_parse_call(*parts) for parts in _split_calls(prompt if body is None else body)]
    if not calls:
        return _summarize_other(prompt)
    total = sum(call.raw_chars for call in calls) or 1
    # The whole summary should stay well under the raw size (the pipeline drops a summary
    # longer than the raw text); each call gets a share of a third of it.
    pool = max(total // 3, 120 * len(calls))
    bullets = [
        _bullet(call, min(_TOOL_BUDGET_MAX, max(_TOOL_BUDGET_MIN, pool * call.raw_chars // total)))
        for call in calls
    ]
    return "\n".join(bullets)


def summarize_range_prompt(prompt: str) -> str:
    """A compact merge of the per-step summaries of a fusion prompt."""
    body = _between(prompt, _RANGE_OPEN, _RANGE_CLOSE) or ""
    steps = body.count(_FOOTER_MARK) or len([p for p in body.split("\n\n") if p.strip()])
    bullets: list[str] = []
    seen: set[str] = set()
    for raw in body.split("\n"):
        line = raw.strip()
        if not line.startswith(("- ", "* ")):
            continue
        key = _SPACE.sub(" ", line[2:]).lower()
        if key in seen:
            continue
        seen.add(key)
        bullets.append("- " + _clip(line[2:], _RANGE_LINE_CHARS))
    refs: list[str] = []
    for match in _REF.finditer(body):
        if match.group(1) not in refs:
            refs.append(match.group(1))
    if not bullets:
        bullets = [
            "- " + _clip(line, _RANGE_LINE_CHARS)
            for line in body.split("\n")
            if _meaningful(line) and not _is_footer(line)
        ]
    count = max(steps, 1)
    parts = [f"Sub-task summary ({count} step{'s' if count != 1 else ''}):"]
    parts.extend(bullets[:_RANGE_BULLETS])
    if len(bullets) > _RANGE_BULLETS:
        parts.append(f"- (+{len(bullets) - _RANGE_BULLETS} more)")
    if refs:
        parts.append("Refs: " + ", ".join(f"`{ref}`" for ref in refs))
    return "\n".join(parts)


def _is_footer(line: str) -> bool:
    return _FOOTER_MARK in line or line.startswith("Use `context_tree_query`")


def _summarize_other(prompt: str) -> str:
    lines = [line.strip() for line in prompt.split("\n") if _meaningful(line)]
    if not lines:
        return "- (nothing to summarize)"
    return "\n".join("- " + _clip(line, _LINE_CHARS) for line in lines[:3])


class DeterministicSummarizer:
    """The embedded default summarizer (``pi-condense/deterministic``): no network, no cost."""

    def __init__(self) -> None:
        self._model = ModelRef(
            provider="pi-condense", id="deterministic", name="pi-condense deterministic"
        )

    @property
    def model(self) -> ModelRef:
        """``pi-condense/deterministic``."""
        return self._model

    async def complete(
        self, request: CompletionRequest, on_event: Callable[[], None]
    ) -> Completion:
        """Summarize the prompt of ``request`` by rule (see the module docstring)."""
        on_event()
        prompt = request.prompt
        if "<sub-task-summaries>" in prompt:
            text = summarize_range_prompt(prompt)
        elif "<tool-call-batch>" in prompt or _LABEL.search(prompt):
            text = summarize_batch_prompt(prompt)
        else:
            text = _summarize_other(prompt)
        return Completion(text=text, stop_reason="stop", usage=Usage(), model=self._model)
