"""Entry vocabulary and construction: the format version, clocks and id sources, and new
entries laid out in Pi's key order for their type."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Callable

from ..js.values import ABSENT

__all__ = [
    "CURRENT_SESSION_VERSION",
    "Clock",
    "IdSource",
    "is_prune_entry",
    "ordered_entry",
    "put",
    "random_entry_id",
]

CURRENT_SESSION_VERSION = 3
"""Session format version Pi writes (and the one entries are migrated to in memory)."""

Clock = Callable[[], int]
"""Epoch milliseconds, like ``Date.now()``."""

IdSource = Callable[[], str]
"""Candidate entry ids (Pi: the first 8 hex chars of a random UUID)."""


class _RandomHex:
    """Random hex digits from the OS, read 4 KiB at a time (one ``getrandom`` call for 512
    ids rather than one an id: a late join makes ten thousand); a forked child reads its
    own, so it never hands out its parent's ids."""

    def __init__(self) -> None:
        self.digits = ""
        self.at = 0

    def take(self) -> str:
        at = self.at
        if at + 8 > len(self.digits):
            self.digits = os.urandom(2048).hex()
            at = 0
        self.at = at + 8
        return self.digits[at : at + 8]

    def forget(self) -> None:
        self.digits = ""
        self.at = 0


_RANDOM_HEX = _RandomHex()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_RANDOM_HEX.forget)


def random_entry_id() -> str:
    """The default id source: the first 8 hex chars of a random UUID, as Pi's ``generateId``
    (a version 4 UUID's first 32 bits are random bits: four random bytes, without the UUID)."""
    return _RANDOM_HEX.take()


def put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not ABSENT:
        target[key] = value


def is_prune_entry(entry: Mapping[str, Any]) -> bool:
    kind = entry.get("customType")
    return isinstance(kind, str) and kind.startswith("context-prune-")


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


def ordered_entry(
    fields: Mapping[str, Any], entry_id: str, parent_id: Any, timestamp: str
) -> dict[str, Any]:
    kind = fields["type"]
    known = _PAYLOAD_ORDER.get(kind, ())
    payload: dict[str, Any] = {}
    for key in known:
        if key in fields:
            put(payload, key, fields[key])
    for key, value in fields.items():
        if key != "type" and key not in payload and key not in known:
            put(payload, key, value)
    entry: dict[str, Any] = {"type": kind}
    if kind in _PAYLOAD_FIRST:
        entry.update(payload)
    entry["id"] = entry_id
    put(entry, "parentId", parent_id)
    entry["timestamp"] = timestamp
    if kind not in _PAYLOAD_FIRST:
        entry.update(payload)
    return entry
