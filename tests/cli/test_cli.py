"""The `pi-condense` command, run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], capture_output=True, cwd=cwd, timeout=120, check=False)


def context_cases(conformance_dir: Path) -> list[dict[str, Any]]:
    path = conformance_dir / "session" / "context-cases.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]


def case_file(case: dict[str, Any], conformance_dir: Path, fixtures_dir: Path) -> Path:
    name = case["session"]
    local = conformance_dir / "session" / name
    return local if local.exists() else fixtures_dir / name


def test_version() -> None:
    import pi_condense

    proc = run("--version")
    assert proc.returncode == 0
    assert proc.stdout.decode().strip() == f"pi-condense {pi_condense.__version__}"


def test_session_context_prints_pi_bytes_for_every_case(
    conformance_dir: Path, fixtures_dir: Path
) -> None:
    cases = context_cases(conformance_dir)
    assert len(cases) == 9
    for case in cases:
        args = ["session", "context", str(case_file(case, conformance_dir, fixtures_dir))]
        if case["leaf"] is not None:
            args += ["--leaf", case["leaf"]]
        proc = run(*args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == case["messagesJson"].encode("utf-8"), (case["session"], case["leaf"])


def test_session_info_json_counts_the_example(fixtures_dir: Path) -> None:
    proc = run("session", "info", "--example", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    # Counts from tests/data/fixtures/pi-sessions/README.md (the example is large-session.jsonl).
    assert info["entries"] == 1018
    assert info["messagesByRole"] == {"assistant": 453, "toolResult": 373, "user": 88}
    assert info["version"] == 1
    assert info["warnings"] == []
    assert info["model"] == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    raw = (fixtures_dir / "large-session.jsonl").read_bytes()
    assert info["sizeBytes"] == len(raw)


def test_session_info_table_names_the_session(fixtures_dir: Path) -> None:
    proc = run("session", "info", str(fixtures_dir / "before-compaction.jsonl"))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode()
    assert "compaction" in text
    assert "bashExecution" in text or "toolResult" in text


def write_session_with_bad_lines(tmp_path: Path) -> Path:
    lines = [
        '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}',
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1767225601000}}',
        "{this is not json",
        '{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z",'
        '"message":{"role":"user","content":"again","timestamp":1767225602000}}',
        '{"type":"message","id":"a3","parentId":"a2","timest',
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_warnings_are_reported_and_strict_exits_1(tmp_path: Path) -> None:
    path = write_session_with_bad_lines(tmp_path)
    proc = run("session", "context", str(path))
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == [
        {"role": "user", "content": "hi", "timestamp": 1767225601000},
        {"role": "user", "content": "again", "timestamp": 1767225602000},
    ]
    stderr = proc.stderr.decode()
    assert f"{path}:3:" in stderr
    assert f"{path}:5:" in stderr
    strict = run("session", "info", str(path), "--strict", "--json")
    assert strict.returncode == 1
    info = json.loads(strict.stdout)
    assert [w["line"] for w in info["warnings"]] == [3, 5]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "bad.jsonl"),
        ("not a session\n", "bad.jsonl"),
        ('{"type":"message","id":"x"}\n', "bad.jsonl"),
    ],
)
def test_unreadable_file_exits_2_with_one_line(
    tmp_path: Path, content: str | None, needle: str
) -> None:
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    proc = run("session", "info", str(path))
    assert proc.returncode == 2
    err_lines = proc.stderr.decode().strip().splitlines()
    assert len(err_lines) == 1
    assert needle in err_lines[0]
    assert proc.stdout == b""


def test_unknown_leaf_exits_2(fixtures_dir: Path) -> None:
    proc = run("session", "context", str(fixtures_dir / "large-session.jsonl"), "--leaf", "nope")
    assert proc.returncode == 2
    assert "nope" in proc.stderr.decode()
