"""Corpus condense on the Dask engine against the local process pool, by CPU time.

Pair ``dask``: ``corpus.condense`` of 100 sessions with ``engine="dask"`` (no address: the
engine starts a local in-process cluster for the run and closes it) against
``engine="local"`` with 2 workers, on the same corpus. The sessions are the bundled example's
first :data:`ENTRIES` entries (a real Pi session's header, prompts, tool calls and results,
about 60 model calls), 100 copies in three project folders, condensed with the offline
summarizer into a new tree (``force``: every round rewrites it).

Each round is a fresh interpreter (``python -c``) that imports the package (and for Dask
``distributed``) first, then times the ``corpus.condense`` call alone by its own CPU time and
that of its waited-for children (``RUSAGE_SELF`` + ``RUSAGE_CHILDREN``: the local pool's workers are
joined when it shuts down, so their CPU is counted): the whole process tree of the run,
starting and stopping the cluster or the pool included, importing Dask not. A fresh process per
round keeps the pool's start method ``fork`` (a process where Dask's threads had run would use
``forkserver``, whose workers are not its children) and keeps one engine's leftovers out of
the other's rounds. Target: the Dask engine within 1.15x the local pool's CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from pi_condense.cli._common import EXAMPLE_SESSION

Record = Callable[[Any, str, str, int], None]

SESSIONS = 100
ENTRIES = 200
ROUNDS = 3

_CHILD = """
import json, resource, sys
from pi_condense import corpus

def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

source, out, engine = sys.argv[1:]
if engine == "dask":
    import distributed  # before the timer: the framework's import is not the engine's work
workers = 2 if engine == "local" else None
start = cpu()
result = corpus.condense([source], out, force=True, engine=engine, workers=workers)
spent = cpu() - start
calls = sum(row.model_calls for row in result.rows)
print(json.dumps({"cpu": spent, "rows": len(result.rows), "failures": len(result.failures),
                  "calls": calls}))
"""

_SPENT = [0.0]


def _cpu_spent() -> float:
    """The CPU seconds the rounds' children reported so far (the benchmark's timer)."""
    return _SPENT[0]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("engines")
    lines = EXAMPLE_SESSION.read_text(encoding="utf-8").splitlines()[:ENTRIES]
    text = "\n".join(lines) + "\n"
    for i in range(SESSIONS):
        folder = root / "in" / f"--project-{i % 3}--"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"session-{i:04d}.jsonl").write_text(text, encoding="utf-8")
    return root


def _condense(root: Path, engine: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root / "in"), str(root / f"out-{engine}"), engine],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    report: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    _SPENT[0] += report["cpu"]
    return report


def _check(report: dict[str, Any], root: Path, engine: str) -> None:
    assert report["rows"] == SESSIONS
    assert report["failures"] == 0
    assert report["calls"] > 50 * SESSIONS
    assert _line_counts(root, engine) == {_line_counts(root, engine).pop()}


def _line_counts(root: Path, engine: str) -> set[int]:
    """The outputs' line counts (one per session: the copies are condensed alike)."""
    outputs = sorted((root / f"out-{engine}").rglob("*.jsonl"))
    assert len(outputs) == SESSIONS
    return {len(path.read_bytes().splitlines()) for path in outputs}


@pytest.mark.benchmark(timer=_cpu_spent)
def test_corpus_condense_local_pool(benchmark: Any, record: Record, sessions: Path) -> None:
    report = benchmark.pedantic(
        _condense, args=(sessions, "local"), rounds=ROUNDS, iterations=1, warmup_rounds=0
    )
    record(benchmark, "dask", "baseline", 10)
    _check(report, sessions, "local")


@pytest.mark.benchmark(timer=_cpu_spent)
def test_corpus_condense_dask(benchmark: Any, record: Record, sessions: Path) -> None:
    report = benchmark.pedantic(
        _condense, args=(sessions, "dask"), rounds=ROUNDS, iterations=1, warmup_rounds=0
    )
    record(benchmark, "dask", "subject", 10)
    _check(report, sessions, "dask")
    if (sessions / "out-local").is_dir():  # the other test ran: both condensed alike
        assert _line_counts(sessions, "dask") == _line_counts(sessions, "local")
