"""The corpus tasks give the same results on the local process pool, in process and on a
Dask ``LocalCluster`` started by the tests (Ray: corpus/test_corpus_ray.py)."""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pi_condense import corpus, frozen
from pi_condense.corpus import engines, tasks
from support import corpus as _corpus

ENGINE_SESSIONS = 60


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, _corpus.Plant]:
    root = tmp_path_factory.mktemp("engines") / "sessions"
    return root, _corpus.make_corpus(root, ENGINE_SESSIONS)


@pytest.fixture(scope="module")
def local_results(sessions: tuple[Path, _corpus.Plant]) -> tuple[Any, Any]:
    return _corpus.run_both(sessions[0], engine="local", workers=2)


@pytest.fixture(scope="module")
def dask_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import dask
    import distributed

    scratch = tmp_path_factory.mktemp("dask")
    # Workers and the scheduler keep their scratch space (and lock files) under the test's dir.
    with (
        dask.config.set({"temporary-directory": str(scratch)}),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            local_directory=str(scratch),
        ) as cluster,
    ):
        yield cluster.scheduler_address


def test_local_pool_equals_in_process(
    sessions: tuple[Path, _corpus.Plant], local_results: tuple[Any, Any]
) -> None:
    scanned, whatif = _corpus.run_both(sessions[0], engine="serial")
    _corpus.check_same(local_results, scanned, whatif, sessions[1])
    grace = {r.settings["recoveryGraceTurns"]: r for r in whatif.rows}
    assert grace[0].served_verbatim == 0
    assert grace[3].served_verbatim > 0


def test_the_pool_is_not_forked_beside_other_threads() -> None:
    linux = ["fork", "spawn", "forkserver"]  # get_all_start_methods(): the default first
    assert engines.start_method(1, None, linux) == "fork"
    assert engines.start_method(2, None, linux) == "forkserver"
    # "fork" fixed by an earlier pool of the program is the default still.
    assert engines.start_method(5, "fork", linux) == "forkserver"
    assert engines.start_method(5, "spawn", linux) is None  # the program's own choice
    assert engines.start_method(1, "forkserver", linux) is None
    assert engines.start_method(2, None, ["fork", "spawn"]) == "spawn"
    macos = ["spawn", "fork", "forkserver"]
    assert engines.start_method(1, None, macos) is None
    assert engines.start_method(1, "fork", macos) is None  # asked for on purpose
    assert engines.start_method(1, None, ["spawn"]) is None


def test_local_pool_beside_a_running_thread(
    sessions: tuple[Path, _corpus.Plant], local_results: tuple[Any, Any]
) -> None:
    # A host with threads of its own (a notebook kernel, a server): forking it could leave a
    # worker waiting on a lock one of them held; 3.12+ warns when that happens.
    release = threading.Event()
    busy = threading.Thread(target=release.wait, daemon=True)
    busy.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            beside = _corpus.run_both(sessions[0], engine="local", workers=2)
    finally:
        release.set()
        busy.join()
    assert [str(w.message) for w in caught if "fork" in str(w.message)] == []
    _corpus.check_same(local_results, *beside, sessions[1])


def test_dask_cluster_equals_local(
    sessions: tuple[Path, _corpus.Plant], local_results: tuple[Any, Any], dask_address: str
) -> None:
    scanned, whatif = _corpus.run_both(sessions[0], engine="dask", address=dask_address)
    _corpus.check_same(local_results, scanned, whatif, sessions[1])


def test_cluster_workers_write_the_shared_cache(
    sessions: tuple[Path, _corpus.Plant], tmp_path: Path, dask_address: str
) -> None:
    root = str(sessions[0])
    cache = str(tmp_path / "cache")
    first = corpus.scan([root], engine="dask", address=dask_address, cache_dir=cache)
    again = corpus.scan([root], engine="local", workers=2, cache_dir=cache)
    assert (first.computed, first.cached) == (ENGINE_SESSIONS, 0)
    assert (again.computed, again.cached) == (0, ENGINE_SESSIONS)
    assert again.rows == first.rows


def test_unreachable_dask_scheduler_is_a_clear_error(
    sessions: tuple[Path, _corpus.Plant],
) -> None:
    import dask

    with (
        dask.config.set({"distributed.comm.timeouts.connect": "1s"}),
        pytest.raises(corpus.EngineError, match="cannot connect to the Dask scheduler"),
    ):
        corpus.scan([str(sessions[1].paths[0])], engine="dask", address="tcp://127.0.0.1:1")


