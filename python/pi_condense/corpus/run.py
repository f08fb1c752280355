"""Running one kind of task over a corpus: tasks from sources, outcomes collected in order."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from ..config import Config
from .cache import digest
from .discover import SessionSource, discover
from .engines import run_tasks
from .models import TaskFailure
from .tasks import Outcome, Task

__all__ = ["Collected", "OnOutcome", "Paths", "RunOptions", "run_kind", "sources_of"]

Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]], None]
OnOutcome = Callable[[Outcome], None]


@dataclass
class RunOptions:
    """How to run: the engine and its cluster ``address``, local ``workers``, the result
    cache directory (None: no cache), and a callback for every finished task."""

    engine: str = "local"
    address: Optional[str] = None
    workers: Optional[int] = None
    cache_dir: Optional[str] = None
    on_outcome: Optional[OnOutcome] = None


@dataclass
class Collected:
    """The outcomes of a run, in task order, split into results and failures."""

    results: list[tuple[Task, dict[str, Any]]] = field(default_factory=list)
    failures: list[tuple[Task, TaskFailure]] = field(default_factory=list)
    computed: int = 0
    cached: int = 0


def sources_of(paths: Paths) -> list[SessionSource]:
    """The session files of ``paths`` (one path, several, or None for Pi's sessions dir)."""
    if paths is None:
        return discover(None)
    if isinstance(paths, (str, os.PathLike)):
        return discover([os.fspath(paths)])
    return discover([os.fspath(p) for p in paths])


def config_settings(config: Config) -> dict[str, Any]:
    """The config as the ``contextPrune`` object a worker rebuilds it from."""
    return config.to_settings_dict()


def make_task(
    kind: str,
    source: SessionSource,
    config: Config,
    run: RunOptions,
    options: Optional[dict[str, Any]] = None,
    index: int = 0,
    key_options: Optional[dict[str, Any]] = None,
) -> Task:
    """A task whose cache key covers the kind, the config and ``key_options``."""
    settings = config_settings(config)
    return Task(
        kind=kind,
        path=source.path,
        size=source.size,
        settings=settings,
        config_key=digest(kind, settings, key_options or {}),
        cache_dir=run.cache_dir,
        options=options or {},
        index=index,
    )


def run_kind(tasks: Sequence[Task], run: RunOptions) -> Collected:
    """Run ``tasks`` on ``run.engine``; results and failures back in task order."""
    order = {(t.path, t.index): i for i, t in enumerate(tasks)}
    done: dict[int, Outcome] = {}
    collected = Collected()
    for outcome in run_tasks(tasks, run.engine, address=run.address, workers=run.workers):
        done[order[(outcome.path, outcome.index)]] = outcome
        if outcome.cached:
            collected.cached += 1
        else:
            collected.computed += 1
        if run.on_outcome is not None:
            run.on_outcome(outcome)
    for i, task in enumerate(tasks):
        outcome = done[i]
        if outcome.result is not None:
            collected.results.append((task, outcome.result))
        elif outcome.failure is not None:
            collected.failures.append((task, TaskFailure.model_validate(outcome.failure)))
    return collected
