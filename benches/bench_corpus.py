"""Corpus scan: throughput on 1 vs 2 local workers, and the cost per session against parsing.

The corpus is ``4 x copies`` (at most 100) copies of the bundled example session (a real
1 MB Pi session of 1018 entries) in a scratch directory, three times that for ``scale``; the
result cache is off, so every round scans every session.

- ``scale``: ``corpus.scan(engine="local", workers=2)`` against ``workers=1`` on the same
  corpus, by wall-clock time (the work happens in the worker processes, which the gate's
  CPU timer of this process would not see). Target: 2 workers at least 1.5x the throughput
  of 1 (time ratio <= 0.667) on a 2-core machine. The MB/s of both and the scaling factor
  are printed. Starting and stopping a pool costs about 0.1 s whatever its size; the corpus is
  made large enough (120 sessions at x10, about 4 s of work) that this fixed cost does not
  decide the ratio, as it does not on a real corpus of thousands of sessions.
- ``scan``: ``corpus.scan(engine="serial")`` (read, hash, parse, branch walk, context build,
  JSON.stringify length, token estimate, re-query walk per session) against
  ``orjson.loads`` of every line of the same files, read from disk too.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable

import orjson
import pytest

from pi_condense import corpus
from pi_condense.cli._common import EXAMPLE_SESSION

Record = Callable[[Any, str, str, int], None]
SCALE_ROUNDS = 5


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory, copies: int) -> Path:
    return _corpus(tmp_path_factory.mktemp(f"corpus-x{copies}"), _sessions(copies))


@pytest.fixture(scope="module")
def scale_dir(tmp_path_factory: pytest.TempPathFactory, copies: int) -> Path:
    return _corpus(tmp_path_factory.mktemp(f"scale-x{copies}"), _scale_sessions(copies))


def _corpus(root: Path, sessions: int) -> Path:
    for i in range(sessions):
        folder = root / f"--project-{i % 3}--"
        folder.mkdir(exist_ok=True)
        shutil.copyfile(EXAMPLE_SESSION, folder / f"session-{i:04d}.jsonl")
    return root


def _sessions(copies: int) -> int:
    return 4 * min(copies, 25)


def _scale_sessions(copies: int) -> int:
    return 3 * _sessions(copies)


def _scan(root: Path, **engine: Any) -> corpus.ScanResult:
    result = corpus.scan([str(root)], **engine)
    assert not result.failures
    return result


def _wall_clock(benchmark: Any) -> None:
    # pytest-benchmark has one timer per run (the gate passes time.process_time); these
    # rounds are spent in child processes, so they are timed by the wall clock.
    benchmark._timer = time.perf_counter


def _check(result: corpus.ScanResult, sessions: int) -> None:
    assert len(result.rows) == sessions
    assert {r.content_hash for r in result.rows} == {result.rows[0].content_hash}
    assert result.aggregate.messages_by_role["user"] == 88 * sessions
    assert result.aggregate.bytes == EXAMPLE_SESSION.stat().st_size * sessions


def test_scan_one_worker(benchmark: Any, record: Record, scale_dir: Path, copies: int) -> None:
    _wall_clock(benchmark)
    result = benchmark.pedantic(
        _scan, args=(scale_dir,), kwargs={"workers": 1}, rounds=SCALE_ROUNDS, warmup_rounds=1
    )
    record(benchmark, "scale", "baseline", copies)
    _check(result, _scale_sessions(copies))
    _report(benchmark, result, "1 worker")


def test_scan_two_workers(benchmark: Any, record: Record, scale_dir: Path, copies: int) -> None:
    _wall_clock(benchmark)
    result = benchmark.pedantic(
        _scan, args=(scale_dir,), kwargs={"workers": 2}, rounds=SCALE_ROUNDS, warmup_rounds=1
    )
    record(benchmark, "scale", "subject", copies)
    _check(result, _scale_sessions(copies))
    _report(benchmark, result, "2 workers")


_THROUGHPUT: dict[str, float] = {}


def _report(benchmark: Any, result: corpus.ScanResult, label: str) -> None:
    mb_per_s = result.aggregate.bytes / benchmark.stats.stats.min / 1e6
    benchmark.extra_info["mb_per_s"] = round(mb_per_s, 2)
    _THROUGHPUT[label] = mb_per_s
    line = f"corpus scan, {label}: {mb_per_s:.1f} MB/s"
    if len(_THROUGHPUT) == 2:
        line += (
            f"; scaling 2 vs 1 workers: {_THROUGHPUT['2 workers'] / _THROUGHPUT['1 worker']:.2f}x"
        )
    print(f"\n{line}")


def test_orjson_loads_corpus_lines(
    benchmark: Any, record: Record, corpus_dir: Path, copies: int
) -> None:
    files = sorted(corpus_dir.rglob("*.jsonl"))

    def parse() -> int:
        count = 0
        for path in files:
            count += len([orjson.loads(line) for line in path.read_bytes().splitlines()])
        return count

    count = benchmark(parse)
    record(benchmark, "scan", "baseline", copies)
    assert count == 1019 * _sessions(copies)


def test_scan_in_process(benchmark: Any, record: Record, corpus_dir: Path, copies: int) -> None:
    result = benchmark.pedantic(
        _scan, args=(corpus_dir,), kwargs={"engine": "serial"}, rounds=5, warmup_rounds=1
    )
    record(benchmark, "scan", "subject", copies)
    _check(result, _sessions(copies))
