"""Reading session lines as Pi does: decode (invalid UTF-8 as U+FFFD), skip blank lines,
``JSON.parse`` each one, and report every line Pi would skip as a :class:`LoadWarning`."""

from __future__ import annotations

import mmap
import re
import sys
from dataclasses import dataclass
from typing import Any, Optional

import orjson

from .._core import parse_lines_from
from ..errors import SessionError
from ..js import json as jsjson
from ..js.values import ABSENT, JS_WHITESPACE

__all__ = [
    "PARSE_FACTOR",
    "LoadWarning",
    "NotEnoughMemoryError",
    "Parsed",
    "decode_line",
    "is_blank",
    "parse_line",
    "parse_lines",
    "share_equal_strings",
]

PARSE_FACTOR = 64
"""Bytes of memory a line may take while it is parsed, per byte of the line: ``orjson``
reserves about 12 per byte for its parse, and the objects of dense JSON (``[{"":[]},...]``)
take up to about 46. Before a line is parsed this much is checked free (see
:func:`parse_lines`)."""

_CHUNK = 1 << 20  # lines handed to the native loop at once (bytes)
_PROBE_MIN = 64 << 20  # the smallest check of free memory (less only at the end of the data)
_PROBE_PIECE = 1 << 30  # one mapping of a check (a larger one may look like an overcommit)


class NotEnoughMemoryError(SessionError, MemoryError):
    """A session line cannot be parsed in the memory left (the message names file and line)."""


_NEWLINES = re.compile(rb"\n+")


@dataclass(frozen=True)
class LoadWarning:
    """A line that was skipped or needs attention; ``line`` is 1-based in the file.

    ``kind`` is a stable code: ``invalid-json``, ``truncated`` (last line without a newline
    that does not parse), ``not-object``, ``extra-header``, ``invalid-utf8``, ``bad-entry``,
    ``duplicate-id``, ``glued`` (bytes appended after a torn line by a writer without our lock),
    ``odd-version`` (a header ``version`` Pi does not write, e.g. ``99`` or ``"4-beta"``),
    ``deep`` (a line nested deeper than :data:`pi_condense.js.json.MAX_DEPTH`: loaded, but it
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


def _memory_free(size: int) -> bool:
    """Whether ``size`` bytes of memory can be had now. The bytes are mapped and unmapped
    again, never touched: address-space and commit limits (``RLIMIT_AS``, strict overcommit)
    refuse a mapping cleanly, while an allocation that fails inside a C extension may not be
    checked (``orjson`` then writes through a null pointer)."""
    maps: list[mmap.mmap] = []
    try:
        while size > 0:
            piece = min(size, _PROBE_PIECE)
            if sys.platform == "win32":  # pragma: no cover
                maps.append(mmap.mmap(-1, piece))
            else:
                maps.append(mmap.mmap(-1, piece, flags=mmap.MAP_PRIVATE))
            size -= piece
    except (OSError, MemoryError, OverflowError):
        return False
    finally:
        for mapping in maps:
            mapping.close()
    return True


class _Headroom:
    """Memory checked free for the lines still to parse: each line takes
    :data:`PARSE_FACTOR` times its length from it; when that is more than is left, a new
    check is made (of at least ``_PROBE_MIN``, so that small lines are not checked one by
    one, but never more than the rest of the data may need)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.left = 0
        self.current = (0, 0)  # the first line and the size of what was taken last

    def take(self, size: int, rest: int, first: int) -> None:
        """Take what ``size`` bytes of lines (from line ``first``; ``rest`` bytes are left
        to parse, these included) need, or raise :class:`NotEnoughMemoryError`."""
        if not self.fits(size, rest, first):
            raise _short(self.name, first, None, size)

    def fits(self, size: int, rest: int, first: int) -> bool:
        """:meth:`take`, telling whether it could (then it took it) instead of raising."""
        self.current = (first, size)
        need = size * PARSE_FACTOR
        if need <= self.left:
            self.left -= need
            return True
        check = max(need, min(_PROBE_MIN, rest * PARSE_FACTOR))
        if not _memory_free(check):
            if check == need or not _memory_free(need):
                return False
            check = need
        self.left = check - need
        return True


