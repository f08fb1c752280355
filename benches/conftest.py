"""Shared fixtures of the benchmark suites: scaled sessions, configs, and the ratio table.

Run all suites (after ``maturin develop --release``)::

    pytest benches                      # bench_*.py, x10 and x100
    pytest benches --copies 10          # x10 only
    python benches/gate.py              # the CI ratio gate (x10, quick)

For numbers comparable to the gate's, add ``--benchmark-timer=time.process_time
--benchmark-disable-gc`` (and see ``gate.run_benchmarks`` for the malloc settings).

Every pair of benchmarks (a pi-condense operation and its baseline on the same data) is
tagged with ``extra_info`` ``{"pair", "role", "copies"}``; after the run a table of the
ratios (subject / baseline, from the minimum and the median round) is printed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gate
import generate
from pi_condense.config import Config

_RESULTS: list[dict[str, Any]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--copies",
        default="10,100",
        help="comma-separated scale factors of the generated sessions (default: 10,100)",
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Optional[pytest.Module]:
    """Collect ``bench_*.py`` when a directory is given (an explicit file is collected anyway)."""
    if (
        file_path.suffix == ".py"
        and file_path.name.startswith("bench_")
        and not parent.session.isinitpath(file_path)
    ):
        module: pytest.Module = pytest.Module.from_parent(parent, path=file_path)
        return module
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "copies" in metafunc.fixturenames:
        raw = str(metafunc.config.getoption("--copies"))
        values = [int(part) for part in raw.split(",") if part.strip()]
        metafunc.parametrize("copies", values, ids=[f"x{n}" for n in values], scope="session")


_WORKLOADS: dict[tuple[str, int], generate.Workload] = {}


def _workload(source: str, copies: int) -> generate.Workload:
    key = (source, copies)
    if key not in _WORKLOADS:
        # One scale at a time: a x100 session holds a few GB of Python objects.
        for other in [k for k in _WORKLOADS if k[1] != copies]:
            del _WORKLOADS[other]
        _WORKLOADS[key] = generate.load_workload(source, copies)
    return _WORKLOADS[key]


@pytest.fixture(scope="session")
def pruned(copies: int) -> generate.Workload:
    """``large-default`` (the reference's pruned session) scaled x ``copies``."""
    return _workload(generate.REPLAY_VECTOR, copies)


@pytest.fixture(scope="session")
def raw(copies: int) -> generate.Workload:
    """The raw fixture ``large-session`` scaled x ``copies`` (no pruner entries)."""
    return _workload("large-session", copies)


@pytest.fixture(scope="session")
def vector_config() -> Config:
    """The replay vector's effective config (compat ``reference``)."""
    return generate.vector_config()


@pytest.fixture
def record() -> Any:
    """``record(benchmark, pair, role, copies)``: tag a finished benchmark for the table."""

    def _record(benchmark: Any, pair: str, role: str, copies: int) -> None:
        benchmark.extra_info.update({"pair": pair, "role": role, "copies": copies})
        stats = getattr(getattr(benchmark, "stats", None), "stats", None)
        if stats is not None:
            per = float(benchmark.extra_info.get("per", 1))  # set before record: per call
            _RESULTS.append(
                {
                    "pair": pair,
                    "role": role,
                    "copies": copies,
                    "min": stats.min / per,
                    "median": stats.median / per,
                }
            )

    return _record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    rows = gate.ratios(_RESULTS)
    if rows:
        terminalreporter.write_line("")
        for line in gate.format_table(rows, bounds=None):
            terminalreporter.write_line(line)
