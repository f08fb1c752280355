"""Start-up of the command line: ``pi-condense --version`` against a bare interpreter.

Pair ``startup``: a fresh interpreter running the console entry point with ``--version``
(``python -c "from pi_condense.cli import main; main()" --version``) / ``python -c pass``.
Both are real subprocesses; each round is timed by the CPU time the child used
(``getrusage(RUSAGE_CHILDREN)``: user + system), so waiting for a core does not count. What
the subject adds is the import of the command line (typer, the native module, the lazy
command table); the commands' own modules (the pruner, pydantic, rich) load only when a
command runs (``tests/test_cli_startup.py`` checks which).
"""

from __future__ import annotations

import resource
import subprocess
import sys
from typing import Any, Callable

import pytest

Record = Callable[[Any, str, str, int], None]

ROUNDS = 7
VERSION = [sys.executable, "-c", "from pi_condense.cli import main; main()", "--version"]
BARE = [sys.executable, "-c", "pass"]


def children_cpu() -> float:
    """User + system CPU seconds of the waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str]) -> bytes:
    return subprocess.run(command, capture_output=True, check=True, timeout=120).stdout


@pytest.mark.benchmark(timer=children_cpu)
def test_startup_bare(benchmark: Any, record: Record) -> None:
    out = benchmark.pedantic(_run, args=(BARE,), rounds=ROUNDS, iterations=1, warmup_rounds=1)
    record(benchmark, "startup", "baseline", 10)
    assert out == b""


@pytest.mark.benchmark(timer=children_cpu)
def test_startup_version(benchmark: Any, record: Record) -> None:
    out = benchmark.pedantic(_run, args=(VERSION,), rounds=ROUNDS, iterations=1, warmup_rounds=1)
    record(benchmark, "startup", "subject", 10)
    assert out.startswith(b"pi-condense ")
