"""State rebuild vs parsing the session file.

``PrunerState.from_branch`` (index, refs, summaries, chains, frontier, stats rebuilt from the
``context-prune-*`` entries of the branch) is measured against ``orjson.loads`` of every line
of the same session file: rebuilding the state must cost no more than parsing the file that
holds it (target: ratio <= 1).

The session is ``large-default`` (the reference's pruned replay session) scaled x10 / x100
by ``generate.py``; each benchmark checks its result.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

import generate
from pi_condense.state import PrunerState

Benchmark = Callable[..., Any]
Record = Callable[[Any, str, str, int], None]


def test_orjson_loads_lines(
    benchmark: Any, record: Record, pruned: generate.Workload, copies: int
) -> None:
    lines = pruned.lines
    result = benchmark(lambda: [orjson.loads(line) for line in lines])
    record(benchmark, "state", "baseline", copies)
    assert len(result) == len(lines) == len(pruned.branch) + 1
    assert result[0]["type"] == "session"
    assert result[-1]["id"] == pruned.branch[-1]["id"]


def test_state_rebuild(
    benchmark: Any, record: Record, pruned: generate.Workload, copies: int
) -> None:
    branch = pruned.branch
    state = benchmark(PrunerState.from_branch, branch)
    record(benchmark, "state", "subject", copies)
    base = generate.source_counts(generate.REPLAY_VECTOR)
    index = state.index
    assert index.record_count == base.records * copies
    assert index.summary_count == base.summaries * copies
    assert index.chain_count == base.chains * copies
    assert index.alias_count == base.aliases * copies
    # Refs and block ids continue across copies.
    assert index.next_short_ref_number == base.short_refs * copies + 1
    assert index.next_block_number == base.blocks * copies + 1
    assert state.frontier is not None
    assert state.frontier["lastAttemptedToolCallId"] == _last_frontier_id(branch)


def _last_frontier_id(branch: list[dict[str, Any]]) -> Any:
    for entry in reversed(branch):
        if entry.get("customType") == "context-prune-frontier":
            return entry["data"]["lastAttemptedToolCallId"]
    return None
