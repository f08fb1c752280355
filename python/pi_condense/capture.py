"""Capture: which completed tool calls are still raw, grouped into batches to summarize.

Two sources feed the flush pipeline (spec 05 sections 3, 5, 6):

- live capture at ``turn_end`` (:func:`capture_batch`): one batch per assistant turn, from the
  host's event payload;
- the session rescan at flush time (:func:`rescan_branch`): every assistant message of the
  branch whose calls have a result in the same turn and are not summarized yet.

Turn indices live in two spaces. Rescan batches count every assistant message of the branch
(branch-global); the host's ``turn_end`` index restarts at 0 with every user prompt. The
reference compares both against the frontier, which always holds a global index (spec 00 quirk
8). :func:`branch_turn_index` gives the global index of a live turn, for hosts that want one
numbering.

A captured tool call is a plain dict in the reference's key order (``toolCallId, toolName,
args, resultText, isError, resultTimestamp?``); eager spill adds its fields in place.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ._core import image_digest as _image_digest
from ._core import tool_call_args_member, tool_result_text
from .config import Config
from .js import json as jsjson
from .js import time as jstime
from .js.values import (
    ABSENT,
    JS_WHITESPACE,
    MISSING,
    get_field,
    strict_equal,
    to_string,
    truthy,
)
from .keys import ProtectedMatcher, occ_key, result_timestamp_of
from .state import Frontier, PrunerState

__all__ = [
    "CapturedBatch",
    "ProtectionPredicate",
    "branch_turn_index",
    "call_key",
    "capture_batch",
    "entry_time",
    "extract_tool_result_text",
    "group_batches",
    "image_digest",
    "is_chain_anchor_custom",
    "is_final_assistant",
    "protection_predicate",
    "raw_chars",
    "rescan_branch",
    "trim_batch",
]

CapturedToolCall = dict[str, Any]
"""One captured tool call (see the module docstring for its keys)."""

ProtectionPredicate = Callable[[Any, Any], bool]
"""``isProtected(toolName, args)`` with the configured tools and path globs bound."""


@dataclass
class CapturedBatch:
    """A group of tool calls summarized together (the reference's ``CapturedBatch``).

    ``user_turn_group`` is set on rescan batches only (the count of user messages before the
    turn); ``agent-message`` batching merges batches that share it.
    """

    turn_index: Any
    timestamp: Any
    assistant_text: str
    tool_calls: list[CapturedToolCall]
    user_turn_group: Optional[int] = None

    def with_calls(self, tool_calls: list[CapturedToolCall]) -> CapturedBatch:
        """A shallow copy holding ``tool_calls`` instead (``{...batch, toolCalls}``)."""
        return CapturedBatch(
            self.turn_index, self.timestamp, self.assistant_text, tool_calls, self.user_turn_group
        )


def _nullish(value: Any) -> bool:
    return value is MISSING or value is None


def _args_of(block: Any, detection: bool = False) -> Any:
    """A toolCall block's args by the core's rule (``input ?? args ?? arguments``, or
    ``input ?? arguments`` for chain detection); :data:`MISSING` when nullish."""
    member = tool_call_args_member(block, detection)
    value = MISSING if member is None else get_field(block, member)
    return MISSING if _nullish(value) else value


def _less(a: Any, b: Any) -> bool:
    """``a < b`` for numbers; false for anything else (JS compares NaN and non-numbers false)."""
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return isinstance(a, numbers) and isinstance(b, numbers) and a < b


def _join_text(blocks: Iterable[Any]) -> str:
    parts = []
    for block in blocks:
        text = get_field(block, "text")
        parts.append("" if _nullish(text) else to_string(text))
    return "\n".join(parts)


def _blocks(message: Any, kind: str) -> list[Any]:
    content = get_field(message, "content")
    if not isinstance(content, list):
        return []
    # strict_equal(get_field(block, "type"), kind) for a str ``kind``, inlined: a str member
    # equal to it (no other value is === to a string)
    return [
        block
        for block in content
        if isinstance(block, dict) and isinstance(t := block.get("type"), str) and t == kind
    ]


def image_digest(data: Any) -> str:
    """The first 8 hex digits of the SHA-256 of an image block's ``data`` (the base64 text as
    stored, JS UTF-8): the key an image marker names its image by."""
    return _image_digest(ABSENT if data is MISSING else data)


def extract_tool_result_text(message: Any) -> str:
    """The text of a toolResult message: one ``[image returned: <mimeType> sha256:<8 hex>]``
    line per image block, in block order, then the text blocks (a nullish ``text`` as
    ``""``), all joined with ``"\\n"`` (pi-condense 2.11.2: the image data is part of the
    text, so of the dedup key). The core's rule, as the render and the chain scan read it."""
    return tool_result_text(message)


def raw_chars(tool_calls: Iterable[Mapping[str, Any]]) -> int:
    """Sum of the UTF-16 lengths of the calls' ``resultText``."""
    return sum(jsjson.utf16_len(call["resultText"]) for call in tool_calls)