_PROBE_DASK = """
import gc, json, sys
import dask.system
# The in-process cluster has one thread a CPU when its tasks may wait on the network: two,
# as on the CI machine, whatever this machine has.
dask.system.CPU_COUNT = 2
import distributed
from pi_condense import corpus, frozen

seen = []
tasks = set()
threads = set()

def probe(phase, info):
    # In a task's closing full collection (run_task): what the Dask worker thread sees.
    if phase == "start" and info["generation"] == 2:
        try:
            worker = distributed.get_worker()
        except ValueError:
            return
        tasks.add(str(worker.get_current_task()))
        threads.add(worker.state.nthreads)
        stealing = any("stealing" in s.extensions for s in distributed.Scheduler._instances)
        seen.append([gc.get_freeze_count(), "profile" in worker.periodic_callbacks,
                     worker._tick_interval, stealing])

gc.callbacks.append(probe)
before = gc.get_freeze_count()
result = corpus.condense([sys.argv[1]], sys.argv[2], engine=sys.argv[3])
gc.callbacks.remove(probe)
rows = sorted([r.path.rsplit("/", 1)[-1], r.model_calls, r.before_chars, r.after_chars,
               r.summaries, r.chains] for r in result.rows)
print(json.dumps({"before": before, "after": gc.get_freeze_count(), "seen": seen,
                  "tasks": len(tasks), "threads": sorted(threads), "rows": rows,
                  "failures": len(result.failures)}))
"""

PROBE_SESSIONS = 24


def _probe(source: Path, out: Path, engine: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE_DASK, str(source), str(out), engine],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    report["stderr"] = proc.stderr
    return report


def test_the_in_process_dask_cluster_runs_batches_on_a_quiet_loop(
    sessions: tuple[Path, _corpus.Plant], tmp_path: Path
) -> None:
    # Each condense task ends with a full collection: in the cluster's own process it must not
    # walk the host's and Dask's long-lived objects once per session. The cluster's own costs
    # are per Dask task and per tick of its event loop, so several sessions go in one task,
    # and nothing samples the tasks for a dashboard that is not there (the workers' profiler),
    # checks the loop every 20 ms or steals tasks within the one worker.
    source = tmp_path / "in"
    source.mkdir()
    for path in sorted(sessions[0].rglob("*.jsonl"))[:PROBE_SESSIONS]:
        (source / path.name).write_bytes(path.read_bytes())
    report = _probe(source, tmp_path / "out-dask", "dask")
    assert (len(report["rows"]), report["failures"]) == (PROBE_SESSIONS, 0)
    assert report["seen"], report["stderr"]
    assert all(frozen > 10_000 for frozen, *_ in report["seen"])
    assert all(not profiling and not stealing for _, profiling, _, stealing in report["seen"])
    assert all(tick >= 1.0 for *_, tick, _ in report["seen"])
    # The offline summarizer waits on nothing: one task thread (two would only take turns at
    # the GIL), and the batches are cut for it, about 8: each closed batch holds at least an
    # 8th of the bytes, so at most 9 tasks, where one task a session would make 24.
    assert report["threads"] == [1]
    assert report["tasks"] <= 8 + 1 < PROBE_SESSIONS
    assert report["before"] == report["after"] == 0  # given back after the run
    serial = _probe(source, tmp_path / "out-serial", "serial")
    assert serial["rows"] == report["rows"]  # the same sessions condensed alike


_PROBE_SERIAL = """
import gc, json, sys
from pi_condense import corpus, frozen

held = [[i] for i in range(50_000)]  # a host's own long-lived objects
seen = []

def probe(phase, info):
    if phase == "start" and info["generation"] == 2:
        seen.append(gc.get_freeze_count())

gc.callbacks.append(probe)
result = corpus.condense([sys.argv[1]], sys.argv[2], engine="serial")
gc.callbacks.remove(probe)
print(json.dumps({"seen": seen, "after": gc.get_freeze_count(), "rows": len(result.rows),
                  "failures": len(result.failures)}))
"""


