"""Pi session files: tolerant load, in-memory migration, branch walk, context, durable appends.

A :class:`SessionFile` reads a Pi session (JSON Lines, spec 01) exactly as Pi's
``SessionManager`` does and adds what a Python host needs on top:

Loading
    The whole file is read and handled as Pi does (JS-``trim()``, split on ``"\\n"``, blank
    lines skipped, every line parsed with :func:`pi_condense.jsjson.loads`), one line at a
    time so that only the file's bytes and the parsed entries are held. Lines Pi would skip
    are skipped here too, but each one is reported in :attr:`SessionFile.warnings` (1-based
    line number and reason); a last line cut short by a crash (no trailing newline) is
    reported as truncated. The first parsed line must be a session header (``type ==
    "session"`` with a string ``id``), else :class:`~pi_condense.errors.SessionError` is
    raised. v1 and v2 files are migrated in memory the way Pi migrates them (fresh 8-hex
    ids from the id source for v1 entries, ``hookMessage`` -> ``custom`` for v2). The file
    itself is never rewritten.

Appending
    Entries are built with Pi's key order, an id unique in the session (Pi's ``generateId``
    rule), ``parentId`` = the current leaf and an ISO timestamp from the injectable clock. Each
    append takes an advisory lock against other pi-condense writers (``fcntl.flock`` on POSIX,
    waiting at most :attr:`SessionFile.lock_timeout` seconds, then
    :class:`~pi_condense.errors.SessionError`; no lock on Windows, where byte-range locks would
    block Pi's own reads), first picks up entries another writer appended since our last read
    (see below), terminates a torn last line with ``"\\n"`` so nothing is glued onto it, then
    writes the line with ``O_APPEND``, flushes and ``fsync``-s it. Unlike Pi, which holds a new
    session in memory until the first assistant message, every append is written immediately
    and :meth:`SessionFile.create` writes the header at once. Loading and :meth:`refresh` take
    no lock (every writer appends whole lines), so a stuck lock holder never blocks a reader.

Concurrent writers
    Pi appends without any lock (``appendFileSync``). Before every append (and on
    :meth:`SessionFile.refresh`) the bytes appended since our last read are parsed and indexed
    (migrated like the rest of the file, with warnings for bad lines); bytes another writer
    slipped in between that re-read and our write (``O_APPEND`` puts our line after them) are
    read back right after the write and indexed before our entry, so our view of the file
    stays exact. A read that ends inside a line waits a few milliseconds for the rest of it (a
    line being appended right now can be seen half-written); a remnant that never completes is
    reported as torn. If our leaf was the file's last entry, it follows the new last entry, so our
    next entry continues the conversation instead of forking it off; a leaf moved explicitly
    with :meth:`SessionFile.set_leaf` stays put. If the file shrank or the bytes we already
    read changed (Pi rewrites a v1/v2 file when it opens it), appending raises
    :class:`~pi_condense.errors.SessionError`: load the file again. Only regular files are
    opened: a FIFO or a device is refused at once instead of blocking.

In-memory sessions (:meth:`SessionFile.in_memory`, :meth:`SessionFile.parse`) behave the same
without a file.

Where this differs from Pi (only on input Pi mishandles, or by design):
- a missing, empty or header-less file raises instead of silently starting a new session;
- lines holding valid JSON that is not an object (``[1]``, ``42``, ``null``) are skipped with a
  warning; Pi keeps arrays as id-less pseudo-entries (a trailing one empties its context) and
  crashes on the others in v1 files;
- ``message`` entries without an object ``message`` are left out of the context (Pi throws);
- a ``parentId`` cycle ends the branch walk (Pi loops forever);
- :meth:`SessionFile.branch` / :meth:`SessionFile.build_context` raise for an unknown leaf id
  (Pi returns ``[]`` / falls back to the last entry; :func:`build_session_context` keeps Pi's
  fallback).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import stat
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union, cast

from . import _core, jsjson, jstime
from .errors import SessionError
from .flock import unlock, wait_for_lock
from .fsio import fsync_dir

__all__ = [
    "ABSENT",
    "CURRENT_SESSION_VERSION",
    "Clock",
    "IdSource",
    "LoadWarning",
    "SessionContext",
    "SessionFile",
    "build_session_context",
    "random_entry_id",
]

CURRENT_SESSION_VERSION = 3
"""Session format version Pi writes (and the one entries are migrated to in memory)."""

Clock = Callable[[], int]
"""Epoch milliseconds, like ``Date.now()``."""

IdSource = Callable[[], str]
"""Candidate entry ids (Pi: the first 8 hex chars of a random UUID)."""

StrPath = Union[str, "os.PathLike[str]"]


ABSENT: Any = _core.ABSENT
"""An absent optional value (JS ``undefined``): the key is omitted, never written as ``null``.

The native module's own sentinel (``_core.ABSENT``), which the native readers tell by identity;
falsy, and pickled and copied as itself."""


def random_entry_id() -> str:
    """The default id source: the first 8 hex chars of a random UUID, as Pi's ``generateId``."""
    return uuid.uuid4().hex[:8]


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


@dataclass(frozen=True)
class SessionContext:
    """What Pi's ``buildSessionContext`` returns: messages, thinking level and model.

    ``messages`` share their objects with the session entries: copy before mutating.
    ``model`` is ``{"provider", "modelId"}`` (a key whose value is absent is omitted) or None.
    """

    messages: list[Any]
    thinking_level: Any
    model: Optional[dict[str, Any]]


