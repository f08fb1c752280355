"""The live state a :class:`~pi_condense.condenser.Condenser` shares with its flushes.

:class:`Runtime` holds the session, the pruner state, the pending queue, the trigger state and
the observability sinks (:class:`Ui`, stats, diagnostics, metrics cache). It also tracks the
summaries written during this session's life that the host's message list does not hold yet
and puts them into the list (:func:`inject_live_summaries`) where a reload would show them.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._core import SupersedeState, list_prefix, splice
from .branch_facts import BranchFacts, branch_facts
from .capture import (
    CapturedBatch,
    ProtectionPredicate,
    first_pending_turn,
    group_batches,
    protection_predicate,
    rescan_turns,
    trim_batch,
)
from .config import Config
from .js import json as jsjson
from .metrics import ContextMetrics, MetricsSnapshot
from .session import SessionFile
from .state import PrunerState
from .status import DiagnosticSink, StatsAccumulator, status_text
from .summarize.base import Completion, CompletionRequest
from .supersede import cold_state

if TYPE_CHECKING:
    from .chains import ScanMemo

__all__ = [
    "SUMMARY",
    "LiveSummary",
    "LiveSummaryPlacer",
    "Runtime",
    "Summarize",
    "Ui",
    "inject_live_summaries",
    "last_message_anchor",
]

log = logging.getLogger(__name__)

SUMMARY = "context-prune-summary"
"""``customType`` of the per-batch summary messages."""

Summarize = Callable[[CompletionRequest], Awaitable[Optional[Completion]]]
"""One summarizer call; None when it failed or was unusable (already reported)."""


def _ignore_notify(message: str, level: str) -> None:
    """Default notification sink: discard."""


def _ignore_status(text: Optional[str]) -> None:
    """Default status sink: discard."""


def _ignore_emit(channel: str, payload: Any) -> None:
    """Default event sink: discard."""


@dataclass
class Ui:
    """Where user-visible output goes: ``notify(message, level)`` with level ``info`` /
    ``warning`` / ``error``; ``status(text)`` for the status line (None clears it);
    ``emit(channel, payload)`` for host events (``cost:external``)."""

    notify: Callable[[str, str], None] = _ignore_notify
    status: Callable[[Optional[str]], None] = _ignore_status
    emit: Callable[[str, Any], None] = _ignore_emit


@dataclass(frozen=True)
class LiveSummary:
    """A summary written during this session's life, to show in the live context.

    ``anchor`` is ``(role, timestamp)`` of the last message on the branch before it; the
    summary goes right after that message, where a reload puts it.
    """

    anchor: Optional[tuple[Any, Any]]
    message: dict[str, Any]
    identity: str


@dataclass
class Runtime:
    """The live state shared by the event handlers and the flush."""

    session: SessionFile
    config: Config
    state: PrunerState
    summarize: Summarize
    clock: Callable[[], int]
    ui: Ui = field(default_factory=Ui)
    stats: StatsAccumulator = field(default_factory=StatsAccumulator)
    diagnostics: Optional[DiagnosticSink] = None
    metrics: ContextMetrics = field(default_factory=ContextMetrics)
    pending: list[CapturedBatch] = field(default_factory=list)
    flushing: bool = False
    rearmed: bool = False
    previous_fraction: Optional[float] = None
    foreign_prune_seen: int = 0
    """``session.foreign_prune_entries`` when the state last took them in."""
    metrics_cache: Optional[MetricsSnapshot] = None
    live_summaries: list[LiveSummary] = field(default_factory=list)
    placer: LiveSummaryPlacer = field(default_factory=lambda: LiveSummaryPlacer())
    """Places :attr:`live_summaries` into the host's list (what it learned is kept)."""
    chains: Optional[Callable[[Runtime, list[Any], Any], Awaitable[list[str]]]] = None
    """Chain compression inside a flush: ``(runtime, branch messages, closing message)`` ->
    compressed block ids (the caller does the stats bookkeeping). The branch messages are a
    list lent for the call: neither kept nor changed."""
    write_blob: Optional[Callable[[str, str], None]] = None
    """Writes one spill sidecar ``(path, text)``; None: :func:`pi_condense.spill.write_blob`."""
    scan_memo: Optional[ScanMemo] = None
    """The latest chain scan, for a host of frozen messages (None: every scan reads all)."""
    supersede: SupersedeState = field(default_factory=cold_state)
    """Protected-path supersession between renders (see :mod:`pi_condense.supersede`)."""
    _protection: Optional[tuple[Config, ProtectionPredicate]] = field(
        default=None, init=False, repr=False
    )
    _facts: Optional[tuple[SessionFile, BranchFacts]] = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.diagnostics is None:
            # The session's own appender, not `self.append`: the sink is held by the runtime,
            # and a reference back would make a cycle only the cyclic collector frees.
            self.diagnostics = DiagnosticSink(_appender(self.session))

    # ---------------------------------------------------------------- helpers

    @property
    def sink(self) -> DiagnosticSink:
        """The diagnostic sink."""
        assert self.diagnostics is not None
        return self.diagnostics

    def append(self, custom_type: str, data: Any) -> str:
        """``appendCustomEntry``: a ``custom`` entry at the session's leaf."""
        return self.session.append_custom(custom_type, data)

    def protection(self) -> ProtectionPredicate:
        """``isProtected`` for the current config (rebuilt when the config changes)."""
        if self._protection is None or self._protection[0] is not self.config:
            self._protection = (self.config, protection_predicate(self.config))
        return self._protection[1]

    def compute_metrics(self) -> Optional[MetricsSnapshot]:
        """Recompute the metrics cache from the session branch; keep the old one on failure."""
        try:
            metrics = self.facts().metrics
            state = self.state
            index = state.index  # summarized = a record's key or a dedup alias
            self.metrics_cache = metrics.snapshot(
                state.frontier,
                state.is_summarized,
                self.protection(),
                owner=state,
                version=(index.record_count, index.alias_count),
            )
        except ValueError as exc:
            if not str(exc).startswith("JSON nesting deeper than"):
                log.exception("pi-condense: context metrics computation failed")
            else:  # bad input, not a bug: the session loader's "deep" warning names the line
                log.error("pi-condense: context metrics computation failed: %s", exc)
        except Exception:
            log.exception("pi-condense: context metrics computation failed")
        return self.metrics_cache

    def facts(self) -> BranchFacts:
        """The session branch's facts, brought up to date."""
        known = self._facts
        if known is not None and known[0] is self.session:
            return known[1].update()  # the session's shared facts, without the table lookup
        facts = branch_facts(self.session)
        self._facts = (self.session, facts)
        return facts

    def capture_pending(self, *, rethrow: bool = False) -> list[CapturedBatch]:
        """Rescan + trim + group (``capturePendingBatches``); without ``rethrow`` a failing
        rescan falls back to a copy of the pending queue."""
        try:
            facts = self.facts()
            # Turns before the frontier's are dropped whole by trim_batch: not rescanned.
            first = first_pending_turn(self.state.frontier, len(facts.assistants))
            batches = rescan_turns(
                facts.message_entries,
                facts.messages,
                facts.assistants,
                facts.user_groups,
                first,
                self.state,
                self.protection(),
                self.clock,
            )
        except Exception:
            if rethrow:
                raise
            batches = list(self.pending)
        trimmed = [t for t in (trim_batch(b, self.state) for b in batches) if t is not None]
        return group_batches(trimmed, self.config.batching_mode)

    def refresh_status(self, value: Optional[str] = None) -> None:
        """``setPruneStatusWidget``: ``value`` or the computed status text, with the ``│``."""
        if self.ui.status is _ignore_status:  # nobody shows it (a replay): nothing to compute
            return
        if not self.config.show_prune_status_line:
            self.ui.status(None)
            return
        text = value
        if text is None:
            text = status_text(self.config, self.stats.live_reclaim, self.sink.counts())
        self.ui.status(f"\u2502 {text}")

    def emit_cost(self) -> None:
        """The ``cost:external`` event with this session's delta."""
        self.ui.emit("cost:external", self.stats.external_cost())

    def resync(self) -> None:
        """Re-read the pruner state from the session (after a failed write, default mode)."""
        try:
            seen = self.session.foreign_prune_entries
            self.state = PrunerState.from_session(self.session)
            self.foreign_prune_seen = seen
        except Exception:
            log.exception("pi-condense: could not re-read the pruner state")


