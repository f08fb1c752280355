"""The typed rows and aggregates of the corpus commands (pydantic models, JSON-ready)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "GAP_THRESHOLDS",
    "CondenseResult",
    "CondenseRow",
    "GapTable",
    "LengthBucket",
    "LengthTable",
    "Problem",
    "ScanAggregate",
    "ScanResult",
    "ScanRow",
    "SkippedSession",
    "TaskFailure",
    "WhatIfResult",
    "WhatIfRow",
    "WhatIfSession",
]

GAP_THRESHOLDS = (0, 1, 2, 3, 5)
"""The re-query gap table's "share within N UTG" columns (seed 000's table)."""


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Problem(_Row):
    """A line of a session file that was skipped or needs attention (1-based ``line``)."""

    path: str
    line: Optional[int] = None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


class TaskFailure(_Row):
    """A session whose task failed: nothing was produced for it (the others went on)."""

    path: str
    line: Optional[int] = None
    error: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.error}"


class ScanRow(_Row):
    """What one session holds (its current branch unless said otherwise)."""

    path: str
    content_hash: str
    """SHA-256 of the file's bytes as stored (compressed for ``.jsonl.gz``)."""
    bytes: int
    entries: int
    """Entries in the file (every branch), the header not counted."""
    branch_length: int
    user_turn_groups: int
    """User-role messages on the branch (each opens a user-turn group)."""
    messages_by_role: dict[str, int]
    tool_calls_by_tool: dict[str, int]
    context_chars: int
    """UTF-16 length of ``JSON.stringify`` of the raw context (what the model would get)."""
    context_tokens: int
    """Pi's per-message estimate (``ceil(chars / 4)``) summed over the raw context."""
    pruner_entries: int
    """``context-prune-*`` entries on the branch."""
    rendered_chars: Optional[int] = None
    """The context's length after render against the session's own pruner state (only for
    sessions holding pruner entries)."""
    query_calls: int
    """``context_tree_query`` tool calls on the branch."""
    empty_query_calls: int
    """Those naming no ref (no or an empty ``toolCallIds``)."""
    requery_gaps: list[int]
    """One gap (in user-turn groups) per re-query event, in branch order."""
    problems: list[Problem] = Field(default_factory=list)


class GapTable(_Row):
    """Seed 000's re-query gap table over a corpus."""

    sessions: int
    query_sessions: int
    """Sessions with at least one ``context_tree_query`` call."""
    requery_sessions: int
    """Sessions with at least one re-query event."""
    query_calls: int
    empty_query_calls: int
    events: int
    median: Optional[float] = None
    within: dict[str, float]
    """Share of the events with gap <= N, keyed by N (``"0"``, ``"1"``, ``"2"``, ``"3"``,
    ``"5"``)."""
    counts: dict[str, int]
    """Events per exact gap value."""


class LengthBucket(_Row):
    """Sessions whose user-turn-group count falls in ``[low, high]`` (``high`` None: no bound)."""

    low: int
    high: Optional[int] = None
    sessions: int
    share: float
    pruner_sessions: int
    pruner_share: float


class LengthTable(_Row):
    """Session lengths in user-turn groups (all sessions, and those with pruner entries)."""

    sessions: int
    pruner_sessions: int
    median: Optional[float] = None
    pruner_median: Optional[float] = None
    at_most_3: float
    pruner_at_most_3: float
    buckets: list[LengthBucket]


class ScanAggregate(_Row):
    """Totals of a scan."""

    sessions: int
    failed: int
    bytes: int
    entries: int
    messages_by_role: dict[str, int]
    tool_calls_by_tool: dict[str, int]
    context_chars: int
    context_tokens: int
    pruner_sessions: int
    rendered_chars: int
    """Rendered chars summed over the sessions with pruner entries."""
    pruner_context_chars: int
    """Raw context chars of those same sessions (the base of ``rendered_chars``)."""
    gaps: GapTable
    lengths: LengthTable


class ScanResult(_Row):
    """``corpus.scan``: a row per session, failures, the aggregate, and the work done."""

    rows: list[ScanRow]
    failures: list[TaskFailure]
    aggregate: ScanAggregate
    computed: int
    """Sessions computed in this run (the others came from the result cache)."""
    cached: int


class WhatIfSession(_Row):
    """One session replayed under one config."""

    path: str
    content_hash: str
    bytes: int
    call_before: list[int]
    """Context chars at each model call without pruning."""
    call_after: list[int]
    """... and after render."""
    flushes: int
    summarizer_calls: int
    input_tokens: int
    output_tokens: int
    cost: float
    requery_gaps: list[int]
    handler_errors: list[str] = Field(default_factory=list)
    problems: list[Problem] = Field(default_factory=list)


class WhatIfRow(_Row):
    """One config of the grid over the whole corpus."""

    settings: dict[str, object]
    """The grid's values of this config (camelCase keys as given to ``--set``)."""
    sessions: int
    failed: int
    model_calls: int
    before_mean: float
    before_p50: float
    before_p95: float
    after_mean: float
    after_p50: float
    after_p95: float
    reclaimed_share: float
    """1 - sum(after) / sum(before) over every model call."""
    flushes: int
    summarizer_calls: int
    input_tokens: int
    output_tokens: int
    cost: float
    requeries: int
    """Re-query events observed in the corpus (the same for every config)."""
    served_verbatim: int
    """Those the recovery grace window would have served verbatim (see PRUNING.md)."""
    served_share: float
    handler_errors: int


class WhatIfResult(_Row):
    """``corpus.whatif``: one row per config (sorted), per-session results and failures."""

    rows: list[WhatIfRow]
    sessions: list[list[WhatIfSession]]
    """Per config, in the order of ``rows``."""
    failures: list[TaskFailure]
    computed: int
    cached: int


class CondenseRow(_Row):
    """One session condensed."""

    path: str
    output: str
    backup: Optional[str] = None
    model_calls: int
    before_chars: int
    """Mean context chars per model call without pruning."""
    after_chars: int
    summarizer_calls: int
    summaries: int
    chains: int
    cost: float
    handler_errors: list[str] = Field(default_factory=list)
    problems: list[Problem] = Field(default_factory=list)
    report: dict[str, Any] = Field(default_factory=dict)
    """The figures ``pi-condense condense --json`` prints for this session."""


class SkippedSession(_Row):
    """A session an in-place condense left alone: it is already condensed in place."""

    path: str
    reason: str

    def __str__(self) -> str:
        return self.reason


class CondenseResult(_Row):
    """``corpus.condense``: a row per condensed session, the sessions skipped (already
    condensed in place) and the failures."""

    rows: list[CondenseRow]
    skipped: list[SkippedSession] = Field(default_factory=list)
    failures: list[TaskFailure]
    computed: int = 0
    cached: int = 0
