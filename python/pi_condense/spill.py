"""Eager spill: huge single tool results go to a sidecar file at capture time (spec 05 section 4).

At ``turn_end`` every captured result of at least ``spillThreshold`` UTF-16 units is written
to ``<sessionDir>/<sessionId>-blobs/<sanitized occurrence key>.txt`` (a name capped at 255
bytes, see :func:`blob_name`) and indexed right away with an empty ``resultText``, a head
preview, its UTF-8 size and the content hash of the full body; render then shows a stub
pointing at the file. A result whose content equals an
already-indexed one becomes a dedup alias of it instead (no file).

The file is written before the record is changed or indexed: a failed write leaves the call
raw for the normal flush. Files hold UTF-8, with every lone surrogate written as U+FFFD
(``EF BF BD``), as Node writes JavaScript strings. We write through a temporary file that is
fsynced and renamed over the target, so a crash never leaves a truncated blob behind a record
(the reference overwrites in place; a reader sees the same bytes either way).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import stat
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ._fs.blob import plain_session_id, write_blob_bytes
from .capture import CapturedBatch, call_key
from .js import json as jsjson
from .js.values import js_utf8, to_string, truthy
from .keys import hash_tool_result, parse_occ_key
from .state import PrunerState

__all__ = [
    "SpillSettings",
    "alias_entry_data",
    "blob_dir",
    "blob_name",
    "blob_path",
    "give_spilled_refs",
    "head_preview",
    "index_records",
    "js_utf8",
    "safe_session_id",
    "sanitize_id",
    "session_blob_writer",
    "spill_batch",
    "write_blob",
]

Append = Callable[[str, Any], Any]
"""``appendCustomEntry(customType, data)``."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_RECORD_SPILL_KEYS = ("spillPath", "spillBytes", "resultPreview", "contentHash")
_NAME_MAX = 255
_CAPPED_PREFIX = _NAME_MAX - len(".") - 16 - len(".txt")


def sanitize_id(key: str) -> str:
    """Every UTF-16 unit outside ``[A-Za-z0-9_-]`` becomes ``_`` (so ``../x`` cannot climb out
    of the blob directory; a character outside the BMP becomes ``__``)."""
    return _UNSAFE.sub(lambda m: "__" if ord(m.group()) > 0xFFFF else "_", key)


def blob_dir(session_dir: str, session_id: str) -> str:
    """``<sessionDir>/<sessionId>-blobs``, joined and normalized as Node's ``path.join``."""
    return _node_join(session_dir, f"{session_id}-blobs")


def blob_name(key: str) -> str:
    """The sidecar file name of occurrence ``key``: ``<sanitized key>.txt`` while that fits in
    255 bytes; a longer one keeps the first 234 sanitized characters, then ``.`` and the first
    16 hex digits of the SHA-1 of the key itself (JS UTF-8), then ``.txt`` (255 bytes exactly,
    as pi-condense 2.10.1). The sanitizer never writes ``.``, so the two forms cannot collide."""
    base = sanitize_id(key)
    if len(base) <= _NAME_MAX - len(".txt"):
        return f"{base}.txt"
    digest = hashlib.sha1(js_utf8(key)).hexdigest()[:16]
    return f"{base[:_CAPPED_PREFIX]}.{digest}.txt"


def blob_path(session_dir: str, session_id: str, key: str) -> str:
    """The sidecar path of occurrence ``key`` (legacy bare ids map the same way)."""
    return _node_join(blob_dir(session_dir, session_id), blob_name(key))


def safe_session_id(session_id: str) -> bool:
    """Whether ``<session_id>-blobs`` is a plain directory name (no separator, no drive
    colon, no NUL), so the blob directory is a child of the session directory on every
    platform (``C:x-blobs`` would be drive-relative on Windows)."""
    return plain_session_id(session_id)


def _node_join(*parts: str) -> str:
    if os.sep != "/":  # pragma: no cover - Windows
        return os.path.normpath(os.path.join(*parts))
    joined = "/".join(p for p in parts if p)
    return posixpath.normpath(joined) if joined else "."


def head_preview(text: str, max_bytes: int) -> str:
    """The head of ``text`` within ``max_bytes`` UTF-8 bytes, cut at a character boundary and
    then before the last newline (unless that newline is the first character)."""
    data = js_utf8(text)
    if len(data) <= max_bytes:
        return text
    end = max(0, max_bytes)
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    head = data[:end].decode("utf-8")
    cut = head.rfind("\n")
    return head[:cut] if cut > 0 else head


def write_blob(path: str, text: str, *, mode: Optional[int] = None) -> None:
    """Write ``text`` (JS UTF-8) to ``path``: parent dirs created, temp file fsynced, renamed
    (see :mod:`pi_condense._fs.blob`, which also removes what killed writers left).
    ``mode`` is the permission bits of the session the blob belongs to: the blob and its
    directory are no more open than it (None: the umask's)."""
    write_blob_bytes(path, js_utf8(text), mode=mode)


def session_blob_writer(session_path: Optional[str]) -> Callable[[str, str], None]:
    """A ``write_blob(path, text)`` for the session file at ``session_path``: each blob and
    its directory no more open than that file is at the time of the write (a 0600 session
    gets 0600 blobs in a 0700 directory)."""

    def write(path: str, text: str) -> None:
        mode = None
        if session_path is not None:
            try:
                mode = stat.S_IMODE(os.stat(session_path).st_mode)
            except OSError:
                mode = None
        write_blob(path, text, mode=mode)

    return write


