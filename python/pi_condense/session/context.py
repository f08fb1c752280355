"""Pi's ``buildSessionContext``: the branch walk from a leaf and the messages, thinking level
and model it yields; plus the current branch kept incrementally as entries are appended."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ..js import time as jstime
from ..js.values import ABSENT, map_key, truthy
from .entries import put

__all__ = [
    "STATE_ENTRY_TYPES",
    "BranchPath",
    "ContextBuilder",
    "SessionContext",
    "build_context",
    "build_session_context",
    "context_of_path",
    "walk",
]


@dataclass(frozen=True)
class SessionContext:
    """What Pi's ``buildSessionContext`` returns: messages, thinking level and model.

    ``messages`` share their objects with the session entries: copy before mutating.
    ``model`` is ``{"provider", "modelId"}`` (a key whose value is absent is omitted) or None.
    """

    messages: list[Any]
    thinking_level: Any
    model: Optional[dict[str, Any]]


def _entry_time(entry: Mapping[str, Any]) -> float:
    """``new Date(entry.timestamp).getTime()``."""
    value = entry.get("timestamp", ABSENT)
    if value is ABSENT:
        return math.nan
    return jstime.date_value(value)


def walk(
    leaf: Optional[dict[str, Any]], by_id: Mapping[Any, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Root-first path from ``leaf`` following ``parentId`` (stops at a cycle, unlike Pi)."""
    path: list[dict[str, Any]] = []
    if leaf is None:
        return path
    current = leaf
    append = path.append
    lookup = by_id.get
    # A path without a repeat holds at most every indexed entry and the leaf: a walk that
    # takes more steps has met a cycle, and is walked again with a check at every step.
    for _ in range(len(by_id) + 1):
        append(current)
        parent = current.get("parentId")
        if type(parent) is str:  # what JSON gives: no JS conversion needed
            found = lookup(parent) if parent else None
        else:
            found = lookup(map_key(parent)) if truthy(parent) else None
        if found is None:
            path.reverse()
            return path
        current = found
    return _walk_checked(leaf, by_id)


def _walk_checked(
    leaf: Optional[dict[str, Any]], by_id: Mapping[Any, dict[str, Any]]
) -> list[dict[str, Any]]:
    path: list[dict[str, Any]] = []
    seen: set[int] = set()
    current = leaf
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        path.append(current)
        parent = current.get("parentId", ABSENT)
        current = by_id.get(map_key(parent)) if truthy(parent) else None
    path.reverse()
    return path


def _model_of(provider: Any, model_id: Any) -> dict[str, Any]:
    model: dict[str, Any] = {}
    put(model, "provider", provider)
    put(model, "modelId", model_id)
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
            put(custom, key, entry.get(key, ABSENT))
        custom["timestamp"] = _entry_time(entry)
        out.append(custom)
    elif kind == "branch_summary" and truthy(entry.get("summary", ABSENT)):
        summary: dict[str, Any] = {"role": "branchSummary", "summary": entry["summary"]}
        put(summary, "fromId", entry.get("fromId", ABSENT))
        summary["timestamp"] = _entry_time(entry)
        out.append(summary)
    elif kind == "compaction":
        # Only reached for an earlier compaction inside the kept range of the last one
        # (the builder keeps compactions apart); current Pi shows its summary there too.
        out.append(_compaction_summary(entry))


def _compaction_summary(compaction: dict[str, Any]) -> dict[str, Any]:
    head: dict[str, Any] = {"role": "compactionSummary"}
    put(head, "summary", compaction.get("summary", ABSENT))
    put(head, "tokensBefore", compaction.get("tokensBefore", ABSENT))
    head["timestamp"] = _entry_time(compaction)
    return head


def _emit_all(entries: Iterable[dict[str, Any]], out: list[Any]) -> None:
    append = out.append
    for entry in entries:
        kind = entry.get("type")
        if kind == "message":  # most entries: inline _emit's first case
            message = entry.get("message")
            if isinstance(message, dict):
                append(message)
        elif kind == "custom_message" or kind == "branch_summary":
            _emit(entry, out)


