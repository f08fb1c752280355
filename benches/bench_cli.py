"""Start-up of the command line against a bare interpreter (``python -c pass``).

Pairs (each a fresh interpreter running the console entry point,
``python -c "from pi_condense.cli import main; main()" ...``):

- ``startup``: ``--version``. What it adds to the bare interpreter is the package and the
  native module: the command line's framework (typer) is not imported for it;
- ``startup-condense``: ``condense`` of a session with one model call (the first user message
  and assistant reply of the raw fixture ``large-session``), written to a new file: the
  imports of the pipeline (asyncio, the config, the pruner; not typer, pydantic or rich, which
  a plain ``condense --json`` does not load) and one replay.

All are real subprocesses; each round is timed by the CPU time the child used
(``getrusage(RUSAGE_CHILDREN)``: user + system), so waiting for a core does not count. The
commands' own modules load only when a command runs (``tests/cli/test_cli_startup.py`` checks
which).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

import generate

Record = Callable[[Any, str, str, int], None]

ROUNDS = 7
ENTRY = [sys.executable, "-c", "from pi_condense.cli import main; main()"]
VERSION = [*ENTRY, "--version"]
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


def _one_call_session(folder: Path) -> Path:
    """The raw fixture's header, first user message and first assistant reply."""
    lines = generate.read_source("large-session").decode("utf-8").splitlines()
    kept = [lines[0]]
    for line in lines[1:]:
        kept.append(line)
        entry = json.loads(line)
        if entry.get("type") == "message" and entry["message"].get("role") == "assistant":
            break
    path = folder / "one-call.jsonl"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path


@pytest.mark.benchmark(timer=children_cpu)
def test_startup_condense_one_call(benchmark: Any, record: Record, tmp_path: Path) -> None:
    session = _one_call_session(tmp_path)
    target = tmp_path / "one-call.condensed.jsonl"
    command = [*ENTRY, "condense", str(session), "-o", str(target), "--force", "--json"]
    out = benchmark.pedantic(_run, args=(command,), rounds=ROUNDS, iterations=1, warmup_rounds=1)
    record(benchmark, "startup-condense", "subject", 10)
    assert json.loads(out)["llmCalls"] == 1
    roles = [
        json.loads(line).get("message", {}).get("role")
        for line in target.read_text(encoding="utf-8").splitlines()
    ]
    assert [role for role in roles if role] == ["user", "assistant"]
