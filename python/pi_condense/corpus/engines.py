"""Where the tasks run: in this process, a local process pool, or a Dask / Ray cluster.

Every engine runs the same :func:`~pi_condense.corpus.tasks.run_task` on the same picklable
tasks and yields the outcomes as they finish (in completion order). Dask and Ray are
imported only when asked for (extras ``pi-condense[dask]`` and ``pi-condense[ray]``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Optional

from ..errors import CondenseError
from .tasks import Outcome, Task, run_task

__all__ = ["ENGINES", "EngineError", "run_tasks"]

ENGINES = ("local", "serial", "dask", "ray")
"""``local``: a process pool over the cores; ``serial``: in this process, one at a time;
``dask`` / ``ray``: an existing cluster (``address``), or a local one started for the run."""


class EngineError(CondenseError):
    """An engine cannot be used (unknown name, missing extra, cluster unreachable)."""


def run_tasks(
    tasks: Sequence[Task],
    engine: str = "local",
    *,
    address: Optional[str] = None,
    workers: Optional[int] = None,
) -> Iterator[Outcome]:
    """The outcome of every task, each as soon as it is done."""
    if not tasks:
        return iter(())
    if engine == "serial":
        return (run_task(task) for task in tasks)
    if engine == "local":
        return _local(tasks, workers)
    if engine == "dask":
        return _dask(tasks, address)
    if engine == "ray":
        return _ray(tasks, address)
    raise EngineError(f"unknown engine {engine!r}; expected one of: {', '.join(ENGINES)}")


def _local(tasks: Sequence[Task], workers: Optional[int]) -> Iterator[Outcome]:
    count = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    with ProcessPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(run_task, task) for task in tasks]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def _missing(extra: str, exc: ImportError) -> EngineError:
    return EngineError(
        f"the {extra} engine needs the optional extra: pip install 'pi-condense[{extra}]' ({exc})"
    )


def _dask(tasks: Sequence[Task], address: Optional[str]) -> Iterator[Outcome]:
    try:
        distributed: Any = importlib.import_module("distributed")
    except ImportError as exc:
        raise _missing("dask", exc) from exc
    try:
        client: Any = (
            distributed.Client(address)
            if address
            else distributed.Client(processes=False, dashboard_address=None)
        )
    except OSError as exc:
        raise EngineError(f"cannot connect to the Dask scheduler at {address}: {exc}") from exc
    try:
        futures = client.map(run_task, list(tasks), pure=False)
        for future in distributed.as_completed(futures):
            outcome: Outcome = future.result()
            yield outcome
    finally:
        client.close()


def _ray(tasks: Sequence[Task], address: Optional[str]) -> Iterator[Outcome]:
    try:
        ray: Any = importlib.import_module("ray")
    except ImportError as exc:
        raise _missing("ray", exc) from exc
    started = False
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError) as exc:
            raise EngineError(f"cannot connect to the Ray cluster at {address}: {exc}") from exc
        started = True
    try:
        remote = ray.remote(run_task)
        pending = [remote.remote(task) for task in tasks]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                outcome: Outcome = ray.get(ref)
                yield outcome
    finally:
        if started:
            ray.shutdown()