def build_context(
    entries: Sequence[dict[str, Any]], leaf_id: Any, by_id: Mapping[Any, dict[str, Any]]
) -> SessionContext:
    if leaf_id is None:
        return SessionContext([], "off", None)
    leaf = by_id.get(map_key(leaf_id)) if truthy(leaf_id) else None
    if leaf is None:
        if not entries:
            return SessionContext([], "off", None)
        leaf = entries[-1]
    return context_of_path(walk(leaf, by_id))


STATE_ENTRY_TYPES = ("custom", "custom_message")
"""The entry types that can hold pruner state (``custom_entries``)."""


def context_of_path(path: Sequence[dict[str, Any]]) -> SessionContext:
    """The context of a root-first branch (what :func:`walk` gives)."""
    builder = ContextBuilder()
    builder.feed(path)
    return builder.context(path, copy=False)


class ContextBuilder:
    """The context of a root-first branch, built as the branch grows at its end: each
    entry is read once, however often the context is asked for."""

    __slots__ = (
        "_assistant_at",
        "_scanned",
        "compaction",
        "customs",
        "length",
        "messages",
        "model_change",
        "model_change_at",
        "thinking_level",
    )

    def __init__(self) -> None:
        # The messages as if the branch had no compaction (the usual case).
        self.messages: list[Any] = []
        self.thinking_level: Any = "off"
        self.model_change: Optional[dict[str, Any]] = None
        self.model_change_at = 0  # how many messages came before it
        self.compaction: Optional[dict[str, Any]] = None
        # The custom and custom_message entries: what the pruner's state is rebuilt from.
        self.customs: list[dict[str, Any]] = []
        self.length = 0  # entries fed
        # The last assistant message (the other entry that sets the model) is looked for
        # from the end only when the model is asked for: the role is a read of each
        # message, which loading a session would otherwise pay for every one.
        self._scanned = 0
        self._assistant_at = -1

    def feed(self, entries: Sequence[dict[str, Any]]) -> None:
        """Read the entries that follow the ones fed so far."""
        append = self.messages.append
        for entry in entries:
            kind = entry.get("type")
            if kind == "message":
                message = entry.get("message")
                if isinstance(message, dict):
                    append(message)
            else:
                self.feed_other(entry, kind)
        self.length += len(entries)

    def feed_other(self, entry: dict[str, Any], kind: Any) -> None:
        """:meth:`feed` of one entry whose ``type`` is ``kind``, not ``"message"`` (the
        caller counts it in :attr:`length`)."""
        if kind in STATE_ENTRY_TYPES:
            self.customs.append(entry)
        self.feed_other_messages(entry, kind)

    def feed_other_messages(self, entry: dict[str, Any], kind: Any) -> None:
        """:meth:`feed_other` but for :attr:`customs` (the caller collects those)."""
        if kind == "custom_message" or kind == "branch_summary":
            _emit(entry, self.messages)
        elif kind == "thinking_level_change":
            self.thinking_level = entry.get("thinkingLevel")
        elif kind == "model_change":
            self.model_change = entry
            self.model_change_at = len(self.messages)
        elif kind == "compaction":
            self.compaction = entry

    def _model(self) -> Optional[dict[str, Any]]:
        messages = self.messages
        # Only message entries give messages with role "assistant" (emitted ones are
        # "custom" or "branchSummary").
        for i in range(len(messages) - 1, self._scanned - 1, -1):
            if messages[i].get("role") == "assistant":
                self._assistant_at = i
                break
        self._scanned = len(messages)
        at = self._assistant_at
        change = self.model_change
        if at >= 0 and (change is None or at >= self.model_change_at):
            message = messages[at]
            return _model_of(message.get("provider", ABSENT), message.get("model", ABSENT))
        if change is not None:
            return _model_of(change.get("provider", ABSENT), change.get("modelId", ABSENT))
        return None

    def context(self, path: Sequence[dict[str, Any]], *, copy: bool = True) -> SessionContext:
        """The context of ``path``, the entries fed (``copy``: a list of its own)."""
        model = self._model()
        if self.compaction is None:
            messages = list(self.messages) if copy else self.messages
            return SessionContext(messages, self.thinking_level, model)
        return SessionContext(_compacted(path, self.compaction), self.thinking_level, model)