def call_key(call: Mapping[str, Any]) -> str:
    """The occurrence key of a captured call (its bare id without a result timestamp)."""
    tool_call_id = call.get("toolCallId")
    if not isinstance(tool_call_id, str):
        tool_call_id = to_string(tool_call_id)
    return occ_key(tool_call_id, call.get("resultTimestamp"))


def _capture_call(block: Any, tool_results: Sequence[Any]) -> CapturedToolCall:
    block_id = get_field(block, "id")
    match = next(
        (r for r in tool_results if strict_equal(get_field(r, "toolCallId"), block_id)), MISSING
    )
    args = _args_of(block)
    call: CapturedToolCall = {
        "toolCallId": None if block_id is MISSING else block_id,
        "toolName": get_field(block, "name"),
        "args": {} if args is MISSING else args,
        "resultText": "(no result)",
        "isError": False,
    }
    if call["toolName"] is MISSING:
        call["toolName"] = None
    if match is not MISSING:
        call["resultText"] = extract_tool_result_text(match)
        is_error = get_field(match, "isError")
        call["isError"] = False if _nullish(is_error) else is_error
        stamp = result_timestamp_of(get_field(match, "timestamp"))
        if stamp is not None:
            call["resultTimestamp"] = stamp
    return call


def capture_batch(
    message: Any, tool_results: Sequence[Any], turn_index: Any, timestamp: Any
) -> CapturedBatch:
    """The reference's ``captureBatch``: every toolCall block of the assistant ``message``
    paired with its result (``"(no result)"`` when there is none)."""
    assistant_text = _join_text(_blocks(message, "text")).strip(JS_WHITESPACE)
    calls = [_capture_call(block, tool_results) for block in _blocks(message, "toolCall")]
    return CapturedBatch(turn_index, timestamp, assistant_text, calls)


def protection_predicate(config: Config) -> ProtectionPredicate:
    """``isProtected(toolName, args, config)`` (spec 05 section 2.2) as a callable."""
    matcher = ProtectedMatcher(list(config.protected_tools), list(config.protected_paths))
    substring_rule = (
        config.is_reference and not config.protected_tools and config.is_protected_tool("")
    )

    def is_protected(tool_name: Any, args: Any) -> bool:
        if substring_rule and isinstance(tool_name, str) and config.is_protected_tool(tool_name):
            return True
        return matcher.is_protected(tool_name, None if args is MISSING else args)

    return is_protected


def entry_time(value: Any) -> Any:
    """``new Date(value).getTime()`` (an entry's ISO timestamp): an int, or NaN if invalid."""
    parsed = jstime.date_value(value)
    if isinstance(parsed, float) and math.isfinite(parsed) and parsed.is_integer():
        return int(parsed)
    return parsed


def _entry_time(entry: Mapping[str, Any], message: Any, now: Callable[[], int]) -> Any:
    stamp = entry.get("timestamp")
    if truthy(stamp):
        return entry_time(stamp)
    fallback = get_field(message, "timestamp")
    return now() if _nullish(fallback) else fallback


def is_chain_anchor_custom(message: Any) -> bool:
    """A non-pruner custom message (``role: "custom"``, ``customType`` not prefixed
    ``context-prune-``): since pi-condense 2.10.0 it opens a chain like a user message and, in
    a rescan, starts a new user-turn group."""
    if not strict_equal(get_field(message, "role"), "custom"):
        return False
    kind = get_field(message, "customType")
    return not to_string("" if _nullish(kind) else kind).startswith("context-prune-")


def rescan_branch(
    branch: Sequence[Mapping[str, Any]],
    state: PrunerState,
    exclude: ProtectionPredicate,
    now: Callable[[], int],
) -> list[CapturedBatch]:
    """The reference's ``captureUnindexedBatchesFromSession`` over branch entries (root first).

    Every assistant message counts one turn (branch-global index). A call is ready when its
    block has an id, a result arrived before the next assistant message (the first result per
    id), its occurrence is not summarized and ``exclude(name, input ?? arguments)`` is false.
    """
    entries = [e for e in branch if e.get("type") == "message"]
    messages = [e.get("message") for e in entries]
    assistants: list[int] = []
    user_groups: list[int] = []
    users = 0
    position = -1
    for entry in branch:
        kind = entry.get("type")
        if kind == "custom_message":
            users += is_chain_anchor_custom(
                {"role": "custom", "customType": entry.get("customType")}
            )
            continue
        if kind != "message":
            continue
        position += 1
        message = entry.get("message")
        role = get_field(message, "role")
        if strict_equal(role, "user") or is_chain_anchor_custom(message):
            users += 1
        elif strict_equal(role, "assistant"):
            assistants.append(position)
            user_groups.append(users)
    return rescan_turns(entries, messages, assistants, user_groups, 0, state, exclude, now)


def first_pending_turn(frontier: Optional[Frontier], turns: int) -> int:
    """The first turn :func:`trim_batch` can keep a batch of: every turn before the
    frontier's is dropped whole (0 without a frontier, or with one that is not a number)."""
    if frontier is None:
        return 0
    boundary = frontier["lastAttemptedTurnIndex"]
    if isinstance(boundary, bool) or not isinstance(boundary, (int, float)):
        return 0
    if boundary != boundary or boundary <= 0:
        return 0
    if boundary > turns:
        return turns
    return math.ceil(boundary)