# --------------------------------------------------------------------------------------------
# JS value helpers

_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def _js_trim(text: str) -> str:
    return text.strip(_JS_WHITESPACE)


def _is_blank(line: str) -> bool:
    if not line:
        return True
    if line[0] == "{":
        return False
    return not line.strip(_JS_WHITESPACE)


def _truthy(value: Any) -> bool:
    """JS truthiness of a JSON value (``ABSENT`` is ``undefined``)."""
    if value is None or value is ABSENT:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    return True


def _mkey(value: Any) -> Any:
    """Key with JS ``Map`` / ``===`` semantics for a JSON value."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ("#bool", value)
    if isinstance(value, (int, float)):
        return ("#num", value)
    if value is None:
        return ("#null",)
    if value is ABSENT:
        return ("#undefined",)
    return ("#object", id(value))


def _to_number(value: Any) -> float:
    """JS ``Number(value)`` for a JSON value (used on the header ``version``)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if value is None:
        return 0.0
    text = _js_trim(jstime.to_js_string(value))
    if not text:
        return 0.0
    prefix = text[:2].lower()
    if prefix in ("0x", "0o", "0b"):
        try:
            return float(int(text[2:], {"0x": 16, "0o": 8, "0b": 2}[prefix]))
        except ValueError:
            return math.nan
    if text in ("Infinity", "+Infinity", "-Infinity"):
        return -math.inf if text[0] == "-" else math.inf
    if not all(c in "0123456789+-.eE" for c in text):
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def _entry_time(entry: Mapping[str, Any]) -> float:
    """``new Date(entry.timestamp).getTime()``."""
    value = entry.get("timestamp", ABSENT)
    if value is ABSENT:
        return math.nan
    return jstime.date_value(value)


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not ABSENT:
        target[key] = value


# --------------------------------------------------------------------------------------------
# buildSessionContext


