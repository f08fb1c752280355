"""Context metrics: what the branch holds, for the flush-metrics entries and ``status``.

- :class:`ContextMetrics` computes the reference's ``computeContextMetrics`` snapshot (spec 08
  section 5): thinking tokens of the open segment, the largest chain's share of the branch and
  the unsummarized tool output past the prune frontier. Message sizes are cached per message
  object, so recomputing after every turn costs only the new messages' serialization.
- :class:`BranchMetrics` computes the same snapshot incrementally, as a branch grows.

The summarizer stats, diagnostics and the status line are in :mod:`pi_condense.status`.
"""

from __future__ import annotations

import bisect
import logging
import math
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, TypedDict, Union

from ._core import tool_call_args_member
from .capture import ProtectionPredicate, entry_time, is_chain_anchor_custom
from .js import json as jsjson
from .js.values import MISSING, get_field, js_round, strict_equal, to_string
from .keys import occ_key, result_timestamp_of
from .render import image_price
from .state import Frontier

__all__ = [
    "EMPTY_METRICS",
    "BranchMetrics",
    "ContextMetrics",
    "MetricsSnapshot",
    "message_chars",
    "project_branch_messages",
    "project_custom_message",
]

log = logging.getLogger(__name__)

Number = Union[int, float]


class MetricsSnapshot(TypedDict):
    """``ContextMetricsSnapshot`` (the ``metrics`` of a flush-metrics entry, writer key order)."""

    openCycleThinkingTokens: int
    largestChainSharePct: int
    frontierGapTokens: int


EMPTY_METRICS: MetricsSnapshot = {
    "openCycleThinkingTokens": 0,
    "largestChainSharePct": 0,
    "frontierGapTokens": 0,
}
"""The snapshot recorded when the metrics could not be computed."""


# ------------------------------------------------------------------------------ metrics


def _role(message: Any) -> Optional[str]:
    """The message's role when it is a string (other values never match a role)."""
    role = message.get("role") if isinstance(message, dict) else None
    return role if isinstance(role, str) else None