def rescan_turns(
    entries: Sequence[Mapping[str, Any]],
    messages: Sequence[Any],
    assistants: Sequence[int],
    user_groups: Sequence[int],
    first_turn: int,
    state: PrunerState,
    exclude: ProtectionPredicate,
    now: Callable[[], int],
) -> list[CapturedBatch]:
    """:func:`rescan_branch` from turn ``first_turn`` on, over the branch's ``message``
    entries and their messages, with the positions of the assistant messages (turn k at
    ``assistants[k]``) and the user messages before each (``user_groups``)."""
    batches: list[CapturedBatch] = []
    for turn_index in range(first_turn, len(assistants)):
        i = assistants[turn_index]
        message = messages[i]
        results: dict[str, Any] = {}
        end = assistants[turn_index + 1] if turn_index + 1 < len(assistants) else len(messages)
        for j in range(i + 1, end):
            later = messages[j]
            result_id = get_field(later, "toolCallId")
            if (
                strict_equal(get_field(later, "role"), "toolResult")
                and isinstance(result_id, str)
                and result_id
            ):
                results.setdefault(result_id, later)
        ready: list[Any] = []
        for block in _blocks(message, "toolCall"):
            block_id = get_field(block, "id")
            if not isinstance(block_id, str) or not block_id:
                continue
            result = results.get(block_id)
            if result is None:
                continue
            stamp = result_timestamp_of(get_field(result, "timestamp"))
            if state.is_summarized(occ_key(block_id, stamp)):
                continue
            if exclude(
                get_field(block, "name"),
                _args_of(block, detection=True),
            ):
                continue
            ready.append(block)
        if not ready:
            continue
        ready_results = [results[block["id"]] for block in ready]
        ready_ids = {block["id"] for block in ready}
        stamp = _entry_time(entries[i], message, now)
        batch = capture_batch(message, ready_results, turn_index, stamp)
        batch.tool_calls = [c for c in batch.tool_calls if c["toolCallId"] in ready_ids]
        batch.user_turn_group = user_groups[turn_index]
        batches.append(batch)
    return batches


def trim_batch(batch: CapturedBatch, state: PrunerState) -> Optional[CapturedBatch]:
    """The reference's ``trimBatchToPendingRange``: drop summarized calls, then everything at
    or before the frontier; None when nothing is left (spec 05 section 5)."""
    calls = [c for c in batch.tool_calls if not state.is_summarized(call_key(c))]
    if not calls:
        return None
    frontier: Optional[Frontier] = state.frontier
    if frontier is None:
        return batch.with_calls(calls)
    boundary = frontier["lastAttemptedTurnIndex"]
    if _less(batch.turn_index, boundary):
        return None
    if _less(boundary, batch.turn_index):
        return batch.with_calls(calls)
    anchor = frontier["lastAttemptedToolCallId"]
    position = next(
        (i for i, c in enumerate(calls) if strict_equal(c.get("toolCallId", MISSING), anchor)), -1
    )
    if position < 0:
        return batch.with_calls(calls)
    remaining = calls[position + 1 :]
    return batch.with_calls(remaining) if remaining else None


def group_batches(batches: Sequence[CapturedBatch], mode: str) -> list[CapturedBatch]:
    """The reference's ``groupBatchesByMode``: ``"agent-message"`` merges consecutive rescan
    batches of one user turn (texts joined with a blank line, calls concatenated, turn index and
    timestamp of the later batch); any other mode leaves the list as it is."""
    if mode != "agent-message":
        return list(batches)
    out: list[CapturedBatch] = []
    current: Optional[CapturedBatch] = None
    for batch in batches:
        if batch.user_turn_group is None:
            current = None
            out.append(batch)
            continue
        if current is not None and current.user_turn_group == batch.user_turn_group:
            texts = [t for t in (current.assistant_text, batch.assistant_text) if t]
            current.assistant_text = "\n\n".join(texts)
            current.tool_calls = current.tool_calls + batch.tool_calls
            current.turn_index = batch.turn_index
            current.timestamp = batch.timestamp
        else:
            current = dataclasses.replace(batch)
            out.append(current)
    return out


def is_final_assistant(message: Any) -> bool:
    """An assistant message without a toolCall block (the end of an agent's reply)."""
    return strict_equal(get_field(message, "role"), "assistant") and not _blocks(
        message, "toolCall"
    )


def branch_turn_index(branch: Sequence[Mapping[str, Any]], message: Any) -> int:
    """The branch-global turn index of the assistant ``message``: how many assistant messages
    precede it on the branch (matched by timestamp, the last match wins), or the count of all
    assistant messages when it is not on the branch yet."""
    count = 0
    found = -1
    stamp = get_field(message, "timestamp")
    for entry in branch:
        if entry.get("type") != "message":
            continue
        other = entry.get("message")
        if not strict_equal(get_field(other, "role"), "assistant"):
            continue
        if strict_equal(get_field(other, "timestamp"), stamp):
            found = count
        count += 1
    return found if found >= 0 else count