def _compacted(path: Sequence[dict[str, Any]], compaction: dict[str, Any]) -> list[Any]:
    """The messages of a branch whose last compaction entry is ``compaction``."""
    messages: list[Any] = [_compaction_summary(compaction)]

    compaction_key = map_key(compaction.get("id", ABSENT))
    index = next(
        i
        for i, entry in enumerate(path)
        if entry.get("type") == "compaction" and map_key(entry.get("id", ABSENT)) == compaction_key
    )
    first_kept = map_key(compaction.get("firstKeptEntryId", ABSENT))
    found = False
    for entry in path[:index]:
        if not found and map_key(entry.get("id", ABSENT)) == first_kept:
            found = True
        if found:
            _emit(entry, messages)
    _emit_all(path[index + 1 :], messages)
    return messages


def build_session_context(
    entries: Sequence[dict[str, Any]], leaf_id: Any = ABSENT
) -> SessionContext:
    """Pi's free ``buildSessionContext(entries, leafId)`` over non-header entries.

    ``leaf_id=None`` (JS ``null``) gives no messages; an absent or unknown id uses the last
    entry. Entries are not copied.
    """
    by_id: dict[Any, dict[str, Any]] = {}
    for entry in entries:
        by_id[map_key(entry.get("id", ABSENT))] = entry
    return build_context(entries, leaf_id, by_id)


# --------------------------------------------------------------------------------------------
# The current branch, kept incrementally

_EPOCHS = itertools.count(1)
_EXTEND_STEPS = 256
"""How far back from a new leaf the kept path is looked for before walking it again."""


class BranchPath:
    """The root-first path of one leaf entry, grown in place while the leaf moves to a child
    of its last entry (a message appended at the leaf: the common case, O(1))."""

    __slots__ = ("builder", "dangling", "epoch", "leaf", "path")

    def __init__(self, leaf: Optional[dict[str, Any]], by_id: Mapping[Any, dict[str, Any]]):
        self._start(walk(leaf, by_id))

    @classmethod
    def of_path(
        cls, path: list[dict[str, Any]], builder: Optional[ContextBuilder] = None
    ) -> BranchPath:
        """The branch of ``path[-1]``, given its root-first path (what :func:`walk` gives)
        and, if already read, the builder of its context."""
        self = object.__new__(cls)
        self._start(path)
        if builder is not None and builder.length == len(path):
            self.builder = builder
        return self

    def _start(self, path: list[dict[str, Any]]) -> None:
        self.epoch = next(_EPOCHS)
        self.leaf = path[-1] if path else None
        self.path = path
        self.builder: Optional[ContextBuilder] = None
        # An id the root names as its parent: an entry with that id would change the path.
        parent = path[0].get("parentId", ABSENT) if path else ABSENT
        self.dangling: Any = map_key(parent) if truthy(parent) else None

    def _read(self) -> ContextBuilder:
        builder = self.builder
        if builder is None:
            builder = self.builder = ContextBuilder()
        path = self.path
        if builder.length < len(path):
            builder.feed(path[builder.length :] if builder.length else path)
        return builder

    def context(self) -> SessionContext:
        """The context of the path (its entries read once: a grown path reads the new ones)."""
        return self._read().context(self.path)

    def custom_entries(self) -> list[dict[str, Any]]:
        """The ``custom`` and ``custom_message`` entries of the path, root first."""
        return list(self._read().customs)

    def extend(self, leaf: dict[str, Any], by_id: Mapping[Any, dict[str, Any]]) -> bool:
        """Move to ``leaf`` if it descends from the current leaf within a few entries (the
        entries appended since the last look); False (nothing changed) otherwise."""
        if self.leaf is None:
            return False
        added: list[dict[str, Any]] = []
        current: Optional[dict[str, Any]] = leaf
        # a walk as long as the path costs what a rebuild would (thousands of entries
        # appended at once, e.g. a late join's, keep the path and what was learned of it).
        # A leaf off the path's end walks up to the root (or this bound) before the rebuild:
        # no set of the path's members is kept to stop it sooner (its memory grew with every
        # session a process holds: 2.7 MB for the 20k entries of `condense` x10).
        steps = max(_EXTEND_STEPS, len(self.path))
        while current is not self.leaf:
            if current is None or len(added) >= steps:
                return False
            added.append(current)
            parent = current.get("parentId", ABSENT)
            current = by_id.get(map_key(parent)) if truthy(parent) else None
        added.reverse()
        self.path.extend(added)
        self.leaf = leaf
        return True
