"""State rebuild vs parsing the session file.

``PrunerState.from_branch`` (index, refs, summaries, chains, frontier, stats rebuilt from the
``context-prune-*`` entries of the branch) is measured against ``orjson.loads`` of every line
of the same session file: rebuilding the state must cost no more than parsing the file that
holds it (target: ratio <= 1).

``open`` (issue 17 item 5) is what a host pays to open a session: ``Condenser.open`` of the
file (read, parse, migrate, index), its pruner state, and the context it sends
(``session.build_context().messages``), against the same ``orjson.loads`` of the lines.

The session is ``large-default`` (the reference's pruned replay session) scaled x10 / x100
by ``generate.py``; each benchmark checks its result.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

import generate
from pi_condense.condenser import Condenser
from pi_condense.config import Config
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


def test_condenser_open(
    benchmark: Any, record: Record, pruned: generate.Workload, copies: int
) -> None:
    config = Config.from_settings_dict({"enabled": True})

    def open_session() -> tuple[Condenser, list[Any]]:
        condenser = Condenser.open(pruned.path, config)
        assert condenser.state is not None
        return condenser, condenser.session.build_context().messages

    condenser, messages = benchmark(open_session)
    record(benchmark, "open", "subject", copies)
    base = generate.source_counts(generate.REPLAY_VECTOR)
    assert condenser.state.index.summary_count == base.summaries * copies
    assert len(condenser.session.branch()) == len(pruned.branch)
    assert messages == pruned.messages