def _appender(session: SessionFile) -> Callable[[str, Any], str]:
    """:meth:`Runtime.append` of a runtime of ``session``, without the runtime."""

    def append(custom_type: str, data: Any) -> str:
        return session.append_custom(custom_type, data)

    return append


def last_message_anchor(branch: Sequence[dict[str, Any]]) -> Optional[tuple[Any, Any]]:
    """``(role, timestamp)`` of the last ``message`` entry of ``branch`` (None if none)."""
    for entry in reversed(branch):
        if entry.get("type") == "message":
            message = entry.get("message")
            if isinstance(message, dict):
                return (message.get("role"), message.get("timestamp"))
    return None


def inject_live_summaries(messages: list[Any], live: Sequence[LiveSummary]) -> list[Any]:
    """``messages`` with the tracked summaries the host's list does not hold yet, each right
    after its anchor message (after earlier summaries of that anchor); a summary whose anchor
    is not in the list is left out. Returns ``messages`` itself when nothing is added."""
    return LiveSummaryPlacer().place(messages, live)


class LiveSummaryPlacer:
    """:func:`inject_live_summaries` for a host that sends one growing list, kept up to date
    instead of redone: what it learned about the list (the summaries it holds, the last
    position of each anchor) and where each tracked summary goes are kept, so a call looks at
    the messages and the summaries added since the last one (and at the summaries that went
    at the end of the list, or had no anchor yet), and builds the new list in one pass. A
    list that does not start with the same (or equal) messages as the last one, a tracked
    list that was not only appended to, or a new message that moves an anchor or holds a
    tracked summary start it over. Messages are taken as unchanged once seen, as the
    render's size memo takes them."""

    __slots__ = (
        "_anchors",
        "_at",
        "_by_position",
        "_groups",
        "_identities",
        "_last",
        "_live",
        "_out",
        "_out_len",
        "_positions",
        "_present",
        "_recheck",
        "_slots",
    )

    def __init__(self) -> None:
        # the last position of each (role, timestamp), by role then timestamp (a tuple key
        # per message took about 0.5 MB at x10's 9,000 messages)
        self._last: dict[Any, dict[Any, int]] = {}
        self._present: set[str] = set()
        # The last list placed (ours alone: callers get copies), made of the first
        # `_out_len` messages seen and every tracked summary; None once the plan changed.
        self._out: Optional[list[Any]] = None
        self._out_len = 0
        self._reset_plan()
        self._seen_reset()

    def _seen_reset(self) -> None:
        self._positions: list[Any] = []  # the messages seen (the list's known prefix)
        self._present.clear()
        self._last.clear()
        self._out = None

    def _reset_plan(self) -> None:
        self._out = None
        self._live: list[LiveSummary] = []
        self._at: list[Optional[int]] = []  # where each tracked summary goes (None: nowhere)
        self._recheck: set[int] = set()
        self._by_position: dict[int, list[tuple[int, Any]]] = {}
        # _by_position in position order: the positions and their summary messages
        self._slots: list[int] = []
        self._groups: list[list[Any]] = []
        self._anchors: set[Any] = set()  # the tracked summaries' (hashable) anchors
        self._identities: set[str] = set()

    def _learn(self, messages: list[Any]) -> tuple[bool, bool]:
        """Take in the messages not seen yet: (the plan must be redone, the list starts
        with the very messages seen)."""
        seen = self._positions
        done = len(seen)
        moved = False
        # Compared as list equality compares (identity first, at C speed): a message
        # replaced by an equal one keeps what was learned from it, which only reads its
        # content.
        identical = done <= len(messages) and list_prefix(seen, messages) == done
        if not identical and (
            done > len(messages) or list_prefix(seen, messages, equal=True) < done
        ):
            self._seen_reset()
            seen = self._positions
            done = 0
            moved = True
        present, last = self._present, self._last
        for i in range(done, len(messages)):
            m = messages[i]
            if not isinstance(m, dict):
                continue
            if m.get("customType") == SUMMARY:
                details = m.get("details")
                refs = details.get("toolCallRefs") if isinstance(details, dict) else None
                if refs is not None:
                    identity = jsjson.dumps(refs)
                    present.add(identity)
                    moved = moved or identity in self._identities
            # an unhashable timestamp is found by a scan if it is an anchor
            with contextlib.suppress(TypeError):
                role, stamp = m.get("role"), m.get("timestamp")
                by_stamp = last.get(role)
                if by_stamp is None:
                    hash(stamp)  # (no table for a key that could not be looked up)
                    by_stamp = last[role] = {}
                if stamp in by_stamp and (role, stamp) in self._anchors:
                    moved = True
                by_stamp[stamp] = i
        seen.extend(messages[done:])
        return moved, identical

    def _move(self, k: int, old: Optional[int], new: Optional[int]) -> None:
        """Tracked summary ``k`` goes at ``new`` instead of ``old``."""
        self._out = None
        message = self._live[k].message
        # a position's entries are in summary order (k is unique: (k,) sorts just before
        # (k, message)), and its group holds their messages in the same order
        if old is not None:
            entries = self._by_position[old]
            index = bisect.bisect_left(entries, (k,))
            del entries[index]
            slot = bisect.bisect_left(self._slots, old)
            if entries:
                del self._groups[slot][index]
            else:
                del self._by_position[old]
                del self._slots[slot]
                del self._groups[slot]
        if new is not None:
            entries = self._by_position.setdefault(new, [])
            index = bisect.bisect_left(entries, (k,))
            entries.insert(index, (k, message))
            slot = bisect.bisect_left(self._slots, new)
            if len(entries) == 1:
                self._slots.insert(slot, new)
                self._groups.insert(slot, [message])
            else:
                self._groups[slot].insert(index, message)

    def _put(self, k: int, messages: list[Any]) -> None:
        """(Re)compute where tracked summary ``k`` goes."""
        summary = self._live[k]
        position: Optional[int] = None
        if summary.identity not in self._present:
            position = _insert_position(messages, summary.anchor, self._last)
        if position != self._at[k]:
            self._move(k, self._at[k], position)
            self._at[k] = position
        anchor = summary.anchor
        unhashable = False
        if anchor is not None:
            try:
                hash(anchor)
            except TypeError:
                unhashable = True
        present = summary.identity in self._present
        if not present and (position is None or position >= len(messages) or unhashable):
            self._recheck.add(k)  # the answer can change as the list grows
        else:
            self._recheck.discard(k)

    def place(self, messages: list[Any], live: Sequence[LiveSummary]) -> list[Any]:
        """``messages`` with the summaries of ``live`` it lacks (see the class docstring):
        ``messages`` itself when none goes into it, else a new list."""
        out = self.place_shared(messages, live)
        return out if out is messages else list(out)

    def place_shared(self, messages: list[Any], live: Sequence[LiveSummary]) -> list[Any]:
        """:meth:`place` without the copy: a list that is the placer's own (the next call
        changes it) unless it is ``messages``. The caller must not change it nor keep it."""
        if not live:
            return messages
        grown = len(messages) != len(self._positions)
        moved, identical = self._learn(messages)
        tracked = live if isinstance(live, list) else list(live)
        if (
            moved
            or len(tracked) < len(self._live)
            or list_prefix(self._live, tracked) < len(self._live)
        ):
            self._reset_plan()
        if grown:
            for k in sorted(self._recheck):
                self._put(k, messages)
        for k in range(len(self._live), len(live)):
            summary = live[k]
            self._live.append(summary)
            self._at.append(None)
            self._identities.add(summary.identity)
            if summary.anchor is not None:
                with contextlib.suppress(TypeError):
                    self._anchors.add(summary.anchor)
            self._put(k, messages)
        if not self._slots:
            return messages
        out = self._out
        if out is not None and identical and self._out_len <= len(messages):
            # The same plan over the same messages, grown: the messages after it follow.
            out += messages[self._out_len :]
        else:
            # Each summary goes after the last message matching its anchor and after the
            # summaries already following it, in the order they were written (as inserting
            # them one by one would place them).
            out = splice(messages, self._slots, self._groups)
        self._out, self._out_len = out, len(messages)
        return out


def _insert_position(
    messages: list[Any], anchor: Optional[tuple[Any, Any]], last: dict[Any, dict[Any, int]]
) -> Optional[int]:
    if anchor is None:
        index = 0
    else:
        try:
            hash(anchor)  # an unhashable part is found by a scan, as before
            by_stamp = last.get(anchor[0])
            found = None if by_stamp is None else by_stamp.get(anchor[1])
        except TypeError:
            found = next(
                (
                    i
                    for i in range(len(messages) - 1, -1, -1)
                    if isinstance(messages[i], dict)
                    and (messages[i].get("role"), messages[i].get("timestamp")) == anchor
                ),
                None,
            )
        if found is None:
            return None
        index = found + 1
    while index < len(messages):
        m = messages[index]
        if isinstance(m, dict) and m.get("role") == "custom" and m.get("customType") == SUMMARY:
            index += 1
            continue
        break
    return index