def _tool_call_blocks(message: Any) -> list[Any]:
    content = get_field(message, "content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def _is_synthetic_chain(message: Any) -> bool:
    content = get_field(message, "content")
    if isinstance(content, str):
        text: Any = content
    elif (
        isinstance(content, list)
        and content
        and strict_equal(get_field(content[0], "type"), "text")
    ):
        text = get_field(content[0], "text")
    else:
        return False
    return isinstance(text, str) and text.lstrip(_JS_WS).startswith("<compressed-chain")


_JS_WS = "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)


def _stamp_key(value: Any) -> Any:
    """A dict key with JavaScript ``===`` semantics for a timestamp value: a number (not NaN)
    or a string is its own key (no tuple per message: a number never equals a string, and
    the booleans, equal to 0 and 1 in Python, are tagged)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return value if value == value else ("nan", id(value))
    if isinstance(value, str):
        return value
    if value is None:
        return ("null",)
    if value is MISSING:
        return ("undefined",)
    return ("o", id(value))


def project_branch_messages(branch: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The branch as the metrics see it: ``message`` entries' messages and ``custom_message``
    entries projected to ``{role: "custom", customType, content, display, details, timestamp}``
    (the entry's ISO timestamp parsed)."""
    return ContextMetrics().project(branch)


def project_custom_message(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A ``custom_message`` entry as the metrics see it (see :func:`project_branch_messages`)."""
    custom: dict[str, Any] = {"role": "custom"}
    for key in ("customType", "content", "display", "details"):
        if key in entry:
            custom[key] = entry[key]
    custom["timestamp"] = entry_time(entry["timestamp"]) if "timestamp" in entry else math.nan
    return custom


def message_chars(message: Any) -> int:
    """The reference's ``charsOf(message)``: ``JSON.stringify(message).length`` with image
    blocks at a flat 1,600 tokens (2.11.1)."""
    return jsjson.length(message) + image_price(message)


class ContextMetrics:
    """``computeContextMetrics`` with per-message size and projection caches.

    The caches hold the message objects they measured, keyed by identity; session entries
    never change once written, so a cached size stays right.
    """

    __slots__ = ("_chars", "_projected")

    def __init__(self) -> None:
        self._chars: dict[int, tuple[Any, int]] = {}
        self._projected: dict[int, tuple[Any, dict[str, Any]]] = {}

    def project(self, branch: Sequence[Mapping[str, Any]]) -> list[Any]:
        """:func:`project_branch_messages`, reusing earlier projections of the same entries."""
        out: list[Any] = []
        for entry in branch:
            kind = entry.get("type")
            if kind == "message":
                message = entry.get("message")
                if message:
                    out.append(message)
            elif kind == "custom_message":
                cached = self._projected.get(id(entry))
                if cached is None or cached[0] is not entry:
                    cached = (entry, project_custom_message(entry))
                    self._projected[id(entry)] = cached
                out.append(cached[1])
        return out

    def chars(self, message: Any) -> int:
        """:func:`message_chars`, cached per object."""
        cached = self._chars.get(id(message))
        if cached is None or cached[0] is not message:
            cached = (message, message_chars(message))
            self._chars[id(message)] = cached
        return cached[1]

    def compute(
        self,
        messages: Sequence[Any],
        frontier: Optional[Frontier],
        is_summarized: Callable[[str], bool],
        is_protected: ProtectionPredicate,
    ) -> MetricsSnapshot:
        """The snapshot for projected branch ``messages`` (spec 08 section 5)."""
        branch = BranchMetrics(self.chars)
        for message in messages:
            branch.add(message)
        return branch.snapshot(frontier, is_summarized, is_protected)


class BranchMetrics:
    """:meth:`ContextMetrics.compute` kept incrementally: :meth:`add` each projected branch
    message once (in order), :meth:`snapshot` at any time.

    What depends on the messages alone (sizes, roles, the open segment's thinking, the
    closed chains' sizes, the tool results with the arguments of their calls) is folded in as
    messages arrive; a snapshot then only walks the tool results past the frontier (what
    depends on the frontier, the summarized set and the protection rules).
    """

    __slots__ = (
        "_args_by_id",
        "_assistants",
        "_assistants_by_stamp",
        "_chain_start",
        "_chars",
        "_first_user_by_stamp",
        "_gap",
        "_in_chain",
        "_largest",
        "_last_text_only",
        "_open_done",
        "_open_idx",
        "_open_pos",
        "_owner",
        "_predicate",
        "_prefix",
        "_result_positions",
        "_results",
        "_thinking",
        "_users",
        "messages",
    )

    def __init__(self, chars: Callable[[Any], int]) -> None:
        self._chars = chars
        self.messages: list[Any] = []
        self._prefix = [0]
        self._last_text_only = -1
        self._thinking = 0
        self._users: list[int] = []
        self._assistants: list[int] = []
        self._first_user_by_stamp: dict[Any, int] = {}
        # a position, or the positions (ascending) when several assistants share the stamp
        self._assistants_by_stamp: dict[Any, Union[int, list[int]]] = {}
        self._chain_start: Any = None
        self._in_chain = False
        self._largest = 0
        self._args_by_id: dict[Any, Any] = {}
        self._result_positions: list[int] = []
        self._results: list[tuple[int, Any, Any, Any, Any, int]] = []
        # The tool results that may still count toward the frontier gap (positions, indices
        # into _results): the others are summarized in _owner's index (which never forgets
        # a key) or protected by _predicate.
        # Weak: these facts live as long as their session, the owner (the condenser's
        # state, whose size memo holds every message it measured) not that long.
        self._owner: Optional[weakref.ref[Any]] = None
        self._predicate: Any = None
        self._open_pos: list[int] = []
        self._open_idx: list[int] = []
        self._open_done = 0
        # (key, gap, results counted): the last gap, valid while the key is the same
        self._gap: tuple[Any, int, int] = (None, 0, 0)

    def sizes_by_id(self) -> dict[int, tuple[Any, int]]:
        """``(message, size)`` of each message folded in, by ``id()``."""
        prefix = self._prefix
        return {id(m): (m, prefix[i + 1] - prefix[i]) for i, m in enumerate(self.messages)}

    def add(self, message: Any) -> None:
        """Fold in the next message of the projected branch."""
        i = len(self.messages)
        self.messages.append(message)
        size = self._chars(message)
        self._prefix.append(self._prefix[-1] + size)
        role = _role(message)
        if role == "user":
            self._users.append(i)
            self._first_user_by_stamp.setdefault(_stamp_key(get_field(message, "timestamp")), i)
            if not _is_synthetic_chain(message):
                if self._in_chain:
                    self._close_chain(None)
                self._chain_start = get_field(message, "timestamp")
                self._in_chain = True
        elif role == "custom" and is_chain_anchor_custom(message):
            # 2.10.0: a chain's start may be an anchor, and one opens a chain while idle.
            stamp = get_field(message, "timestamp")
            self._first_user_by_stamp.setdefault(_stamp_key(stamp), i)
            if not self._in_chain:
                self._chain_start = stamp
                self._in_chain = True
        elif role == "assistant":
            self._assistants.append(i)
            stamp = get_field(message, "timestamp")
            key = _stamp_key(stamp)
            known = self._assistants_by_stamp.get(key)
            if known is None:
                self._assistants_by_stamp[key] = i
            elif isinstance(known, int):
                self._assistants_by_stamp[key] = [known, i]
            else:
                known.append(i)
            calls = _tool_call_blocks(message)
            if not calls:
                self._last_text_only = i
                self._thinking = 0
                if self._in_chain:
                    self._close_chain(stamp)
                    self._in_chain = False
                return
            for block in get_field(message, "content"):
                if isinstance(block, dict) and block.get("type") == "thinking":
                    self._thinking += jsjson.length(block)
            first: dict[Any, Any] = {}
            for call in calls:
                call_id = call.get("id")
                if isinstance(call_id, str) and call_id not in first:
                    first[call_id] = _call_args(call)
            self._args_by_id.update(first)
        elif role == "toolResult":
            tool_call_id = get_field(message, "toolCallId")
            args = self._args_by_id.get(tool_call_id) if isinstance(tool_call_id, str) else None
            name = get_field(message, "toolName")
            stamp = get_field(message, "timestamp")
            self._result_positions.append(i)
            self._results.append(
                (
                    i,
                    tool_call_id,
                    stamp,
                    None if name is MISSING else name,
                    args,
                    js_round(size / 4),
                )
            )

    def _close_chain(self, final_ts: Any) -> None:
        """A chain that started at ``_chain_start`` closed (at an assistant stamped
        ``final_ts``) or was interrupted (``None``: a new user message at the last index)."""
        start = self._first_user_by_stamp.get(_stamp_key(self._chain_start), -1)
        if start < 0:
            return
        if final_ts is not None:
            found = self._assistants_by_stamp.get(_stamp_key(final_ts), [])
            candidates = [found] if isinstance(found, int) else found
            at = bisect.bisect_left(candidates, start)
            if at == len(candidates):
                return
            end = candidates[at]
        else:
            users = self._users
            after = bisect.bisect_right(users, start)
            end = (users[after] if after < len(users) else len(self.messages)) - 1
        if end < start:
            return
        self._largest = max(self._largest, self._prefix[end + 1] - self._prefix[start])

    def snapshot(
        self,
        frontier: Optional[Frontier],
        is_summarized: Callable[[str], bool],
        is_protected: ProtectionPredicate,
        owner: Any = None,
        version: Any = None,
    ) -> MetricsSnapshot:
        """The snapshot of the messages added so far.

        ``owner`` (when given) is the object whose summarized set ``is_summarized`` reads and
        which only ever gains keys (a :class:`~pi_condense.state.PrunerState`): results found
        summarized (or protected, by the same predicate) are then not looked at again.
        ``version`` (with ``owner``) changes whenever that set grows: while it and the
        frontier's boundary stay the same, only the results added since count anew.
        """
        n = len(self.messages)
        if not n:
            return EMPTY_METRICS.copy()
        prefix = self._prefix
        open_start = self._last_text_only + 1
        total = prefix[n]
        open_chars = total - prefix[open_start] if open_start < n else 0
        numerator = max(self._largest, open_chars)
        share = 0 if total == 0 else js_round(100 * numerator / total)
        return {
            "openCycleThinkingTokens": js_round(self._thinking / 4),
            "largestChainSharePct": share,
            "frontierGapTokens": self._frontier_gap(
                frontier, is_summarized, is_protected, owner, version
            ),
        }

    def _frontier_turn(self, frontier: Frontier) -> int:
        """Position in ``_assistants`` of the turn ``=== lastAttemptedTurnIndex``, or -1."""
        if not self._assistants:
            return -1
        turn = frontier["lastAttemptedTurnIndex"]
        if isinstance(turn, bool) or not isinstance(turn, (int, float)):
            return -1
        if not (0 <= turn < len(self._assistants)) or not float(turn).is_integer():
            return -1
        return int(turn)

    def _sync_open(self, owner: Any, is_protected: ProtectionPredicate) -> bool:
        """Add the new results to the open ones; True when they were all reopened."""
        known = None if self._owner is None else self._owner()
        reopened = owner is None or owner is not known or is_protected is not self._predicate
        if reopened:
            self._owner = None if owner is None else weakref.ref(owner)
            self._predicate = is_protected
            self._open_pos = list(self._result_positions)
            self._open_idx = list(range(len(self._results)))
        else:
            for idx in range(self._open_done, len(self._results)):
                self._open_pos.append(self._results[idx][0])
                self._open_idx.append(idx)
        self._open_done = len(self._results)
        return reopened

    def _frontier_gap(
        self,
        frontier: Optional[Frontier],
        is_summarized: Callable[[str], bool],
        is_protected: ProtectionPredicate,
        owner: Any,
        version: Any,
    ) -> int:
        n = len(self.messages)
        boundary = -1
        turn_end = n
        excluded: list[Any] = []
        turn = -1 if frontier is None else self._frontier_turn(frontier)
        k = -1
        if frontier is not None and turn >= 0:
            i = self._assistants[turn]
            calls = _tool_call_blocks(self.messages[i])
            anchor = frontier["lastAttemptedToolCallId"]
            k = next(
                (j for j, c in enumerate(calls) if strict_equal(get_field(c, "id"), anchor)), -1
            )
            if k >= 0:
                boundary = i
                excluded = [get_field(c, "id") for c in calls[: k + 1]]
                later = turn + 1
                turn_end = self._assistants[later] if later < len(self._assistants) else n
        scan_start = 0 if boundary < 0 else boundary + 1
        reopened = self._sync_open(owner, is_protected)
        settle = owner is not None
        # The turn's end is the next assistant message's position, or the list's length
        # while there is none: a result counted before stays counted as the list grows.
        key = None if not settle or version is None else (boundary, k, version)
        gap = 0
        first = bisect.bisect_left(self._open_pos, scan_start)
        last_key, last_gap, counted = self._gap
        if key is not None and key == last_key and not reopened:
            gap = last_gap  # only the results added since count anew
            first = max(first, bisect.bisect_left(self._open_idx, counted))
        kept_pos: list[int] = []
        kept_idx: list[int] = []
        results = self._results
        for idx in self._open_idx[first:]:
            i, tool_call_id, stamp, name, args, quarter = results[idx]
            if i < turn_end and any(strict_equal(tool_call_id, x) for x in excluded):
                kept_pos.append(i)
                kept_idx.append(idx)
                continue
            if is_summarized(occ_key(to_string(tool_call_id), result_timestamp_of(stamp))):
                continue
            if is_protected(name, args):
                continue
            kept_pos.append(i)
            kept_idx.append(idx)
            gap += quarter
        if settle:
            self._open_pos[first:] = kept_pos
            self._open_idx[first:] = kept_idx
        self._gap = (key, gap, len(results))
        return gap


def _call_args(call: Any) -> Any:
    value = get_field(call, tool_call_args_member(call, detection=True))
    return None if value is MISSING else value