def _taken(path: str, text: str) -> bool:
    """Whether ``path`` exists (by any case, on a case-insensitive filesystem) and holds
    something other than ``text``."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return False
    except OSError:
        return True
    data = js_utf8(text)
    if size != len(data):
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(len(data) + 1) != data
    except OSError:
        return True


def alias_entry_data(new_key: str, original_key: str) -> dict[str, Any]:
    """``context-prune-dedup-alias`` data for two occurrence keys (writer key order)."""
    new_id, new_ts = parse_occ_key(new_key)
    original_id, original_ts = parse_occ_key(original_key)
    data: dict[str, Any] = {"newToolCallId": new_id, "originalToolCallId": original_id}
    if new_ts is not None:
        data["newResultTimestamp"] = new_ts
    if original_ts is not None:
        data["originalResultTimestamp"] = original_ts
    return data


def index_records(batch: CapturedBatch) -> list[dict[str, Any]]:
    """The ``ToolCallRecord`` dicts ``addBatch`` builds for a batch (spec 03 section 9)."""
    records = []
    for call in batch.tool_calls:
        record: dict[str, Any] = {
            "toolCallId": call["toolCallId"],
            "toolName": call["toolName"],
            "args": call["args"],
            "resultText": call["resultText"],
            "isError": call["isError"],
            "turnIndex": batch.turn_index,
            "timestamp": batch.timestamp,
        }
        if call.get("resultTimestamp") is not None:
            record["resultTimestamp"] = call["resultTimestamp"]
        for key in _RECORD_SPILL_KEYS:
            if call.get(key) is not None:
                record[key] = call[key]
        records.append(record)
    return records


def _name(call: dict[str, Any]) -> str:
    name = call.get("toolName")
    return name if isinstance(name, str) else to_string(name)


@dataclass(frozen=True)
class SpillSettings:
    """When and where to spill: thresholds from the config, the session's blob location."""

    threshold: int
    preview_bytes: int
    dedup: bool
    session_dir: str
    session_id: str
    write: Optional[Callable[[str, str], None]] = None
    """Writes one sidecar ``(path, text)``; None: :func:`write_blob`."""
    refs: bool = False
    """Give every spilled record its own short ref ``tN`` at once (ours; the reference
    leaves spilled records without one, so their stubs name the bare tool-call id)."""


def spill_batch(
    batch: CapturedBatch,
    state: PrunerState,
    settings: SpillSettings,
    append: Append,
    *,
    on_error: Optional[Callable[[str, BaseException], None]] = None,
) -> set[str]:
    """The reference's ``spillOversizedBatch`` on a live, protection-filtered batch.

    Oversized calls are deduplicated (alias entry) or written to a sidecar and changed in place
    (``spillBytes``, ``resultPreview``, ``spillPath``, ``contentHash``, ``resultText = ""``);
    the spilled ones are then indexed as one ``context-prune-index`` entry. Returns the ids of
    the handled calls. A failed write is reported to ``on_error`` and leaves the call raw.

    With ``settings.refs`` the spilled records then get fresh short refs, written as a second
    ``context-prune-index`` entry ``{"toolCalls": [], "backfilled": true, "refs": [...]}``:
    the shape the reference's reader registers refs from (spec 02 section 1), so a session we
    wrote renders and answers the same there. The records' own entry stays a plain one (its
    hashes seed the dedup map).
    """
    handled: set[str] = set()
    spilled = []
    write = settings.write if settings.write is not None else write_blob
    for call in batch.tool_calls:
        text = call["resultText"]
        if jsjson.utf16_len(text) < settings.threshold:
            continue
        key = call_key(call)
        if settings.dedup:
            original: Optional[str] = state.lookup_by_content(_name(call), text)
            if original is not None and original != key:
                state.register_duplicate(key, original)
                append("context-prune-dedup-alias", alias_entry_data(key, original))
                handled.add(call["toolCallId"])
                continue
        path = blob_path(settings.session_dir, settings.session_id, key)
        if _taken(path, text):
            # Another call's sidecar has this name (ids differing only in characters the
            # sanitizer maps to "_", or in case): keep this one inline (spec: never overwrite).
            if on_error is not None:
                on_error(path, FileExistsError(f"{path} holds another call's output"))
            continue
        try:
            write(path, text)
        except OSError as exc:
            if on_error is not None:
                on_error(path, exc)
            continue
        call["spillBytes"] = len(js_utf8(text))
        call["resultPreview"] = head_preview(text, settings.preview_bytes)
        call["spillPath"] = path
        call["contentHash"] = hash_tool_result(_name(call), text)
        call["resultText"] = ""
        spilled.append(call)
        handled.add(call["toolCallId"])
    if spilled:
        spill = CapturedBatch(batch.turn_index, batch.timestamp, "", spilled)
        records = index_records(spill)
        state.add_batch(records)
        append("context-prune-index", {"toolCalls": records})
        if settings.refs:
            _give_refs(state, records, append)
    return handled


def give_spilled_refs(state: PrunerState, append: Append) -> int:
    """Give every spilled record of ``state`` that has no short ref one (a session written by
    an earlier version, or in ``compat: "reference"``, whose spill stubs name the bare id),
    written as :func:`spill_batch` writes them. Returns how many got one."""
    index = state.index
    records = []
    keys: list[str] = index.keys()  # a native method, not a dict view
    for key in keys:
        if index.short_ref(key) is None:
            record = index.get_record(key)
            if record is not None and truthy(record.get("spillPath")):
                records.append(record)
    if records:
        _give_refs(state, records, append)
    return len(records)


def _give_refs(state: PrunerState, records: list[dict[str, Any]], append: Append) -> None:
    refs = state.allocate_refs((r["toolCallId"], r.get("resultTimestamp")) for r in records)
    state.register_refs(refs)
    append("context-prune-index", {"toolCalls": [], "backfilled": True, "refs": refs})
