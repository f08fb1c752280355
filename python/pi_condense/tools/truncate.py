"""Pi's ``truncateHead``: keep the first lines of a text within a line and a byte budget.

Whole lines only: a text whose first line alone is over the byte budget truncates to ``""``.
Bytes are UTF-8 bytes as Node counts them (a lone surrogate counts 3, as U+FFFD). Lines are
counted as Pi 0.83 counts them (``splitLinesForCounting``): the pieces of ``text.split("\\n")``
without the empty piece after a final newline, so ``""`` is 0 lines and ``"a\\nb\\n"`` is 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from ..js.json import utf8_len

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_LINES", "TruncationResult", "truncate_head"]

DEFAULT_MAX_LINES = 2000
"""Pi's default line budget for tool output."""

DEFAULT_MAX_BYTES = 50 * 1024
"""Pi's default byte budget for tool output (50 KiB)."""


@dataclass(frozen=True)
class TruncationResult:
    """What ``truncateHead`` returns (Pi's ``TruncationResult``, snake_case)."""

    content: str
    truncated: bool
    truncated_by: Optional[Literal["lines", "bytes"]]
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool
    first_line_exceeds_limit: bool
    max_lines: int
    max_bytes: int


def truncate_head(
    content: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> TruncationResult:
    """The longest run of leading whole lines within ``max_lines`` and ``max_bytes``."""
    total_bytes = utf8_len(content)
    lines = _lines_for_counting(content)
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return TruncationResult(
            content, False, None, total_lines, total_bytes, total_lines, total_bytes,
            False, False, max_lines, max_bytes,
        )  # fmt: skip
    if lines and utf8_len(lines[0]) > max_bytes:
        return TruncationResult(
            "", True, "bytes", total_lines, total_bytes, 0, 0, False, True, max_lines, max_bytes
        )
    kept = 0
    size = 0
    by: Literal["lines", "bytes"] = "lines"
    for line in lines[:max_lines]:
        step = utf8_len(line) + (1 if kept else 0)
        if size + step > max_bytes:
            by = "bytes"
            break
        size += step
        kept += 1
    if kept >= max_lines:
        by = "lines"
    return TruncationResult(
        "\n".join(lines[:kept]), True, by, total_lines, total_bytes, kept, size,
        False, False, max_lines, max_bytes,
    )  # fmt: skip


def _lines_for_counting(content: str) -> list[str]:
    if not content:
        return []
    lines = content.split("\n")
    if content.endswith("\n"):
        lines.pop()
    return lines