def test_the_serial_engine_freezes_its_host(
    sessions: tuple[Path, _corpus.Plant], tmp_path: Path
) -> None:
    # The serial engine runs in the caller's process: the full collection that ends each
    # condense task must not walk the caller's objects once per session.
    source = tmp_path / "in"
    source.mkdir()
    for path in sorted(sessions[0].rglob("*.jsonl"))[:4]:
        (source / path.name).write_bytes(path.read_bytes())
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE_SERIAL, str(source), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(proc.stdout.splitlines()[-1])
    assert (report["rows"], report["failures"]) == (4, 0)
    assert sum(frozen > 50_000 for frozen in report["seen"]) >= 4, report["seen"]
    assert report["after"] == 0  # given back after the run


def test_batches_keep_the_order_and_share_the_bytes() -> None:
    def task(i: int, size: int) -> tasks.Task:
        return tasks.Task("scan", f"s{i}.jsonl", size, {}, "key", index=i)

    small = [task(i, 1_000) for i in range(100)]
    cut = tasks.batches(small, threads=2)
    assert [t for batch in cut for t in batch] == small  # every task once, in order
    assert all(batch for batch in cut)
    assert 8 <= len(cut) <= 17  # about 8 a thread
    assert max(map(len, cut)) <= tasks.BATCH_TASKS
    # A large session closes its batch; a few tasks on many threads: one each.
    mixed = [task(0, 10), task(1, 10_000_000), task(2, 10), task(3, 10)]
    assert [len(b) for b in tasks.batches(mixed, threads=1)] == [2, 2]
    assert [len(b) for b in tasks.batches(small[:3], threads=64)] == [1, 1, 1]
    assert tasks.batches([], threads=2) == []
    many = [task(i, 10) for i in range(1_000)]
    assert {len(b) for b in tasks.batches(many, threads=4)} == {tasks.BATCH_TASKS}


def test_only_tasks_that_may_wait_on_the_network_get_a_thread_a_core() -> None:
    def task(kind: str, path: str = "s.jsonl", **options: Any) -> tasks.Task:
        return tasks.Task(kind, path, 10, {}, "key", options=options)

    assert not tasks.waits(task("scan"))
    assert not tasks.waits(task("condense", summarizer="default"))
    assert not tasks.waits(task("whatif", summarizer=" conformance"))
    assert not tasks.waits(task("whatif"))  # no summarizer given: the default
    assert tasks.waits(task("condense", summarizer="openai:gpt-4o-mini"))
    assert tasks.waits(task("whatif", summarizer="ollama:llama3"))
    assert tasks.waits(task("scan", "https://example.com/s.jsonl"))


def test_a_held_freeze_is_known_without_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    # gc.get_freeze_count() walks every frozen object (milliseconds with Dask loaded): a
    # replay inside a freeze of ours (each corpus task) must not pay it.
    counted: list[int] = []
    monkeypatch.setattr(frozen.gc, "get_freeze_count", lambda: counted.append(1) or 0)
    assert not frozen.frozen_by_someone()
    token = frozen.hold()
    try:
        assert frozen.frozen_by_someone()
        assert frozen.frozen_by_someone()
    finally:
        frozen.release(token)
    assert not frozen.frozen_by_someone()
    assert len(counted) == 2  # the two calls outside the freeze


def test_frozen_host_keeps_what_the_process_froze_itself() -> None:
    code = (
        "import gc\n"
        "from pi_condense.corpus.engines import _frozen_host\n"
        "gc.freeze(); held = gc.get_freeze_count()\n"
        "with _frozen_host(True):\n"
        "    inside = gc.get_freeze_count()\n"
        "print(held > 0, inside >= held, gc.get_freeze_count() >= held)\n"
        "gc.unfreeze()\n"
        "with _frozen_host(False):\n"
        "    print(gc.get_freeze_count() == 0)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.split() == ["True", "True", "True", "True"]


def _worker_probe() -> tuple[int, int]:
    """(objects frozen in this worker, cycles a collection found in the task's own garbage)."""
    frozen = gc.get_freeze_count()
    for _ in range(100):
        ring: list[Any] = []
        ring.append(ring)
    return frozen, gc.collect()


def test_local_pool_workers_freeze_what_they_inherit() -> None:
    # A forked worker starts with its parent's objects: frozen, the full collection that ends
    # each condense task does not walk them; the task's own garbage is still collected.
    ballast = [{"i": i} for i in range(50_000)]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        1, mp_context=context, initializer=engines.start_worker, initargs=(os.getpid(),)
    ) as pool:
        frozen, collected = pool.submit(_worker_probe).result()
    assert frozen > len(ballast)
    assert collected >= 50
