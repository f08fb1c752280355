"""``corpus.whatif``: replay every session under each config of a grid."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from ..config import Config
from .grid import expand_grid, whatif_row
from .models import TaskFailure, WhatIfResult, WhatIfSession
from .run import OnOutcome, Paths, RunOptions, make_task, run_kind, sources_of

__all__ = ["whatif"]


def whatif(
    paths: Paths,
    grid: Sequence[tuple[str, Sequence[Any]]] = (),
    *,
    config: Optional[Config] = None,
    summarizer: str = "default",
    base_url: Optional[str] = None,
    engine: str = "local",
    address: Optional[str] = None,
    workers: Optional[int] = None,
    cache_dir: Optional[str] = None,
    on_outcome: Optional[OnOutcome] = None,
) -> WhatIfResult:
    """Replay the raw sessions under ``paths`` under every config of ``grid`` (axes of
    ``(settings key, values)`` over ``config``, default the defaults with pruning on).

    ``summarizer`` is a summarizer spec as ``pi-condense condense --summarizer`` takes
    (default: the offline deterministic one). Rows are sorted by reclaimed share (most
    first), then by re-queries served verbatim (most first). Raises
    :class:`~pi_condense.errors.ConfigError` for a bad grid key or value.
    """
    base = config or Config().with_value("enabled", True)
    configs = expand_grid(base, grid)
    run = RunOptions(engine, address, workers, cache_dir, on_outcome)
    sources = sources_of(paths)
    options = {"summarizer": summarizer, "base_url": base_url}
    tasks = [
        make_task("whatif", source, cfg, run, options, index, key_options=options)
        for index, (_, cfg) in enumerate(configs)
        for source in sources
    ]
    collected = run_kind(tasks, run)
    per_config: list[list[WhatIfSession]] = [[] for _ in configs]
    failed: list[list[TaskFailure]] = [[] for _ in configs]
    for task, result in collected.results:
        per_config[task.index].append(WhatIfSession.model_validate(result["row"]))
    failures: list[TaskFailure] = []
    seen: set[str] = set()
    for task, failure in collected.failures:
        failed[task.index].append(failure)
        if failure.path not in seen:  # a session that cannot be read fails under every config
            seen.add(failure.path)
            failures.append(failure)
    rows = [
        whatif_row(settings, cfg, per_config[i], failed[i])
        for i, (settings, cfg) in enumerate(configs)
    ]
    order = sorted(
        range(len(rows)), key=lambda i: (-rows[i].reclaimed_share, -rows[i].served_verbatim)
    )
    return WhatIfResult(
        rows=[rows[i] for i in order],
        sessions=[per_config[i] for i in order],
        failures=failures,
        computed=collected.computed,
        cached=collected.cached,
    )
