"""The what-if grid (``--set KEY=V1,V2``) and the per-config rows built from replays.

Served verbatim: a re-query event at gap ``g`` (user-turn groups since the previous query of
the same ref, see :mod:`pi_condense.corpus.facts`) is served verbatim under a config when
the earlier recovered output is still inside the recovery grace window at the re-query's
model call: ``recoveryGraceTurns > 0`` and ``g <= recoveryGraceTurns`` (the render-time rule
``nowUTG - recoveryUTG <= recoveryGraceTurns``, where the recovery's UTG is the earlier
query's and ``nowUTG`` the re-query's). With ``context_tree_query`` in ``protectedTools``
every re-query is served (protection keeps recovery output verbatim forever).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from ..config import Config
from ..errors import ConfigError, JsonError
from ..js import json as jsjson
from .models import TaskFailure, WhatIfRow, WhatIfSession

__all__ = ["expand_grid", "parse_set", "percentile", "served_verbatim", "whatif_row"]

QUERY_TOOL_NAME = "context_tree_query"


def _split_values(text: str) -> list[str]:
    """``V1,V2`` split on the commas outside brackets and quotes."""
    parts: list[str] = []
    depth = 0
    quoted = False
    current: list[str] = []
    for i, char in enumerate(text):
        if char == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "[{":
            depth += 1
        elif not quoted and char in "]}":
            depth -= 1
        if char == "," and depth == 0 and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts]


def _value(text: str) -> Any:
    try:
        return jsjson.loads(text)
    except JsonError:
        return text


def parse_set(option: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` -> (key, values); each value is JSON (``3``, ``true``, ``["a"]``)
    or else the text itself. Raises :class:`ConfigError` when malformed."""
    key, sep, values = option.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise ConfigError(f"--set {option!r}: expected KEY=V1,V2,... (e.g. recoveryGraceTurns=0,3)")
    return key, [_value(v) for v in _split_values(values)]


def expand_grid(
    base: Config, axes: Sequence[tuple[str, Sequence[Any]]]
) -> list[tuple[dict[str, Any], Config]]:
    """Every combination of the axes' values over ``base`` (first axis slowest), as
    (the grid's settings, config). Raises :class:`ConfigError` naming a bad key or value."""
    if not axes:
        return [({}, base)]
    grid = []
    for combination in itertools.product(*(values for _, values in axes)):
        config = base
        settings: dict[str, Any] = {}
        for (key, _), value in zip(axes, combination, strict=True):
            try:
                config = config.with_value(key, value)
            except ConfigError as exc:
                raise ConfigError(f"--set {key}={jsjson.dumps(value)}: {exc}") from exc
            settings[key] = value
        grid.append((settings, config))
    return grid


def served_verbatim(gaps: Sequence[int], config: Config) -> int:
    """The re-query events (by gap) the config's grace window serves (module docstring)."""
    if config.is_protected_tool(QUERY_TOOL_NAME):
        return len(gaps)
    grace = config.recovery_grace_turns
    return sum(1 for g in gaps if grace > 0 and g <= grace)


def percentile(values: Sequence[int], q: float) -> float:
    """The ``q``-quantile (0..1) with linear interpolation between closest ranks."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _mean(values: Sequence[int]) -> float:
    return sum(values) / len(values) if values else 0.0


def whatif_row(
    settings: dict[str, Any],
    config: Config,
    sessions: Sequence[WhatIfSession],
    failures: Sequence[TaskFailure],
) -> WhatIfRow:
    """One config's figures over every replayed session."""
    before = [n for s in sessions for n in s.call_before]
    after = [n for s in sessions for n in s.call_after]
    gaps = [g for s in sessions for g in s.requery_gaps]
    served = served_verbatim(gaps, config)
    return WhatIfRow(
        settings=settings,
        sessions=len(sessions),
        failed=len(failures),
        model_calls=len(before),
        before_mean=_mean(before),
        before_p50=percentile(before, 0.5),
        before_p95=percentile(before, 0.95),
        after_mean=_mean(after),
        after_p50=percentile(after, 0.5),
        after_p95=percentile(after, 0.95),
        reclaimed_share=1 - sum(after) / sum(before) if sum(before) else 0.0,
        flushes=sum(s.flushes for s in sessions),
        summarizer_calls=sum(s.summarizer_calls for s in sessions),
        input_tokens=sum(s.input_tokens for s in sessions),
        output_tokens=sum(s.output_tokens for s in sessions),
        cost=sum(s.cost for s in sessions),
        requeries=len(gaps),
        served_verbatim=served,
        served_share=served / len(gaps) if gaps else 0.0,
        handler_errors=sum(len(s.handler_errors) for s in sessions),
    )
