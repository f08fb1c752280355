"""Reading session lines as Pi does: decode (invalid UTF-8 as U+FFFD), skip blank lines,
``JSON.parse`` each one, and report every line Pi would skip as a :class:`LoadWarning`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import orjson

from .. import _core
from ..js import json as jsjson
from ..js.values import ABSENT, JS_WHITESPACE

__all__ = ["LoadWarning", "Parsed", "decode_line", "is_blank", "parse_line", "parse_lines"]

_NEWLINES = re.compile(rb"\n+")


@dataclass(frozen=True)
class LoadWarning:
    """A line that was skipped or needs attention; ``line`` is 1-based in the file.

    ``kind`` is a stable code: ``invalid-json``, ``truncated`` (last line without a newline
    that does not parse), ``not-object``, ``extra-header``, ``invalid-utf8``, ``bad-entry``,
    ``duplicate-id``, ``glued`` (bytes appended after a torn line by a writer without our lock),
    ``odd-version`` (a header ``version`` Pi does not write, e.g. ``99`` or ``"4-beta"``),
    ``deep`` (a line nested deeper than :data:`pi_condense.jsjson.MAX_DEPTH`: loaded, but it
    cannot be serialized).
    """

    line: int
    kind: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def is_blank(line: str) -> bool:
    if not line:
        return True
    if line[0] == "{":
        return False
    return not line.strip(JS_WHITESPACE)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


@dataclass
class Parsed:
    """Objects parsed from a chunk of lines, in order, with their line numbers."""

    objects: list[tuple[int, dict[str, Any]]]
    warnings: list[LoadWarning]
    first_value: Any = ABSENT
    first_line: int = 0
    newlines: int = 0
    """How many ``"\\n"`` the chunk holds (set by :func:`parse_lines`)."""


def parse_line(line: str, number: int, torn: bool, parsed: Parsed) -> None:
    try:
        value, depth = jsjson.loads_with_depth(line)
    except (ValueError, RecursionError) as exc:  # JsonError is a ValueError
        if torn:
            reason = "truncated last line (no trailing newline: an interrupted write?); skipped"
            parsed.warnings.append(LoadWarning(number, "truncated", reason))
        else:
            parsed.warnings.append(
                LoadWarning(number, "invalid-json", f"invalid JSON, skipped: {exc}")
            )
        return
    if depth > jsjson.MAX_DEPTH:
        reason = (
            f"nested {depth} levels deep: kept (JSON.parse reads it), but a render or a "
            f"write of it fails (JSON.stringify here stops at {jsjson.MAX_DEPTH} levels)"
        )
        parsed.warnings.append(LoadWarning(number, "deep", reason))
    _keep(value, number, parsed)


def _keep(value: Any, number: int, parsed: Parsed) -> None:
    if parsed.first_value is ABSENT:
        parsed.first_value = value
        parsed.first_line = number
    if isinstance(value, dict):
        parsed.objects.append((number, value))
    else:
        reason = f"not a JSON object ({_describe(value)}), skipped"
        parsed.warnings.append(LoadWarning(number, "not-object", reason))


def decode_line(data: bytes) -> tuple[str, bool]:
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def parse_lines(data: bytes) -> Parsed:
    """Pi's ``loadEntriesFromFile`` line handling (JS-``trim()`` the whole text, split on
    ``"\\n"``, skip blank lines, ``JSON.parse`` each), one line at a time: only the bytes and
    the parsed objects are held, never a decoded copy of the whole file. Trimming the whole
    text only ever changes the first and the last non-blank line, so those two are trimmed
    at their outer end (``"\\n"`` is never part of a UTF-8 sequence, so decoding line by line
    gives the same text).

    Each line's bytes go to ``orjson.loads`` first: when it accepts them they are valid UTF-8
    and JSON with at most JSON whitespace around it (which the trim would only remove), so
    the value is the one the decode-and-parse path gives. Only a line it refuses (blank,
    invalid UTF-8, lone surrogate escapes, ``NaN``, too deep, torn, ...) takes that path."""
    parsed = Parsed([], [])
    keep = parsed.objects.append
    started = False  # parsed.first_value is set
    pending: Optional[tuple[int, str, bool]] = None  # (line number, text, valid UTF-8)
    first = True
    number = 0
    position = 0
    size = len(data)
    find = data.find
    fast_loads = orjson.loads
    refused = orjson.JSONDecodeError
    objects = parsed.objects
    native = type(data) is bytes
    while position <= size:
        if native and started and pending is None:
            # The lines orjson takes and that hold an object, at C speed; this loop reads
            # the line it stops at.
            position, number = _core.parse_lines_from(
                data, position, number, fast_loads, refused, objects
            )
        cut = find(b"\n", position)
        end = size if cut < 0 else cut
        number += 1
        raw = data[position:end]
        position = end + 1
        if not raw and cut >= 0:
            # A run of empty lines is skipped at once: a file of newlines costs no more
            # than its bytes (each one would raise and clear a parse error).
            run = _NEWLINES.match(data, position)
            if run is not None:
                number += run.end() - position
                position = run.end()
            continue
        try:
            value = fast_loads(raw)
        except refused:
            pass
        else:
            if pending is not None:
                _parse_pending(pending, False, parsed)
                pending = None
                started = parsed.first_value is not ABSENT
            if started and type(value) is dict:
                keep((number, value))
            else:
                first = False
                _keep(value, number, parsed)
                started = True
            if cut < 0:
                break
            continue
        text, valid = decode_line(raw)
        if is_blank(text):
            if cut < 0:
                break
            continue
        if first:
            text = text.lstrip(JS_WHITESPACE)
            first = False
        if pending is not None:
            _parse_pending(pending, False, parsed)
        pending = (number, text, valid)
        if cut < 0:
            break
    if pending is not None:
        line, text, valid = pending
        torn = not data.endswith(b"\n") and line == number
        _parse_pending((line, text.rstrip(JS_WHITESPACE), valid), torn, parsed)
    # Every segment but the last ends with a newline.
    parsed.newlines = number - 1
    return parsed


def _parse_pending(item: tuple[int, str, bool], torn: bool, parsed: Parsed) -> None:
    number, text, valid = item
    if not valid:
        parsed.warnings.append(
            LoadWarning(number, "invalid-utf8", "invalid UTF-8 bytes read as U+FFFD")
        )
    parse_line(text, number, torn, parsed)
