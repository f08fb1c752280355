"""Protected-path supersession (pi-condense 2.10.3): when the floor of the live state moves.

Render stubs an earlier read of a protected path (``[Superseded: ...]``) once a later read of
the same path exists, but only where the prompt cache is lost anyway: the live
:class:`pi_condense.SupersedeState` activates the candidates at or after its *floor*
at the next render. A flush lowers the floor to the earliest result it summarized or
deduplicated, a chain compression to the earliest chain start it compressed; a cold cache
(session start, leaf move, compaction, model or thinking-level change) sets it to 0. The rule
itself is ``rust/core/src/render/supersede.rs``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ._core import SupersedeState

__all__ = ["cold_state", "earliest", "lower_floor_by_calls", "lower_floor_by_chains"]


def cold_state() -> SupersedeState:
    """A state as after ``session_start``: nothing activated, a cold cache."""
    state = SupersedeState()
    state.reset()
    return state


def earliest(values: Iterable[Any]) -> Optional[float]:
    """The smallest number among ``values`` (None, and anything not a number, skipped)."""
    out: Optional[float] = None
    for value in values:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and (out is None or value < out):
            out = float(value)
    return out


def lower_floor_by_calls(state: SupersedeState, calls: Iterable[Mapping[str, Any]]) -> None:
    """``lowerFloor(earliestResultTimestamp(calls))`` for captured tool calls."""
    state.lower_floor(earliest(c.get("resultTimestamp") for c in calls))


def lower_floor_by_chains(
    state: SupersedeState, entries: Iterable[Mapping[str, Any]]
) -> None:
    """``lowerFloor(earliestChainStart(entries))`` for appended ``context-prune-chain`` data."""
    state.lower_floor(earliest(e.get("startUserTimestamp") for e in entries))
