"""Summary labels: ``[[N:tool]]`` -> `` `tN` `` rewriting, the refs footer, summary details.

The batch prompt asks the model to open each tool's first bullet with the label ``[[N:name]]``
of its input line. :func:`substitute_inline_refs` turns every valid label into the short ref of
that tool call and strips invalid or misplaced ones (spec 05 section 14); :func:`refs_footer`
lists all the batch's refs under the summary (section 8.4).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["refs_footer", "substitute_inline_refs", "summary_details"]

# JavaScript's `\s` (also the set of `trim` / `trimStart`), spec 11 section 6.
_JS_WS = "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)
_WS = re.escape(_JS_WS)
_LABEL = re.compile(rf"^([{_WS}]*(?:[-*][{_WS}]+)?)\[\[([0-9]+):([^\]\n]+)\]\][{_WS}]*")
_ANY_LABEL = re.compile(rf"\[\[[0-9]+:[^\]\n]+\]\][{_WS}]*")
_FENCE = "```"


def refs_footer(refs: Sequence[Mapping[str, Any]]) -> str:
    """The block appended to every summary: the batch's refs in backticks and how to use them."""
    listed = ", ".join(f"`{ref['shortId']}`" for ref in refs)
    return (
        f"\n\n---\n**Summarized tool refs**: {listed}\n"
        "Use `context_tree_query` with these refs to retrieve the original full outputs."
    )


def _rewrite(
    match: re.Match[str], refs: Sequence[Mapping[str, Any]], tool_names: Sequence[Any]
) -> str:
    prefix, digits, name = match.group(1), match.group(2), match.group(3)
    number = int(digits)
    if number < 1 or number > len(refs) or number > len(tool_names):
        return prefix
    expected = tool_names[number - 1]
    if not isinstance(expected, str):
        return prefix
    if name.strip(_JS_WS).lower() != expected.strip(_JS_WS).lower():
        return prefix
    return f"{prefix}`{refs[number - 1]['shortId']}` "


def substitute_inline_refs(
    text: str, refs: Sequence[Mapping[str, Any]], tool_names: Sequence[Any]
) -> str:
    """Rewrite line-leading labels of ``text`` into short refs (the reference's
    ``substituteInlineRefs``); ``refs`` and ``tool_names`` follow the batch's tool-call order.

    A label whose number is out of range or whose name (trimmed, case-insensitive) is not the
    tool at that position is removed; every other label left on a line is removed too. Lines
    inside fenced code blocks are kept as they are.
    """
    lines = text.split("\n")
    in_fence = False
    for i, line in enumerate(lines):
        if line.lstrip(_JS_WS).startswith(_FENCE):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = _LABEL.sub(lambda m: _rewrite(m, refs, tool_names), line, count=1)
        lines[i] = _ANY_LABEL.sub("", line)
    return "\n".join(lines)


def summary_details(
    refs: Sequence[Mapping[str, Any]],
    tool_names: Sequence[Any],
    turn_index: Any,
    timestamp: Any,
) -> dict[str, Any]:
    """The ``details`` of a ``context-prune-summary`` message, in the writer's key order."""
    return {
        "toolCallRefs": [dict(ref) for ref in refs],
        "toolNames": list(tool_names),
        "turnIndex": turn_index,
        "timestamp": timestamp,
    }