def _walk(
    leaf: Optional[dict[str, Any]], by_id: Mapping[Any, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Root-first path from ``leaf`` following ``parentId`` (stops at a cycle, unlike Pi)."""
    path: list[dict[str, Any]] = []
    seen: set[int] = set()
    current = leaf
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        path.append(current)
        parent = current.get("parentId", ABSENT)
        current = by_id.get(_mkey(parent)) if _truthy(parent) else None
    path.reverse()
    return path


def _model_of(provider: Any, model_id: Any) -> dict[str, Any]:
    model: dict[str, Any] = {}
    _put(model, "provider", provider)
    _put(model, "modelId", model_id)
    return model


def _emit(entry: dict[str, Any], out: list[Any]) -> None:
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if isinstance(message, dict):
            out.append(message)
    elif kind == "custom_message":
        custom: dict[str, Any] = {"role": "custom"}
        for key in ("customType", "content", "display", "details"):
            _put(custom, key, entry.get(key, ABSENT))
        custom["timestamp"] = _entry_time(entry)
        out.append(custom)
    elif kind == "branch_summary" and _truthy(entry.get("summary", ABSENT)):
        summary: dict[str, Any] = {"role": "branchSummary", "summary": entry["summary"]}
        _put(summary, "fromId", entry.get("fromId", ABSENT))
        summary["timestamp"] = _entry_time(entry)
        out.append(summary)


def _build_context(
    entries: Sequence[dict[str, Any]], leaf_id: Any, by_id: Mapping[Any, dict[str, Any]]
) -> SessionContext:
    if leaf_id is None:
        return SessionContext([], "off", None)
    leaf = by_id.get(_mkey(leaf_id)) if _truthy(leaf_id) else None
    if leaf is None:
        if not entries:
            return SessionContext([], "off", None)
        leaf = entries[-1]
    path = _walk(leaf, by_id)

    thinking_level: Any = "off"
    model: Optional[dict[str, Any]] = None
    compaction: Optional[dict[str, Any]] = None
    for entry in path:
        kind = entry.get("type")
        if kind == "thinking_level_change":
            thinking_level = entry.get("thinkingLevel")
        elif kind == "model_change":
            model = _model_of(entry.get("provider", ABSENT), entry.get("modelId", ABSENT))
        elif kind == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                model = _model_of(message.get("provider", ABSENT), message.get("model", ABSENT))
        elif kind == "compaction":
            compaction = entry

    messages: list[Any] = []
    if compaction is None:
        for entry in path:
            _emit(entry, messages)
        return SessionContext(messages, thinking_level, model)

    head: dict[str, Any] = {"role": "compactionSummary"}
    _put(head, "summary", compaction.get("summary", ABSENT))
    _put(head, "tokensBefore", compaction.get("tokensBefore", ABSENT))
    head["timestamp"] = _entry_time(compaction)
    messages.append(head)

    compaction_key = _mkey(compaction.get("id", ABSENT))
    index = next(
        i
        for i, entry in enumerate(path)
        if entry.get("type") == "compaction" and _mkey(entry.get("id", ABSENT)) == compaction_key
    )
    first_kept = _mkey(compaction.get("firstKeptEntryId", ABSENT))
    found = False
    for entry in path[:index]:
        if not found and _mkey(entry.get("id", ABSENT)) == first_kept:
            found = True
        if found:
            _emit(entry, messages)
    for entry in path[index + 1 :]:
        _emit(entry, messages)
    return SessionContext(messages, thinking_level, model)


def build_session_context(
    entries: Sequence[dict[str, Any]], leaf_id: Any = ABSENT
) -> SessionContext:
    """Pi's free ``buildSessionContext(entries, leafId)`` over non-header entries.

    ``leaf_id=None`` (JS ``null``) gives no messages; an absent or unknown id uses the last
    entry. Entries are not copied.
    """
    by_id: dict[Any, dict[str, Any]] = {}
    for entry in entries:
        by_id[_mkey(entry.get("id", ABSENT))] = entry
    return _build_context(entries, leaf_id, by_id)


# --------------------------------------------------------------------------------------------
# Entry construction (Pi's key order per type)

_BASE_KEYS = ("type", "id", "parentId", "timestamp")
_PAYLOAD_ORDER: dict[str, tuple[str, ...]] = {
    "message": ("message",),
    "thinking_level_change": ("thinkingLevel",),
    "model_change": ("provider", "modelId"),
    "compaction": ("summary", "firstKeptEntryId", "tokensBefore", "details", "fromHook"),
    "branch_summary": ("fromId", "summary", "details", "fromHook"),
    "label": ("targetId", "label"),
    "session_info": ("name",),
    "custom": ("customType", "data"),
    "custom_message": ("customType", "content", "display", "details"),
}
# Pi builds these two with the payload before the id/parentId/timestamp keys.
_PAYLOAD_FIRST = frozenset({"custom", "custom_message"})


def _ordered_entry(
    fields: Mapping[str, Any], entry_id: str, parent_id: Any, timestamp: str
) -> dict[str, Any]:
    kind = fields["type"]
    known = _PAYLOAD_ORDER.get(kind, ())
    payload: dict[str, Any] = {}
    for key in known:
        if key in fields:
            _put(payload, key, fields[key])
    for key, value in fields.items():
        if key != "type" and key not in payload and key not in known:
            _put(payload, key, value)
    entry: dict[str, Any] = {"type": kind}
    if kind in _PAYLOAD_FIRST:
        entry.update(payload)
    entry["id"] = entry_id
    _put(entry, "parentId", parent_id)
    entry["timestamp"] = timestamp
    if kind not in _PAYLOAD_FIRST:
        entry.update(payload)
    return entry


# --------------------------------------------------------------------------------------------
# Locking and low-level file I/O

_O_BINARY: int = getattr(os, "O_BINARY", 0)
_O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_TAIL_BYTES = 256

LOCK_TIMEOUT_S = 10.0
"""How long an append waits for another pi-condense writer's lock before it gives up."""


def _lock(fd: int, name: str, timeout: float) -> None:
    """Take the exclusive append lock, waiting at most ``timeout`` seconds."""
    if not wait_for_lock(fd, timeout):
        raise SessionError(
            f"{name}: timed out after {timeout:g} s waiting for the append lock (another "
            "pi-condense process holds it: is it stuck?); nothing was written"
        )


def open_regular(name: str, flags: int, what: str) -> int:
    """Open ``name`` without blocking on a FIFO or device and check that it is a regular
    file; raises :class:`SessionError` naming it otherwise."""
    try:
        fd = os.open(name, flags | _O_BINARY | _O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise SessionError(f"{name}: cannot open {what}: {exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise SessionError(f"{name}: cannot read {what}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise SessionError(f"{name}: cannot read {what}: not a regular file ({_kind(mode)})")
    return fd


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def _read_from(fd: int, offset: int) -> bytes:
    """All bytes from ``offset`` to the end of the file."""
    os.lseek(fd, offset, os.SEEK_SET)
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


# A line another writer is appending right now can be read half-written: the kernel grows the
# file page by page, so a line that crosses a page boundary shows its first part first.
_SETTLE_WAITS_S = (0.0005, 0.001, 0.002, 0.004, 0.008)


def _read_settled(fd: int, offset: int) -> bytes:
    """:func:`_read_from`, but a read that ends inside a line waits briefly for the rest.

    Every writer appends whole lines with one ``write``; a last line without its newline is
    either such a write still in flight (it completes within microseconds) or a remnant of a
    crash (it never does). Without the wait, the in-flight line's first part would be
    consumed as a torn line and the rest later skipped as glued onto it.
    """
    data = _read_from(fd, offset)
    idle = 0
    for wait in _SETTLE_WAITS_S:
        if not data or data.endswith(b"\n"):
            break
        time.sleep(wait)
        more = _read_from(fd, offset + len(data))
        if more:
            data += more
            idle = 0
        else:
            idle += 1
            if idle == 2:
                break
    return data


def _read_exact(fd: int, offset: int, size: int) -> bytes:
    os.lseek(fd, offset, os.SEEK_SET)
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = os.read(fd, remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _is_prune_entry(entry: Mapping[str, Any]) -> bool:
    kind = entry.get("customType")
    return isinstance(kind, str) and kind.startswith("context-prune-")


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


# --------------------------------------------------------------------------------------------
# Parsing lines


@dataclass
class _Parsed:
    """Objects parsed from a chunk of lines, in order, with their line numbers."""

    objects: list[tuple[int, dict[str, Any]]]
    warnings: list[LoadWarning]
    first_value: Any = ABSENT
    first_line: int = 0


def _parse_line(line: str, number: int, torn: bool, parsed: _Parsed) -> None:
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
    if parsed.first_value is ABSENT:
        parsed.first_value = value
        parsed.first_line = number
    if isinstance(value, dict):
        parsed.objects.append((number, value))
    else:
        reason = f"not a JSON object ({_describe(value)}), skipped"
        parsed.warnings.append(LoadWarning(number, "not-object", reason))


def _decode(data: bytes) -> tuple[str, bool]:
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def _parse_lines(data: bytes) -> _Parsed:
    """Pi's ``loadEntriesFromFile`` line handling (JS-``trim()`` the whole text, split on
    ``"\\n"``, skip blank lines, ``JSON.parse`` each), one line at a time: only the bytes and
    the parsed objects are held, never a decoded copy of the whole file. Trimming the whole
    text only ever changes the first and the last non-blank line, so those two are trimmed
    at their outer end (``"\\n"`` is never part of a UTF-8 sequence, so decoding line by line
    gives the same text)."""
    parsed = _Parsed([], [])
    pending: Optional[tuple[int, str, bool]] = None  # (line number, text, valid UTF-8)
    first = True
    number = 0
    position = 0
    size = len(data)
    while position <= size:
        cut = data.find(b"\n", position)
        end = size if cut < 0 else cut
        number += 1
        text, valid = _decode(data[position:end])
        position = end + 1
        if _is_blank(text):
            if cut < 0:
                break
            continue
        if first:
            text = text.lstrip(_JS_WHITESPACE)
            first = False
        if pending is not None:
            _parse_pending(pending, False, parsed)
        pending = (number, text, valid)
        if cut < 0:
            break
    if pending is not None:
        line, text, valid = pending
        torn = not data.endswith(b"\n") and line == number
        _parse_pending((line, text.rstrip(_JS_WHITESPACE), valid), torn, parsed)
    return parsed


def _parse_pending(item: tuple[int, str, bool], torn: bool, parsed: _Parsed) -> None:
    number, text, valid = item
    if not valid:
        parsed.warnings.append(
            LoadWarning(number, "invalid-utf8", "invalid UTF-8 bytes read as U+FFFD")
        )
    _parse_line(text, number, torn, parsed)


# --------------------------------------------------------------------------------------------
# The current branch, kept incrementally

_EPOCHS = itertools.count(1)
_EXTEND_STEPS = 256
"""How far back from a new leaf the kept path is looked for before walking it again."""


class _BranchPath:
    """The root-first path of one leaf entry, grown in place while the leaf moves to a child
    of its last entry (a message appended at the leaf: the common case, O(1))."""

    __slots__ = ("dangling", "epoch", "leaf", "members", "path")

    def __init__(self, leaf: Optional[dict[str, Any]], by_id: Mapping[Any, dict[str, Any]]):
        self.epoch = next(_EPOCHS)
        self.leaf = leaf
        self.path = _walk(leaf, by_id)
        self.members = {id(entry) for entry in self.path}
        # An id the root names as its parent: an entry with that id would change the path.
        parent = self.path[0].get("parentId", ABSENT) if self.path else ABSENT
        self.dangling: Any = _mkey(parent) if _truthy(parent) else None

    def extend(self, leaf: dict[str, Any], by_id: Mapping[Any, dict[str, Any]]) -> bool:
        """Move to ``leaf`` if it descends from the current leaf within a few entries (the
        entries appended since the last look); False (nothing changed) otherwise."""
        if self.leaf is None:
            return False
        added: list[dict[str, Any]] = []
        current: Optional[dict[str, Any]] = leaf
        while current is not self.leaf:
            if current is None or id(current) in self.members or len(added) >= _EXTEND_STEPS:
                return False
            added.append(current)
            parent = current.get("parentId", ABSENT)
            current = by_id.get(_mkey(parent)) if _truthy(parent) else None
        added.reverse()
        self.path.extend(added)
        self.members.update(id(entry) for entry in added)
        self.leaf = leaf
        return True


# --------------------------------------------------------------------------------------------
# SessionFile


class SessionFile:
    """A Pi session: loaded from a file (or built in memory), indexed, appendable.

    Use :meth:`load`, :meth:`create`, :meth:`in_memory` or :meth:`parse`; see the module
    docstring for the load, append and concurrency rules.
    """

    _path: Optional[str]
    _session_dir: str
    _clock: Clock
    _id_source: IdSource
    _explicit_ids: bool
    _mutex: threading.RLock
    _header: dict[str, Any]
    _file_version: Any
    _migrate_v1: bool
    _migrate_v3: bool
    _v1_prev: Any
    _file_objects: list[dict[str, Any]]
    _entries: list[dict[str, Any]]
    _by_id: dict[Any, dict[str, Any]]
    _labels: dict[Any, Any]
    _leaf: Any
    _tip: Any
    _warnings: list[LoadWarning]
    _size: int
    _lines: int
    _tail: bytes
    _foreign_prune: int
    _branch_path: Optional[_BranchPath]
    lock_timeout: float
    """Seconds an append waits for another pi-condense writer's lock (then SessionError)."""

    def __init__(self) -> None:
        raise TypeError("use SessionFile.load(), create(), in_memory() or parse()")

    # ---------------------------------------------------------------- construction

    @classmethod
    def _blank(
        cls,
        path: Optional[str],
        session_dir: str,
        clock: Optional[Clock],
        id_source: Optional[IdSource],
    ) -> SessionFile:
        session = object.__new__(cls)
        session._path = path
        session._session_dir = session_dir
        session._clock = clock if clock is not None else jstime.now_ms
        session._id_source = id_source if id_source is not None else random_entry_id
        session._explicit_ids = id_source is not None
        session._mutex = threading.RLock()
        session._header = {}
        session._file_version = CURRENT_SESSION_VERSION
        session._migrate_v1 = False
        session._migrate_v3 = False
        session._v1_prev = None
        session._file_objects = []
        session._entries = []
        session._by_id = {}
        session._labels = {}
        session._leaf = None
        session._tip = None
        session._warnings = []
        session._size = 0
        session._lines = 0
        session._tail = b""
        session.lock_timeout = LOCK_TIMEOUT_S
        session._foreign_prune = 0
        session._branch_path = None
        return session

    @classmethod
    def load(
        cls,
        path: StrPath,
        *,
        clock: Optional[Clock] = None,
        id_source: Optional[IdSource] = None,
    ) -> SessionFile:
        """Load a session file (read-only; the file is never rewritten).

        Raises :class:`SessionError` if the file cannot be read or is not a Pi session.
        """
        name = os.path.abspath(os.fspath(path))
        # No lock: appends are whole lines (ours and Pi's), and a torn last line is reported.
        fd = open_regular(name, os.O_RDONLY, "session file")
        try:
            data = _read_settled(fd, 0)
        except OSError as exc:
            raise SessionError(f"{name}: cannot read session file: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)
        session = cls._blank(name, os.path.dirname(name), clock, id_source)
        session._load_bytes(data, name)
        return session

    @classmethod
    def parse(
        cls,
        text: Union[str, bytes],
        *,
        name: str = "<memory>",
        session_dir: str = "",
        clock: Optional[Clock] = None,
        id_source: Optional[IdSource] = None,
    ) -> SessionFile:
        """Load a session from its text into an in-memory session (appends stay in memory)."""
        data = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
        session = cls._blank(None, session_dir, clock, id_source)
        session._load_bytes(data, name)
        return session

    @classmethod
    def create(
        cls,
        path: StrPath,
        cwd: str,
        *,
        session_id: Optional[str] = None,
        parent_session: Any = ABSENT,
        clock: Optional[Clock] = None,
        id_source: Optional[IdSource] = None,
    ) -> SessionFile:
        """Create a new v3 session file and write its header line immediately (fsync'd).

        The parent directory is created if needed; an existing file is never overwritten
        (:class:`SessionError`). ``session_id`` defaults to a random UUID.
        """
        name = os.path.abspath(os.fspath(path))
        session = cls._blank(name, os.path.dirname(name), clock, id_source)
        header = session._new_header(cwd, session_id, parent_session)
        line = jsjson.dumps(header).encode("utf-8") + b"\n"
        try:
            os.makedirs(os.path.dirname(name), exist_ok=True)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY | _O_CLOEXEC, 0o644)
        except FileExistsError as exc:
            raise SessionError(f"{name}: cannot create session file: it already exists") from exc
        except OSError as exc:
            raise SessionError(
                f"{name}: cannot create session file: {exc.strerror or exc}"
            ) from exc
        try:
            _write_all(fd, line)
            os.fsync(fd)
        except OSError as exc:
            raise SessionError(
                f"{name}: cannot write session header: {exc.strerror or exc}"
            ) from exc
        finally:
            os.close(fd)
        fsync_dir(os.path.dirname(name))
        session._header = header
        session._file_objects.append(header)
        session._consumed(line)
        return session

    @classmethod
    def in_memory(
        cls,
        cwd: str = "",
        *,
        session_id: Optional[str] = None,
        parent_session: Any = ABSENT,
        session_dir: str = "",
        clock: Optional[Clock] = None,
        id_source: Optional[IdSource] = None,
    ) -> SessionFile:
        """A new v3 session without a file (Pi's ``SessionManager.inMemory``)."""
        session = cls._blank(None, session_dir, clock, id_source)
        session._header = session._new_header(cwd, session_id, parent_session)
        session._file_objects.append(session._header)
        session._consumed(jsjson.dumps(session._header).encode("utf-8") + b"\n")
        return session

    def _new_header(
        self, cwd: str, session_id: Optional[str], parent_session: Any
    ) -> dict[str, Any]:
        header: dict[str, Any] = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": session_id if session_id is not None else str(uuid.uuid4()),
            "timestamp": jstime.to_iso_string(self._clock()),
            "cwd": cwd,
        }
        _put(header, "parentSession", parent_session)
        return header

    def _load_bytes(self, data: bytes, name: str) -> None:
        parsed = _parse_lines(data)
        if parsed.first_value is ABSENT:
            detail = f" ({parsed.warnings[0]})" if parsed.warnings else ""
            raise SessionError(f"{name}: not a Pi session file: no valid JSON line{detail}")
        header = parsed.first_value
        if not (
            isinstance(header, dict)
            and header.get("type") == "session"
            and isinstance(header.get("id"), str)
        ):
            raise SessionError(
                f"{name}: not a Pi session file: line {parsed.first_line}: the first entry is "
                'not a session header ({"type":"session","id":"..."})'
            )
        self._header = header
        version = header.get("version")
        self._file_version = 1 if version is None else version
        if version is not None and not (
            isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= 3
        ):
            reason = (
                f"header version {jsjson.dumps(version)} is not one Pi writes (1, 2 or 3); "
                f"read as Pi reads it (Number(version) = {_to_number(version):g})"
            )
            self._warnings.append(LoadWarning(parsed.first_line, "odd-version", reason))
        number = _to_number(self._file_version)
        self._migrate_v1 = number < 2
        self._migrate_v3 = number < 3
        if self._migrate_v3:
            header["version"] = CURRENT_SESSION_VERSION
        self._file_objects.append(header)
        self._warnings.extend(parsed.warnings)
        self._absorb(parsed.objects[1:])
        self._warnings.sort(key=lambda w: w.line)
        self._leaf = self._tip
        self._consumed(data)

    def _consumed(self, data: bytes) -> None:
        self._size += len(data)
        self._lines += data.count(b"\n")
        self._tail = (self._tail + data)[-_TAIL_BYTES:]

    # ---------------------------------------------------------------- indexing

    def _absorb(self, objects: Iterable[tuple[int, dict[str, Any]]]) -> int:
        """Migrate (as Pi would on load) and index parsed objects; returns the entry count."""
        items = list(objects)
        self._file_objects.extend(obj for _, obj in items)
        count = 0
        for line, obj in items:
            if obj.get("type") == "session":
                reason = "extra session header ignored (only the first line is the header)"
                self._warnings.append(LoadWarning(line, "extra-header", reason))
                continue
            if self._migrate_v1:
                self._migrate_entry_v1(obj, line)
            if self._migrate_v3 and obj.get("type") == "message":
                message = obj.get("message")
                if isinstance(message, dict) and message.get("role") == "hookMessage":
                    message["role"] = "custom"
            self._index(obj, line)
            count += 1
        return count

    def _migrate_entry_v1(self, entry: dict[str, Any], line: int) -> None:
        entry_id = self._id_source() if self._explicit_ids else self._stable_v1_id(line)
        entry["id"] = entry_id
        entry["parentId"] = self._v1_prev
        self._v1_prev = entry_id
        if entry.get("type") != "compaction" or "firstKeptEntryIndex" not in entry:
            return
        index = entry["firstKeptEntryIndex"]
        if isinstance(index, bool) or not isinstance(index, (int, float)):
            return
        target: Optional[dict[str, Any]] = None
        if float(index).is_integer() and 0 <= index < len(self._file_objects):
            target = self._file_objects[int(index)]
        if target is not None and target.get("type") != "session":
            target_id = target.get("id", ABSENT)
            if target_id is ABSENT:
                entry.pop("firstKeptEntryId", None)
            else:
                entry["firstKeptEntryId"] = target_id
        del entry["firstKeptEntryIndex"]

    def _stable_v1_id(self, line: int) -> str:
        # Pi gives migrated v1 entries random ids and then rewrites the file; we never rewrite,
        # so ids derived from the session id and the line keep them stable across loads.
        seed = f"{self._header.get('id')}\0{line}"
        for attempt in range(100):
            digest = hashlib.sha1(f"{seed}\0{attempt}".encode("utf-8", "replace")).hexdigest()
            candidate = digest[:8]
            if _mkey(candidate) not in self._by_id:
                return candidate
        return random_entry_id()

    def _index(self, entry: dict[str, Any], line: int) -> None:
        entry_id = entry.get("id", ABSENT)
        key = _mkey(entry_id)
        if not isinstance(entry_id, str):
            reason = "entry has no string id (it cannot be a parent or a leaf)"
            self._warnings.append(LoadWarning(line, "bad-entry", reason))
        elif key in self._by_id:
            reason = f"duplicate entry id {entry_id!r}: the later entry wins in the id index"
            self._warnings.append(LoadWarning(line, "duplicate-id", reason))
        if entry.get("type") == "message" and not isinstance(entry.get("message"), dict):
            reason = "message entry without a message object (left out of the context)"
            self._warnings.append(LoadWarning(line, "bad-entry", reason))
        cached = self._branch_path
        if cached is not None and (key in self._by_id or key == cached.dangling):
            self._branch_path = None  # the id index changes under a path walked before
        self._by_id[key] = entry
        self._entries.append(entry)
        self._tip = entry_id
        if entry.get("type") == "label":
            target = _mkey(entry.get("targetId", ABSENT))
            label = entry.get("label", ABSENT)
            if _truthy(label):
                self._labels[target] = label
            else:
                self._labels.pop(target, None)

    # ---------------------------------------------------------------- properties

    @property
    def path(self) -> Optional[Path]:
        """Absolute path of the session file (None for an in-memory session)."""
        return Path(self._path) if self._path is not None else None

    @property
    def session_dir(self) -> str:
        """Directory holding the session file (Pi's ``sessionDir``); ``""`` in memory by default."""
        return self._session_dir

    @property
    def session_id(self) -> str:
        """The header ``id``."""
        return str(self._header["id"])

    @property
    def header(self) -> dict[str, Any]:
        """The header as Pi holds it in memory (``version`` migrated to 3)."""
        return self._header

    @property
    def version(self) -> Any:
        """The header ``version`` as written in the file (1 when absent)."""
        return self._file_version

    @property
    def cwd(self) -> Any:
        """The header ``cwd``."""
        return self._header.get("cwd")

    @property
    def entries(self) -> list[dict[str, Any]]:
        """All non-header entries in file order (migrated in memory); a new list each call."""
        with self._mutex:
            return list(self._entries)

    @property
    def warnings(self) -> list[LoadWarning]:
        """Skipped or suspicious lines, by line number (appended to on refresh)."""
        with self._mutex:
            return list(self._warnings)

    @property
    def leaf_id(self) -> Optional[str]:
        """The current leaf: where the next entry attaches (None = before the first entry)."""
        leaf = self._leaf
        return None if leaf is ABSENT else cast(Optional[str], leaf)

    @property
    def file_leaf_id(self) -> Optional[str]:
        """Id of the last entry in file order (the leaf Pi picks when it loads the file)."""
        tip = self._tip
        return None if tip is ABSENT else cast(Optional[str], tip)

    @property
    def foreign_prune_entries(self) -> int:
        """How many pi-condense entries (``context-prune-*``) another writer (a second
        Condenser) appended that this object has picked up so far."""
        return self._foreign_prune

    def __len__(self) -> int:
        return len(self._entries)

    def get_entry(self, entry_id: str) -> Optional[dict[str, Any]]:
        """The entry with this id (the last one in file order if ids repeat), or None."""
        return self._by_id.get(_mkey(entry_id)) if _truthy(entry_id) else None

    def get_label(self, entry_id: str) -> Optional[str]:
        """The current label of an entry (latest ``label`` entry wins), or None."""
        return self._labels.get(_mkey(entry_id))

    # ---------------------------------------------------------------- navigation

    def _require(self, entry_id: str) -> dict[str, Any]:
        entry = self.get_entry(entry_id)
        if entry is None:
            raise SessionError(f"{self._name()}: entry {entry_id!r} not found")
        return entry

    def set_leaf(self, entry_id: Optional[str]) -> None:
        """Move the leaf (Pi's ``branch(id)``); None resets it before the first entry."""
        with self._mutex:
            if entry_id is None:
                self._leaf = None
            else:
                self._require(entry_id)
                self._leaf = entry_id

    def branch(self, leaf: Optional[str] = None) -> list[dict[str, Any]]:
        """Root-first entries from ``leaf`` (default: the current leaf) up to the root.

        Raises :class:`SessionError` for an unknown id (Pi's ``getBranch`` returns ``[]``).
        """
        with self._mutex:
            if leaf is not None:
                return _walk(self._require(leaf), self._by_id)
            return list(self._current_path().path)

    def branch_path(self) -> tuple[int, Sequence[dict[str, Any]]]:
        """``(epoch, entries)``: the current leaf's branch, root first, kept incrementally.

        The list is shared with the session and must not be changed. While the epoch stays
        the same, every later call returns the same list grown at its end (the leaf moved
        along the branch); a new epoch means a new list (the leaf moved elsewhere, or entries
        read from the file changed how ids resolve). Lets a caller keep facts about the
        branch and update them from the entries added since it last looked.
        """
        with self._mutex:
            cached = self._current_path()
            return cached.epoch, cached.path

    def _current_path(self) -> _BranchPath:
        start = self._leaf
        entry = self._by_id.get(_mkey(start)) if _truthy(start) else None
        cached = self._branch_path
        if cached is not None and (
            cached.leaf is entry or (entry is not None and cached.extend(entry, self._by_id))
        ):
            return cached
        cached = _BranchPath(entry, self._by_id)
        self._branch_path = cached
        return cached

    def build_context(self, leaf: Optional[str] = None) -> SessionContext:
        """Pi's ``buildSessionContext`` from ``leaf`` (default: the current leaf).

        Raises :class:`SessionError` for an unknown id.
        """
        with self._mutex:
            if leaf is not None:
                self._require(leaf)
                return _build_context(self._entries, leaf, self._by_id)
            return _build_context(self._entries, self._leaf, self._by_id)

    # ---------------------------------------------------------------- appending

    def append_entry(self, entry: Mapping[str, Any]) -> str:
        """Append an entry of any type; returns its id.

        ``entry`` holds ``type`` and the type's fields (``ABSENT`` values are omitted); the
        ``id``, ``parentId`` (current leaf) and ``timestamp`` are assigned here, in Pi's key order.
        """
        kind = entry.get("type")
        if not isinstance(kind, str) or kind == "session":
            raise SessionError(f"{self._name()}: cannot append an entry of type {kind!r}")
        reserved = [key for key in ("id", "parentId", "timestamp") if key in entry]
        if reserved:
            raise SessionError(
                f"{self._name()}: entry keys {reserved} are assigned by the session, not the caller"
            )
        return self._append(dict(entry))

    def append_message(self, message: Mapping[str, Any]) -> str:
        """Append a ``message`` entry holding an AgentMessage; returns its id."""
        return self._append({"type": "message", "message": message})

    def append_custom(self, custom_type: str, data: Any = ABSENT) -> str:
        """Append a ``custom`` entry (extension state, never in the context); returns its id."""
        return self._append({"type": "custom", "customType": custom_type, "data": data})

    def append_custom_message(
        self, custom_type: str, content: Any, display: bool, details: Any = ABSENT
    ) -> str:
        """Append a ``custom_message`` entry (in the context after reload); returns its id."""
        return self._append(
            {
                "type": "custom_message",
                "customType": custom_type,
                "content": content,
                "display": display,
                "details": details,
            }
        )

    def append_thinking_level_change(self, thinking_level: str) -> str:
        """Append a ``thinking_level_change`` entry; returns its id."""
        return self._append({"type": "thinking_level_change", "thinkingLevel": thinking_level})

    def append_model_change(self, provider: str, model_id: str) -> str:
        """Append a ``model_change`` entry; returns its id."""
        return self._append({"type": "model_change", "provider": provider, "modelId": model_id})

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: float,
        details: Any = ABSENT,
        from_hook: Any = ABSENT,
    ) -> str:
        """Append a ``compaction`` entry; returns its id."""
        return self._append(
            {
                "type": "compaction",
                "summary": summary,
                "firstKeptEntryId": first_kept_entry_id,
                "tokensBefore": tokens_before,
                "details": details,
                "fromHook": from_hook,
            }
        )

    def branch_with_summary(
        self,
        from_id: Optional[str],
        summary: str,
        details: Any = ABSENT,
        from_hook: Any = ABSENT,
    ) -> str:
        """Move the leaf to ``from_id`` (None = root) and append a ``branch_summary`` there."""
        with self._mutex:
            if from_id is not None:
                self._require(from_id)
            self._leaf = from_id
            return self._append(
                {
                    "type": "branch_summary",
                    "fromId": from_id if from_id is not None else "root",
                    "summary": summary,
                    "details": details,
                    "fromHook": from_hook,
                },
                follow_tip=False,
            )

    def append_label(self, target_id: str, label: Optional[str] = None) -> str:
        """Set (or with None / ``""`` clear) the label of an entry; returns the label entry id."""
        with self._mutex:
            self._require(target_id)
            return self._append(
                {
                    "type": "label",
                    "targetId": target_id,
                    "label": ABSENT if label is None else label,
                }
            )

    def append_session_info(self, name: str) -> str:
        """Append a ``session_info`` entry with the trimmed display name; returns its id."""
        return self._append({"type": "session_info", "name": _js_trim(name)})

    def refresh(self) -> int:
        """Pick up entries another writer appended since our last read; returns how many.

        Raises :class:`SessionError` if the file was rewritten or truncated meanwhile.
        """
        if self._path is None:
            return 0
        with self._mutex:
            fd = self._open(os.O_RDONLY)
            try:
                return self._sync(fd)
            finally:
                os.close(fd)

    # ---------------------------------------------------------------- internals

    def _name(self) -> str:
        return self._path if self._path is not None else "<memory>"

    def _open(self, flags: int) -> int:
        assert self._path is not None
        return open_regular(self._path, flags, "session file")

    def _generate_id(self) -> str:
        for _ in range(100):
            candidate = self._id_source()
            if _mkey(candidate) not in self._by_id:
                return candidate
        return str(uuid.uuid4())

    def _sync(self, fd: int) -> int:
        """Under the lock: index what was appended since our last read (see module docs)."""
        size = os.fstat(fd).st_size
        changed = size < self._size
        if not changed and self._tail:
            start = self._size - len(self._tail)
            changed = _read_exact(fd, start, len(self._tail)) != self._tail
        if changed:
            raise SessionError(
                f"{self._path}: the file was rewritten or truncated since it was loaded "
                "(Pi rewrites v1/v2 files when it opens them); load it again before appending"
            )
        if size == self._size:
            return 0
        data = _read_settled(fd, self._size)
        return self._absorb_bytes(data)

    def _absorb_bytes(self, data: bytes) -> int:
        parsed = _Parsed([], [])
        segments = data.split(b"\n")
        glued = not self._tail.endswith(b"\n")
        for offset, raw in enumerate(segments):
            number = self._lines + 1 + offset
            if offset == 0 and glued:
                if raw.strip():
                    reason = (
                        "text was appended to a line without a trailing newline; "
                        "the joined line is invalid and skipped"
                    )
                    parsed.warnings.append(LoadWarning(number, "glued", reason))
                continue
            text, valid = _decode(raw)
            if _is_blank(text):
                continue
            if not valid:
                reason = "invalid UTF-8 bytes read as U+FFFD"
                parsed.warnings.append(LoadWarning(number, "invalid-utf8", reason))
            torn = offset == len(segments) - 1
            _parse_line(text, number, torn, parsed)
        previous_tip = self._tip
        self._warnings.extend(parsed.warnings)
        self._foreign_prune += sum(1 for _, obj in parsed.objects if _is_prune_entry(obj))
        count = self._absorb(parsed.objects)
        self._warnings.sort(key=lambda w: w.line)
        if count and _mkey(self._leaf) == _mkey(previous_tip):
            self._leaf = self._tip
        self._consumed(data)
        return count

    def _append(self, fields: dict[str, Any], *, follow_tip: bool = True) -> str:
        with self._mutex:
            if self._path is None:
                return self._commit(fields, None)
            fd = self._open(os.O_RDWR | os.O_APPEND)
            try:
                _lock(fd, self._name(), self.lock_timeout)
                try:
                    if follow_tip:
                        self._sync(fd)
                    else:
                        leaf = self._leaf
                        self._sync(fd)
                        self._leaf = leaf
                    return self._commit(fields, fd)
                finally:
                    unlock(fd)
            finally:
                os.close(fd)

    def _commit(self, fields: dict[str, Any], fd: Optional[int]) -> str:
        entry_id = self._generate_id()
        timestamp = jstime.to_iso_string(self._clock())
        entry = _ordered_entry(fields, entry_id, self._leaf, timestamp)
        line = jsjson.dumps(entry)
        stored = jsjson.loads(line)
        payload = line.encode("utf-8") + b"\n"
        if self._tail and not self._tail.endswith(b"\n"):
            payload = b"\n" + payload
        if fd is not None:
            try:
                _write_all(fd, payload)
                os.fsync(fd)
                # Pi appends without a lock: what it wrote between our re-read and our write
                # (O_APPEND put our line after it) is read back and indexed before our line.
                start = os.lseek(fd, 0, os.SEEK_CUR) - len(payload)
                if start > self._size:
                    self._absorb_bytes(_read_exact(fd, self._size, start - self._size))
            except OSError as exc:
                raise SessionError(
                    f"{self._path}: cannot append entry: {exc.strerror or exc}"
                ) from exc
        self._consumed(payload)
        self._file_objects.append(stored)
        self._index(stored, self._lines)
        self._v1_prev = entry_id
        self._leaf = entry_id
        return entry_id
