"""Chain detection per flush vs serializing the branch messages with orjson.

Every flush that reaches chain compression walks the whole branch: detection (closed,
interrupted and open chains, protected ids, occurrence keys), the recovery grace set, and the
eligibility selection against the chain registry. That is measured here as the flush runs it
(``ChainScan`` + ``select`` with the vector's config: rolling window 3, grace 3 turns, the
default protected path glob) against ``orjson.dumps`` of the same message list. Target: well
under one serialization of the branch (it reads a few fields per message, never the texts).

Pairs (``extra_info``): ``chains`` = the steady state below, ``chains-fresh`` = the fresh
state; both against the same ``orjson.dumps``.

Workloads: the branch messages of ``large-default`` (the reference's replay session, which
holds every message of the raw fixture) scaled x10 / x100 by ``generate.py``, once against an
empty state (nothing compressed: every closed chain but the last three is eligible) and once
against the session's own rebuilt state (the chains the reference compressed found in the
registry: the steady state of a live session). Each benchmark checks its result against the
reference's own chain entries and rolling window.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import orjson

import generate
from pi_condense import _core
from pi_condense.config import Config
from pi_condense.render import render_options
from pi_condense.state import PrunerState

Record = Callable[[Any, str, str, int], None]

_MESSAGES: dict[int, list[Any]] = {}


def _branch_messages(workload: generate.Workload) -> list[Any]:
    if workload.copies not in _MESSAGES:
        _MESSAGES.clear()
        _MESSAGES[workload.copies] = [
            e["message"] for e in workload.branch if e.get("type") == "message" and e.get("message")
        ]
    return _MESSAGES[workload.copies]


def _flush_scan(messages: list[Any], state: PrunerState, config: Config) -> Any:
    """What one flush computes before compressing anything."""
    chain = config.chain_compression
    scan = _core.ChainScan(
        messages,
        grace_turns=float(config.recovery_grace_turns),
        options=render_options(config),
    )
    window = math.nan if chain.rolling_window is None else float(chain.rolling_window)
    return scan.select(state.index, window)


def _reference_chain_entries(workload: generate.Workload) -> int:
    return sum(1 for e in workload.branch if e.get("customType") == "context-prune-chain")


def test_orjson_dumps_branch_messages(
    benchmark: Any, record: Record, pruned: generate.Workload, copies: int
) -> None:
    messages = _branch_messages(pruned)
    result = benchmark(orjson.dumps, messages)
    record(benchmark, "chains", "baseline", copies)
    record(benchmark, "chains-fresh", "baseline", copies)
    assert len(orjson.loads(result)) == len(messages)


def test_chain_scan_fresh_state(
    benchmark: Any,
    record: Record,
    pruned: generate.Workload,
    vector_config: Config,
    copies: int,
) -> None:
    messages = _branch_messages(pruned)
    empty = PrunerState()
    eligible, compressed, deferred = benchmark(_flush_scan, messages, empty, vector_config)
    record(benchmark, "chains-fresh", "subject", copies)
    # Per copy the reference compressed every closed chain but the 3 newest (rolling window
    # 3). With nothing compressed, every closed chain but the session's 3 newest is due: the
    # reference's entries plus the 3 each earlier copy kept raw.
    assert compressed == []
    assert deferred == []
    assert len(eligible) == _reference_chain_entries(pruned) + 3 * (copies - 1)


def test_chain_scan_steady_state(
    benchmark: Any,
    record: Record,
    pruned: generate.Workload,
    vector_config: Config,
    copies: int,
) -> None:
    messages = _branch_messages(pruned)
    state = pruned.state
    eligible, compressed, _ = benchmark(_flush_scan, messages, state, vector_config)
    record(benchmark, "chains", "subject", copies)
    # Every chain the reference compressed is found in the registry; what is left are the
    # 3 chains each earlier copy kept raw (the last copy's 3 are the window).
    assert len(compressed) == _reference_chain_entries(pruned)
    assert len(eligible) == 3 * (copies - 1)
