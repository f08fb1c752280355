"""Full replay conformance: `pi-condense replay` reproduces every reference vector byte for byte.

For every vector in ``conformance/replay/`` the CLI replays the vector's raw input with its
config (``--summarizer conformance --deterministic --compat reference``, plus
``--restart-each-prompt`` where the vector's options say so) into a directory of this test run,
naming the vector's own session directory (``--recorded-session-dir``: ``meta.json``
``options.sessionDir``, which appears verbatim in spill paths), and:

- ``session.jsonl`` and ``summarizer.jsonl`` are identical to the vector's;
- every LLM call in ``contexts.jsonl`` matches: the input array, the output array, and the
  record's ``changed`` / ``entries`` / ``nextAssistantTimestamp`` / ``outChars`` /
  ``outSha256``; and the whole file matches the vector's ``SHA256SUMS``;
- spill vectors leave exactly the sidecar files of ``blobs.tar.gz``;
- the replay's counts equal ``meta.json``'s.

The six replays run once per test session, as concurrent subprocesses (one per core).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import run_dir, shared_root

REPLAY = shared_root() / "conformance" / "replay"
FIXTURES = shared_root() / "fixtures" / "pi-sessions"
VECTORS = sorted(p.name for p in REPLAY.iterdir() if (p / "meta.json").is_file())
CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]


def gunzip(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


@dataclass
class Run:
    name: str
    meta: dict[str, Any]
    out_dir: Path
    returncode: int
    stderr: str
    seconds: float

    def output(self, file: str) -> bytes:
        return (self.out_dir / file).read_bytes()

    def expected(self, file: str) -> bytes:
        return gunzip(REPLAY / self.name / f"{file}.gz")


def input_of(name: str, meta: dict[str, Any]) -> Path:
    local = REPLAY / name / "input.jsonl.gz"
    return local if local.is_file() else FIXTURES / meta["input"]["path"]


def command(name: str, meta: dict[str, Any], out_dir: Path) -> list[str]:
    args = [
        *CLI,
        "replay",
        str(input_of(name, meta)),
        "--out",
        str(out_dir),
        "--recorded-session-dir",
        meta["options"]["sessionDir"],
        "--config",
        str(REPLAY / name / "config.json"),
        "--summarizer",
        "conformance",
        "--deterministic",
        "--compat",
        "reference",
        "--quiet",
    ]
    if meta["options"]["restartEachPrompt"]:
        args.append("--restart-each-prompt")
    return args


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Run]]:
    metas = {n: json.loads((REPLAY / n / "meta.json").read_text("utf-8")) for n in VECTORS}
    dirs = {n: run_dir() / "replay" / n for n in metas}
    queue = list(VECTORS)
    active: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
    done: dict[str, Run] = {}
    slots = max(1, min(len(queue), os.cpu_count() or 1))
    try:
        while queue or active:
            while queue and len(active) < slots:
                name = queue.pop(0)
                proc = subprocess.Popen(
                    command(name, metas[name], dirs[name]),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                active[name] = (proc, time.monotonic())
            for name, (proc, started) in list(active.items()):
                if proc.poll() is None:
                    continue
                _, err = proc.communicate()
                del active[name]
                done[name] = Run(
                    name,
                    metas[name],
                    dirs[name],
                    proc.returncode,
                    err.decode("utf-8", "replace"),
                    time.monotonic() - started,
                )
            time.sleep(0.05)
        yield done
    finally:
        for proc, _ in active.values():
            proc.kill()
        for path in dirs.values():
            shutil.rmtree(path, ignore_errors=True)


def first_line_diff(ours: bytes, expected: bytes) -> str:
    a, b = ours.split(b"\n"), expected.split(b"\n")
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"line {i + 1}:\n  ours     {x[:400]!r}\n  expected {y[:400]!r}"
    return f"{len(a)} lines vs {len(b)} expected"


def test_input_is_the_vectors_input() -> None:
    for name in VECTORS:
        meta = json.loads((REPLAY / name / "meta.json").read_text("utf-8"))
        path = input_of(name, meta)
        data = gunzip(path) if path.name.endswith(".gz") else path.read_bytes()
        assert hashlib.sha256(data).hexdigest() == meta["input"]["sha256"], name


@pytest.mark.parametrize("name", VECTORS)
def test_replay_runs_clean(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.mark.parametrize("name", VECTORS)
def test_session_is_byte_identical(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    ours, expected = run.output("session.jsonl"), run.expected("session.jsonl")
    assert ours == expected, first_line_diff(ours, expected)
    sums = (REPLAY / name / "SHA256SUMS").read_text("utf-8")
    assert f"{hashlib.sha256(ours).hexdigest()}  session.jsonl" in sums


@pytest.mark.parametrize("name", VECTORS)
def test_summarizer_log_is_byte_identical(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    ours, expected = run.output("summarizer.jsonl"), run.expected("summarizer.jsonl")
    assert ours == expected, first_line_diff(ours, expected)


def decode(data: bytes) -> tuple[dict[int, str], list[dict[str, Any]]]:
    pool: dict[int, str] = {}
    calls: list[dict[str, Any]] = []
    for line in io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"):
        record = json.loads(line)
        if "p" in record:
            pool[record["p"]] = record["json"]
        else:
            calls.append(record)
    return pool, calls


HEAD = ("changed", "entries", "nextAssistantTimestamp", "outChars", "outSha256")


@pytest.mark.parametrize("name", VECTORS)
def test_every_context_call_matches(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    ours_pool, ours = decode(run.output("contexts.jsonl"))
    pool, expected = decode(run.expected("contexts.jsonl"))
    assert len(ours) == len(expected) == run.meta["counts"]["llmCalls"]
    for got, want in zip(ours, expected, strict=False):
        n = want["call"]
        assert got["call"] == n
        got_in = [ours_pool[k] for k in got["in"]]
        assert got_in == [pool[k] for k in want["in"]], f"call {n}: input differs"
        got_out = "[" + ",".join(ours_pool[k] for k in got["out"]) + "]"
        want_out = "[" + ",".join(pool[k] for k in want["out"]) + "]"
        assert got_out == want_out, f"call {n}: output differs"
        assert {k: got[k] for k in HEAD} == {k: want[k] for k in HEAD}, f"call {n}"
    sums = (REPLAY / name / "SHA256SUMS").read_text("utf-8")
    digest = hashlib.sha256(run.output("contexts.jsonl")).hexdigest()
    assert f"{digest}  contexts.jsonl" in sums


@pytest.mark.parametrize("name", VECTORS)
def test_spill_sidecars(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    ours = {
        p.relative_to(run.out_dir).as_posix(): p.read_bytes()
        for p in run.out_dir.rglob("*")
        if p.is_file() and p.parent != run.out_dir
    }
    expected: dict[str, bytes] = {}
    archive = REPLAY / name / "blobs.tar.gz"
    if archive.is_file():
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    handle = tar.extractfile(member)
                    assert handle is not None
                    expected[os.path.normpath(member.name)] = handle.read()
    assert sorted(ours) == sorted(expected)
    for key, data in expected.items():
        assert ours[key] == data, key
    assert bool(expected) == (run.meta["settingsContextPrune"].get("spillThreshold") is not None)


@pytest.mark.parametrize("name", VECTORS)
def test_counts_match_meta(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    meta = json.loads(run.output("meta.json"))
    assert meta["handlerErrors"] == []
    assert meta["warnings"] == run.meta["warnings"]
    assert meta["counts"] == run.meta["counts"]
