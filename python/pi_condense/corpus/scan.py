"""``corpus.scan``: the facts of every session of a corpus and the corpus tables."""

from __future__ import annotations

from typing import Optional

from ..config import Config
from .facts import aggregate
from .models import ScanResult, ScanRow
from .run import OnOutcome, Paths, RunOptions, make_task, run_kind, sources_of

__all__ = ["scan"]


def scan(
    paths: Paths = None,
    *,
    engine: str = "local",
    address: Optional[str] = None,
    workers: Optional[int] = None,
    cache_dir: Optional[str] = None,
    config: Optional[Config] = None,
    on_outcome: Optional[OnOutcome] = None,
) -> ScanResult:
    """Scan the sessions under ``paths`` (files, directories, globs; default: Pi's sessions
    directory) on ``engine`` (``local``, ``serial``, ``dask``, ``ray``).

    ``config`` renders the sessions that hold pruner entries (default: the defaults, pruning
    on). With ``cache_dir``, sessions already scanned with the same content and config are
    not scanned again. Raises :class:`~pi_condense.corpus.discover.CorpusError` for a path
    that does not exist; a session that cannot be read is a failure of the result.
    """
    config = config or Config().with_value("enabled", True)
    run = RunOptions(engine, address, workers, cache_dir, on_outcome)
    tasks = [make_task("scan", source, config, run) for source in sources_of(paths)]
    collected = run_kind(tasks, run)
    rows = [ScanRow.model_validate(result["row"]) for _, result in collected.results]
    failures = [failure for _, failure in collected.failures]
    return ScanResult(
        rows=rows,
        failures=failures,
        aggregate=aggregate(rows, failures),
        computed=collected.computed,
        cached=collected.cached,
    )
