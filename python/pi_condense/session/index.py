"""The entry index of a :class:`~pi_condense.session.SessionFile`: entries in file order, the id
index, labels and the tip, read from parsed lines by the native loop, with the in-memory
migration of version 1 and 2 entries as Pi does on load."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, Optional

from .._core import index_entries
from ..js.values import ABSENT, map_key, truthy
from .context import BranchPath, ContextBuilder
from .entries import IdSource, random_entry_id
from .jsonl import LoadWarning

__all__ = ["EntryIndex"]

# The indexing warnings, by code (the native loop reports codes): (kind, reason) given the
# entry's id.
_INDEX_WARNINGS: dict[str, Callable[[Any], tuple[str, str]]] = {
    "extra-header": lambda _: (
        "extra-header",
        "extra session header ignored (only the first line is the header)",
    ),
    "duplicate-id": lambda entry_id: (
        "duplicate-id",
        f"duplicate entry id {entry_id!r}: the later entry wins in the id index",
    ),
    "no-message": lambda _: (
        "bad-entry",
        "message entry without a message object (left out of the context)",
    ),
    "no-string-id": lambda _: (
        "bad-entry",
        "entry has no string id (it cannot be a parent or a leaf)",
    ),
}


class EntryIndex:
    """What a session knows of its entries; :class:`~pi_condense.session.SessionFile` builds on
    it (it sets every attribute below before the first entry is indexed)."""

    _id_source: IdSource
    _explicit_ids: bool
    _header: dict[str, Any]
    _migrate_v1: bool
    _migrate_v3: bool
    _v1_prev: Any
    # Every object of the file in order (the header first): what a version 1 entry's
    # firstKeptEntryIndex counts. Kept only while version 1 entries are migrated.
    _file_objects: list[dict[str, Any]]
    _entries: list[dict[str, Any]]
    _by_id: dict[Any, dict[str, Any]]
    _labels: dict[Any, Any]
    _tip: Any
    _warnings: list[LoadWarning]
    _branch_path: Optional[BranchPath]
    _linear_count: int
    _linear_context: Optional[ContextBuilder]

    def _absorb(self, objects: Iterable[tuple[int, dict[str, Any]]]) -> int:
        """Migrate (as Pi would on load) and index parsed objects; returns the entry count."""
        items = objects if isinstance(objects, list) else list(objects)
        if not (self._migrate_v1 or self._migrate_v3):
            return self._index_all(items)
        if self._migrate_v1:
            self._file_objects.extend([obj for _, obj in items])
        count = 0
        for line, obj in items:
            if obj.get("type") != "session":
                if self._migrate_v1:
                    self._migrate_entry_v1(obj, line)
                if self._migrate_v3 and obj.get("type") == "message":
                    message = obj.get("message")
                    if isinstance(message, dict) and message.get("role") == "hookMessage":
                        message["role"] = "custom"
            # A v1 id is checked against the index as it grows: index one at a time.
            count += self._index_all(((line, obj),))
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
            if map_key(candidate) not in self._by_id:
                return candidate
        return random_entry_id()

    def _index_all(self, items: Iterable[tuple[int, dict[str, Any]]]) -> int:
        """Index entries in file order (the id index, labels, the tip; a warning for an
        extra header, which is skipped, an entry without a string id, a repeated id, a
        message entry without a message); returns how many were indexed."""
        entries = self._entries
        cached = self._branch_path
        # Whether every entry so far is the child of the one before, the first a root (then
        # the tip's branch is every entry, in file order: see _current_path), and the
        # context of that branch, read in the same pass (a walk of a long branch is slow).
        builder = None if entries else ContextBuilder()
        done = index_entries(
            items if isinstance(items, list) else list(items),
            self._by_id,
            entries,
            builder is not None,
            cached.dangling if cached is not None else None,
            map_key,
        )
        for line, code, bad_id in done.warnings:
            self._warnings.append(LoadWarning(line, *_INDEX_WARNINGS[code](bad_id)))
        for label_entry in done.labels:
            self._label(label_entry)
        self._branch_path = None if done.invalidated else cached
        self._linear_count = len(entries) if done.linear and done.count else 0
        if builder is not None and self._linear_count:
            builder.customs.extend(done.customs)
            told = 0
            for before, other, kind in done.others:
                builder.messages.extend(done.messages[told:before])
                told = before
                builder.feed_other_messages(other, kind)
            builder.messages.extend(done.messages[told:])
            builder.length = len(entries)
            self._linear_context = builder
        else:
            self._linear_context = None
        if done.count:
            self._tip = done.last_id
        return done.count

    def _label(self, entry: dict[str, Any]) -> None:
        target = map_key(entry.get("targetId", ABSENT))
        label = entry.get("label", ABSENT)
        if truthy(label):
            self._labels[target] = label
        else:
            self._labels.pop(target, None)

    def _index(self, entry: dict[str, Any], line: int) -> None:
        self._index_all(((line, entry),))
