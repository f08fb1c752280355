"""Where the tasks run: in this process, a local process pool, or a Dask / Ray cluster.

Every engine runs the same :func:`~pi_condense.corpus.tasks.run_task` on the same picklable
tasks and yields the outcomes as they finish (in completion order). Dask and Ray are
imported only when asked for (extras ``pi-condense[dask]`` and ``pi-condense[ray]``).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Optional

from .. import frozen
from ..errors import CondenseError
from .tasks import Outcome, Task, batches, run_batch, run_task, waits

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
        return _serial(tasks)
    if engine == "local":
        return _local(tasks, workers)
    if engine == "dask":
        return _dask(tasks, address)
    if engine == "ray":
        return _ray(tasks, address)
    raise EngineError(f"unknown engine {engine!r}; expected one of: {', '.join(ENGINES)}")


def _serial(tasks: Sequence[Task]) -> Iterator[Outcome]:
    # In the caller's process: its objects frozen while the tasks run (see _frozen_host).
    with _frozen_host(True):
        for task in tasks:
            yield run_task(task)


def start_method(threads: int, chosen: Optional[str], methods: Sequence[str]) -> Optional[str]:
    """The start method of the local pool's processes: ``None`` keeps multiprocessing's.

    ``methods`` is ``multiprocessing.get_all_start_methods()`` (the platform's default
    first) and ``chosen`` the method the program fixed, if any. Where the default is
    ``fork`` (Linux up to 3.13), a child forked while other threads run inherits whatever
    locks they held at that moment (stderr's, a logger's, the allocator's) and can hang on
    them, which 3.12+ warns about: a process with other threads (a notebook kernel, a web
    server, the CLI's progress bar) gets ``forkserver`` instead (the default from 3.14 on;
    ``spawn`` where there is none), a single-threaded one keeps the faster ``fork``. Other
    defaults, and a method the program chose that is not the default, are kept.
    """
    default = methods[0] if methods else None
    if default != "fork" or chosen not in (None, "fork"):
        return None
    if threads <= 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def _thread_count() -> int:
    try:
        # Threads started outside Python (native libraries) count too.
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _pool_context() -> Any:
    method = start_method(
        _thread_count(),
        multiprocessing.get_start_method(allow_none=True),
        multiprocessing.get_all_start_methods(),
    )
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        # Workers fork from the server with the tasks' modules loaded instead of importing
        # them each (~0.3 s). Takes effect only if the server is not running yet; the
        # server imports `__main__` first, as it does by default.
        context.set_forkserver_preload(["__main__", run_task.__module__])
    return context


_PR_SET_PDEATHSIG = 1
_PARENT_POLL_S = 0.5


def die_with_parent(parent: int) -> None:
    """Make this worker process end when the process that started the pool (``parent``)
    is gone, even killed without a chance to stop its pool: on Linux the kernel sends it
    SIGKILL when its parent ends (``PR_SET_PDEATHSIG``; a forkserver's children when the
    forkserver ends, which it does when ``parent`` does); elsewhere, and as a back-up, a
    thread checks every half second that its parent is still the one it started with."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    first = os.getppid()
    if first == 1 or not _alive(parent):  # gone before the signal was set up
        os._exit(1)

    def watch() -> None:
        while os.getppid() == first and _alive(parent):
            time.sleep(_PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="pi-condense-parent-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def start_worker(parent: int) -> None:
    """The local pool's worker initializer: :func:`die_with_parent`, then what the worker
    holds at its start frozen out of the collector's reach. A forked worker holds a copy of
    everything its parent had (a notebook's data, an imported framework), and a replaying task
    ends with a full collection (see :func:`~pi_condense.corpus.tasks.run_task`) that would
    walk all of it once per session (and copy every page it touches: the pages the worker
    shares with its parent stay shared)."""
    die_with_parent(parent)
    gc.freeze()
    frozen.hold()  # for good: the worker is the pool's (its replays need not count them)


def _local(tasks: Sequence[Task], workers: Optional[int]) -> Iterator[Outcome]:
    count = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    with ProcessPoolExecutor(
        max_workers=count,
        mp_context=_pool_context(),
        initializer=start_worker,
        initargs=(os.getpid(),),
    ) as pool:
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
        if address:
            client: Any = distributed.Client(address)
        else:
            with importlib.import_module("dask").config.set(IN_PROCESS_DASK):
                client = distributed.Client(
                    processes=False,
                    dashboard_address=None,
                    threads_per_worker=None if any(map(waits, tasks)) else 1,
                )
    except OSError as exc:
        raise EngineError(f"cannot connect to the Dask scheduler at {address}: {exc}") from exc
    try:
        with _frozen_host(not address):
            threads = sum(client.nthreads().values()) or 1
            futures = client.map(run_batch, batches(tasks, threads), pure=False)
            for future in distributed.as_completed(futures):
                outcomes: list[Outcome] = future.result()
                yield from outcomes
    finally:
        client.close()


IN_PROCESS_DASK: dict[str, Any] = {
    # No dashboard reads them: the workers' statistical profiler (it samples every running
    # task's stack every 10 ms, a tenth of the run's CPU on 100 sessions) and the system
    # monitor's samples (CPU, memory, disk and network counters, the GIL's contention).
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "10s",
    "distributed.admin.system-monitor.disk": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    # The event loop's health check wakes it every 20 ms (and with it the GIL's hand-over
    # from the task threads); once a second still reports a blocked loop.
    "distributed.admin.tick.interval": "1s",
    # One worker: there is nobody to steal tasks from.
    "distributed.scheduler.work-stealing": False,
    # The worker's memory check (its process's RSS, read from /proc) every 100 ms was half of
    # what the idle loop spends (3.3 of 6.3 ms a second); once a second still pauses the
    # worker or spills its results before the process runs short.
    "distributed.worker.memory.monitor-interval": "1s",
}
"""The Dask settings of the in-process cluster started for a run (none is changed on a
cluster given by ``address``): what its event loop does while the tasks run, besides them.

Its one worker runs the tasks in one thread when none of them waits on the network
(:func:`~pi_condense.corpus.tasks.waits`: the offline summarizers, local files): the tasks
compute under the GIL, so a second thread adds no speed, only the two threads' turns at it
(each hand-over every few milliseconds, the other session's memory in the caches), about
7% of the tasks' CPU on 100 sessions. With a summarizer that calls a model it keeps a
thread a core, whose waits overlap."""


@contextlib.contextmanager
def _frozen_host(freeze: bool) -> Iterator[None]:
    """With ``freeze``: what this process holds now (the caller's objects, and with an
    in-process cluster Dask's scheduler, worker and client, all long-lived) frozen out of the
    collector's reach while the tasks run in it, then given back. A replaying task ends with a
    full collection (see :func:`~pi_condense.corpus.tasks.run_task`), which would otherwise
    walk all of it once per session: a third of the in-process cluster's CPU on 100 sessions,
    and of the serial engine's. The objects of a process that froze some already (the command
    line freezes its imports) stay frozen."""
    if not freeze:
        yield
        return
    ours = not frozen.frozen_by_someone()
    gc.collect()
    gc.freeze()
    token = frozen.hold()  # each task's replay knows without counting them (frozen.py)
    try:
        yield
    finally:
        frozen.release(token)
        if ours:
            gc.unfreeze()


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
