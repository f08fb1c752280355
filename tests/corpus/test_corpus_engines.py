"""The corpus tasks give the same results on the local process pool, in process and on a
Dask ``LocalCluster`` started by the tests (Ray: corpus/test_corpus_ray.py)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_condense import corpus
from pi_condense.corpus import engines
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
