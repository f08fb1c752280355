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
    "BranchPath",
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


def context_of_path(path: Sequence[dict[str, Any]]) -> SessionContext:
    """The context of a root-first branch (what :func:`walk` gives)."""
    thinking_level: Any = "off"
    # The last entry that sets the model; its model dict is built once, at the end.
    model_from: Optional[dict[str, Any]] = None
    compaction: Optional[dict[str, Any]] = None
    # One pass gathers the messages as if the branch had no compaction (the usual case).
    messages: list[Any] = []
    append = messages.append
    for entry in path:
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            if isinstance(message, dict):
                append(message)
                if message.get("role") == "assistant":
                    model_from = entry
        elif kind == "custom_message" or kind == "branch_summary":
            _emit(entry, messages)
        elif kind == "thinking_level_change":
            thinking_level = entry.get("thinkingLevel")
        elif kind == "model_change":
            model_from = entry
        elif kind == "compaction":
            compaction = entry
    model: Optional[dict[str, Any]] = None
    if model_from is not None:
        if model_from.get("type") == "model_change":
            model = _model_of(model_from.get("provider", ABSENT), model_from.get("modelId", ABSENT))
        else:
            message = model_from["message"]
            model = _model_of(message.get("provider", ABSENT), message.get("model", ABSENT))
    if compaction is None:
        return SessionContext(messages, thinking_level, model)

    messages = []
    head: dict[str, Any] = {"role": "compactionSummary"}
    put(head, "summary", compaction.get("summary", ABSENT))
    put(head, "tokensBefore", compaction.get("tokensBefore", ABSENT))
    head["timestamp"] = _entry_time(compaction)
    messages.append(head)

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

    __slots__ = ("dangling", "epoch", "leaf", "members", "path")

    def __init__(self, leaf: Optional[dict[str, Any]], by_id: Mapping[Any, dict[str, Any]]):
        self.epoch = next(_EPOCHS)
        self.leaf = leaf
        self.path = walk(leaf, by_id)
        self.members = set(map(id, self.path))
        # An id the root names as its parent: an entry with that id would change the path.
        parent = self.path[0].get("parentId", ABSENT) if self.path else ABSENT
        self.dangling: Any = map_key(parent) if truthy(parent) else None

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
            current = by_id.get(map_key(parent)) if truthy(parent) else None
        added.reverse()
        self.path.extend(added)
        self.members.update(id(entry) for entry in added)
        self.leaf = leaf
        return True
