"""Facts about a session's current branch, kept up to date from the entries added to it.

Every model call and every turn asks the same questions about the branch: how many turns
precede this assistant message, where does the last message sit, did a message after the last
compaction report usage, what are the context metrics, which assistant turns can still hold
unsummarized calls. :class:`BranchFacts` answers them from what it folded in before plus the
entries appended since (``SessionFile.branch_path`` keeps the branch itself incrementally);
when the branch is replaced (the leaf moved elsewhere) it starts over from the new branch.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from .capture import is_chain_anchor_custom
from .js.values import MISSING, get_field
from .metrics import BranchMetrics, ContextMetrics, message_chars, project_custom_message
from .session import SessionFile
from .usage import TokenMemo, estimate_context_tokens, reported_usage

__all__ = ["BranchFacts", "branch_facts", "forget_branch_facts", "pi_context_usage"]


def _match_key(value: Any) -> Any:
    """A dict key equal for values that are JavaScript ``===``; None for a value equal to
    nothing (NaN). A number or a string is its own key (a number never equals a string, and
    the booleans, equal to 0 and 1 in Python, are tagged)."""
    if value is MISSING:
        return ("undefined",)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return value if value == value else None
    if isinstance(value, str):
        return value
    if value is None:
        return ("null",)
    return ("o", id(value))


class _CarriedSizes:
    """Message sizes (:func:`~pi_condense.metrics.message_chars`) for the facts' metrics: each
    message is measured once, as it is added; while a replaced branch is folded in, what its
    messages measured on the previous branch carries over (``sizes``, by ``id()``)."""

    __slots__ = ("sizes",)

    def __init__(self) -> None:
        self.sizes: Optional[dict[int, tuple[Any, int]]] = None

    def chars(self, message: Any) -> int:
        sizes = self.sizes
        if sizes is not None:
            known = sizes.get(id(message))
            if known is not None and known[0] is message:
                return known[1]
        return message_chars(message)


class BranchFacts:
    """The facts of one session's current branch (see the module docstring)."""

    def __init__(self, session: SessionFile, sizes: Optional[ContextMetrics] = None) -> None:
        # Weak: the module's table maps each session to its facts, and a value that held
        # its key strongly would keep every session (and its entries) alive for good.
        self._session = weakref.ref(session)
        self._carried = _CarriedSizes()
        self._size = sizes.chars if sizes is not None else self._carried.chars
        self._epoch = -1
        self._done = 0
        self._reset()

    def _reset(self) -> None:
        self.message_entries: list[Mapping[str, Any]] = []
        """The branch's ``message`` entries."""
        self.messages: list[Any] = []
        """Their ``message`` values (whatever they hold)."""
        self.assistants: list[int] = []
        """Positions in :attr:`messages` of the assistant messages (turn k at ``[k]``)."""
        self.user_groups: list[int] = []
        """For each assistant, how many user messages (and non-pruner custom messages, the
        chain anchors of pi-condense 2.10.0) precede it."""
        self.last_anchor: Optional[tuple[Any, Any]] = None
        """``(role, timestamp)`` of the last message entry holding an object."""
        self._truthy_messages: list[Any] = []
        self._lent = 0  # open lends of _truthy_messages (see lend_chain_messages)
        self.compacted = False
        self.usage_since_compaction = False
        self.has_images = False
        """Some message on the branch holds an image block (sizes then price images)."""
        self.metrics = BranchMetrics(self._size)
        self._users = 0
        self._assistant_by_stamp: dict[Any, int] = {}

    def update(self) -> BranchFacts:
        """Fold in the entries added to the branch since the last call (all of them when
        the branch was replaced); returns self."""
        session = self._session()
        if session is None:
            raise ReferenceError("the session of these branch facts no longer exists")
        epoch, path = session.branch_path()
        if epoch != self._epoch:
            if self._done:
                self._carried.sizes = self.metrics.sizes_by_id()
            self._epoch = epoch
            self._done = 0
            self._reset()
        try:
            if self._done < len(path):
                for entry in path[self._done :]:
                    self._add(entry)
                self._done = len(path)
        finally:
            self._carried.sizes = None
        return self

    def _add(self, entry: Mapping[str, Any]) -> None:
        kind = entry.get("type")
        if kind == "compaction":
            self.compacted = True
            self.usage_since_compaction = False
            return
        if kind == "custom_message":
            custom = project_custom_message(entry)
            self.metrics.add(custom)
            self._users += is_chain_anchor_custom(custom)  # a user-turn group boundary (2.10.0)
            self._push_chain_message(custom)  # it may open a chain (2.10.0)
            return
        if kind != "message":
            return
        message = entry.get("message")
        self.message_entries.append(entry)
        self.messages.append(message)
        if message:
            self.metrics.add(message)
            self._push_chain_message(message)
        if not isinstance(message, dict):
            return
        if not self.has_images:
            content = message.get("content")
            if isinstance(content, list):
                self.has_images = any(
                    isinstance(b, dict) and b.get("type") == "image" for b in content
                )
        role = message.get("role")
        stamp = message.get("timestamp")
        self.last_anchor = (role, stamp)
        if role == "user" or is_chain_anchor_custom(message):
            self._users += 1
        elif role == "assistant":
            key = _match_key(get_field(message, "timestamp"))
            if key is not None:
                self._assistant_by_stamp[key] = len(self.assistants)
            self.assistants.append(len(self.messages) - 1)
            self.user_groups.append(self._users)
            if self.compacted and not self.usage_since_compaction:
                self.usage_since_compaction = reported_usage(message) is not None

    def _push_chain_message(self, message: Any) -> None:
        if self._lent:
            # A lent list stays as it was: the messages go on in a copy.
            self._truthy_messages = list(self._truthy_messages)
            self._lent = 0
        self._truthy_messages.append(message)

    @property
    def after_compaction_without_usage(self) -> bool:
        """A compaction is on the branch and no message after the last one reported usage
        (Pi's ``getContextUsage`` then knows no size)."""
        return self.compacted and not self.usage_since_compaction

    def turn_index(self, message: Any) -> int:
        """:func:`~pi_condense.capture.branch_turn_index` of ``message`` on this branch."""
        key = _match_key(get_field(message, "timestamp"))
        found = self._assistant_by_stamp.get(key) if key is not None else None
        return found if found is not None else len(self.assistants)

    def chain_messages(self) -> list[Any]:
        """The branch's truthy ``message`` values and projected ``custom_message`` entries,
        in branch order (what chain compression scans: the reference's
        ``projectBranchMessages``)."""
        return list(self._truthy_messages)

    def lend_chain_messages(self) -> list[Any]:
        """:meth:`chain_messages` without the copy: the kept list itself, which stays as it
        is until :meth:`end_lend` (messages added meanwhile go to a copy). The borrower
        must not change it."""
        self._lent += 1
        return self._truthy_messages

    def end_lend(self, lent: list[Any]) -> None:
        """The borrower of a :meth:`lend_chain_messages` list is done with it."""
        if lent is self._truthy_messages and self._lent:
            self._lent -= 1


_FACTS: weakref.WeakKeyDictionary[SessionFile, BranchFacts] = weakref.WeakKeyDictionary()


def branch_facts(session: SessionFile) -> BranchFacts:
    """The (shared) :class:`BranchFacts` of ``session``, brought up to date."""
    facts = _FACTS.get(session)
    if facts is None:
        facts = BranchFacts(session)
        _FACTS[session] = facts
    return facts.update()


def forget_branch_facts(session: SessionFile) -> None:
    """Drop the shared :class:`BranchFacts` of ``session`` (a later :func:`branch_facts`
    folds the branch in again): for a caller done asking, whose session lives on."""
    _FACTS.pop(session, None)


def pi_context_usage(
    session: SessionFile, messages: Sequence[Any], window: int, memo: Optional[TokenMemo] = None
) -> tuple[Optional[int], Optional[float]]:
    """(tokens, percent) as Pi's ``getContextUsage``; (None, None) right after a compaction.
    ``memo``: see :func:`~pi_condense.usage.estimate_context_tokens`."""
    if branch_facts(session).after_compaction_without_usage:
        return None, None
    tokens = estimate_context_tokens(messages, memo)
    if not math.isfinite(tokens):
        return None, None
    return int(tokens), tokens / window * 100