def _short(name: str, first: int, last: Optional[int], size: int) -> NotEnoughMemoryError:
    """The error for ``size`` bytes of lines ``first`` to ``last`` that do not fit."""
    if last is None or last <= first:
        where = f"line {first}: not enough memory to parse it"
    else:
        where = f"lines {first}-{last}: not enough memory to parse them"
    mb = 1 << 20
    need = -(-size * PARSE_FACTOR // mb)
    return NotEnoughMemoryError(
        f"{name}: {where} ({size / mb:.1f} MB of JSON may take up to {need} MB)"
    )


def parse_line(line: str, number: int, torn: bool, parsed: Parsed, name: str = "<memory>") -> None:
    """Parse one line (``number`` of ``name``) into ``parsed`` as Pi reads it.

    Raises:
        NotEnoughMemoryError: parsing it may take more memory than is free.
    """
    size = len(line) if line.isascii() else 4 * len(line)  # at most its UTF-8 length
    try:
        _Headroom(name).take(size, size, number)
        value, depth = jsjson.loads_with_depth(line)
    except NotEnoughMemoryError:
        raise
    except MemoryError:
        raise _short(name, number, None, size) from None
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


def share_equal_strings(values: list[Any]) -> None:
    """Make the equal strings among ``values`` (parsed JSON: exact ``dict`` and ``list``
    trees, walked to any depth) one object each, in place, the first one met: a parsed
    session repeats role, type, model and tool names, and often whole tool outputs, as
    separate objects (``orjson`` shares dict keys, not values). Nothing changes but object
    identity: a ``str`` is immutable, and what reads it by content reads the same. For a
    process that keeps a parsed session for its whole run (``condense``): about 45 ms and
    7 MB less held at x10 of the large fixture (8.3 MB of repeats)."""
    _share_into(values, {})


class _Sharing:
    """:func:`share_equal_strings` of a list of ``(line, object)`` as it grows: each
    :meth:`take` shares the objects added since the last one, through one table."""

    def __init__(self) -> None:
        self.table: dict[str, str] = {}
        self.done = 0

    def take(self, objects: list[tuple[int, dict[str, Any]]]) -> None:
        _share_into([value for _, value in objects[self.done :]], self.table)
        self.done = len(objects)


def _share_into(values: list[Any], table: dict[str, str]) -> None:
    """:func:`share_equal_strings`, each string replaced by ``table``'s equal one (a string
    not in it is added)."""
    shared = table.setdefault
    stack = list(values)
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if type(node) is dict:
            for key, value in node.items():
                kind = type(value)
                if kind is str:
                    node[key] = shared(value, value)
                elif kind is dict or kind is list:
                    push(value)
        elif type(node) is list:
            for i, value in enumerate(node):
                kind = type(value)
                if kind is str:
                    node[i] = shared(value, value)
                elif kind is dict or kind is list:
                    push(value)


def decode_line(data: bytes) -> tuple[str, bool]:
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def parse_lines(data: bytes, name: str = "<memory>", *, share_strings: bool = False) -> Parsed:
    """Pi's ``loadEntriesFromFile`` line handling (JS-``trim()`` the whole text, split on
    ``"\\n"``, skip blank lines, ``JSON.parse`` each), one line at a time: only the bytes and
    the parsed objects are held, never a decoded copy of the whole file. Trimming the whole
    text only ever changes the first and the last non-blank line, so those two are trimmed
    at their outer end (``"\\n"`` is never part of a UTF-8 sequence, so decoding line by line
    gives the same text).

    Each line's bytes go to ``orjson.loads`` first: when it accepts them they are valid UTF-8
    and JSON with at most JSON whitespace around it (which the trim would only remove), so
    the value is the one the decode-and-parse path gives. Only a line it refuses (blank,
    invalid UTF-8, lone surrogate escapes, ``NaN``, too deep, torn, ...) takes that path.

    Before lines are parsed, :data:`PARSE_FACTOR` times their length is checked free, and
    the native loop gets at most about 1 MB of lines at a time: a line that may not fit in
    the memory left is refused before any parser allocates for it.

    With ``share_strings``, the equal strings of the parsed objects are made one object each
    (see :func:`share_equal_strings`) as the parse goes, about ``_CHUNK`` bytes of lines at a
    time: the repeats freed after a chunk leave room the next chunk's strings take, where
    sharing them after the whole parse left that room in the allocator's pools, resident and
    of sizes later objects fill only in part (`condense`'s peak: about 3 MB less at x10 of
    the large fixture, 32 MB at x100).

    Raises:
        NotEnoughMemoryError: the memory left is not enough to parse a line (the message
            names ``name`` and the line); any ``MemoryError`` while parsing becomes one.
    """
    parsed = Parsed([], [])
    headroom = _Headroom(name)
    sharing = _Sharing() if share_strings else None
    try:
        _parse_all(data, parsed, headroom, sharing)
    except NotEnoughMemoryError:
        raise
    except MemoryError:
        line, size = headroom.current
        raise _short(name, line, None, size) from None
    return parsed


def _parse_all(
    data: bytes, parsed: Parsed, headroom: _Headroom, sharing: Optional[_Sharing]
) -> None:
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
            position, number = _parse_native(data, position, number, headroom, objects, sharing)
        cut = find(b"\n", position)
        end = size if cut < 0 else cut
        number += 1
        headroom.take(end - position, size - position, number)
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
                _parse_pending(pending, False, parsed, headroom.name)
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
            _parse_pending(pending, False, parsed, headroom.name)
        pending = (number, text, valid)
        if cut < 0:
            break
    if pending is not None:
        line, text, valid = pending
        torn = not data.endswith(b"\n") and line == number
        _parse_pending((line, text.rstrip(JS_WHITESPACE), valid), torn, parsed, headroom.name)
    # Every segment but the last ends with a newline.
    parsed.newlines = number - 1
    if sharing is not None:
        sharing.take(objects)


def _parse_native(
    data: bytes,
    position: int,
    number: int,
    headroom: _Headroom,
    objects: list[tuple[int, dict[str, Any]]],
    sharing: Optional[_Sharing] = None,
) -> tuple[int, int]:
    """``_core.parse_lines_from`` over the lines from ``position`` on (line ``number + 1``);
    returns where it stopped. They go at once when the memory all of them may need is free
    (the common case: no copy) and no ``sharing`` is asked for; else about ``_CHUNK`` bytes
    of them at a time (a copy of them), each checked against ``headroom`` first, and the
    objects of each shared by ``sharing``."""
    size = len(data)
    loads = orjson.loads
    refused = orjson.JSONDecodeError
    if sharing is None and headroom.fits(size - position, size - position, number + 1):
        try:
            return parse_lines_from(data, position, number, loads, refused, objects)
        except MemoryError:
            last = number + data.count(b"\n", position)
            raise _short(headroom.name, number + 1, last, size - position) from None
    while position < size:
        cut = data.find(b"\n", position + _CHUNK - 1)
        end = size if cut < 0 else cut + 1
        try:
            headroom.take(end - position, size - position, number + 1)
            if end == size:
                stop = parse_lines_from(data, position, number, loads, refused, objects)
            else:
                chunk = data[position:end]
                offset, number = parse_lines_from(chunk, 0, number, loads, refused, objects)
        except MemoryError:
            last = number + data.count(b"\n", position, end)
            raise _short(headroom.name, number + 1, last, end - position) from None
        if sharing is not None:
            sharing.take(objects)
        if end == size:
            return stop
        position += offset
        if offset < len(chunk):
            break
    return position, number


def _parse_pending(item: tuple[int, str, bool], torn: bool, parsed: Parsed, name: str) -> None:
    number, text, valid = item
    if not valid:
        parsed.warnings.append(
            LoadWarning(number, "invalid-utf8", "invalid UTF-8 bytes read as U+FFFD")
        )
    parse_line(text, number, torn, parsed, name)
