"""Issue 37, findings 3 and 12: `flush` on a full disk, under a file size limit or on a
read-only disk exits non-zero with one-line errors and leaves nothing half-written; odd
header versions and parentIds get a clear error or are read as Pi reads them."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pi_condense.errors import SessionError
from pi_condense.session import SessionFile
from support.disks import small_tmpfs
from support.sessions import write_session

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]


def flush(tmp_path: Path, session: Path, limit: int = 0) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"enabled": True, "minBatchChars": 0}))

    def limited() -> None:
        if limit:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    return subprocess.run(
        [*CLI, "flush", str(session), "--config", str(config), "-q"],
        env=env,
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=120,
    )


def check_failed_cleanly(result: subprocess.CompletedProcess[str], session: Path) -> None:
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    assert f"pi-condense: {session}: cannot " in result.stderr
    assert SessionFile.load(session).warnings == []  # nothing half-written


@pytest.mark.parametrize("room", [300, 9000])
def test_flush_under_a_file_size_limit_fails_in_one_line(tmp_path: Path, room: int) -> None:
    # 300: the first entry is cut; 9000: the summaries fit and a later entry is cut (this
    # case exited 0 before: the flush itself had succeeded).
    session = write_session(tmp_path / "s.jsonl", prompts=6)
    result = flush(tmp_path, session, limit=session.stat().st_size + room)
    check_failed_cleanly(result, session)
    assert "File too large" in result.stderr


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "40k") as mnt:
        yield mnt


def test_flush_on_a_full_disk_fails_in_one_line(tmp_path: Path, mounted: Path) -> None:
    session = write_session(mounted / "s.jsonl", prompts=6)  # about 25 kB of 40 kB
    result = flush(tmp_path, session)
    check_failed_cleanly(result, session)
    assert "No space left on device" in result.stderr


def test_flush_on_a_read_only_disk_fails_in_one_line(tmp_path: Path, mounted: Path) -> None:
    session = write_session(mounted / "s.jsonl", prompts=6)
    subprocess.run(["mount", "-o", "remount,ro", str(mounted)], check=True)
    before = session.read_bytes()
    result = flush(tmp_path, session)
    assert result.returncode == 2  # nothing done
    assert result.stderr == (
        f"pi-condense: {session}: cannot write session file: Read-only file system\n"
    )
    assert session.read_bytes() == before


HEADER = '{"type":"session","id":"s","cwd":"/w","version":'


def test_a_header_version_nested_deep_is_read_as_pi_reads_it() -> None:
    deep = "[" * 1100 + "1" + "]" * 1100
    session = SessionFile.parse(f"{HEADER}{deep}}}\n", name="deep.jsonl")
    assert [w.kind for w in session.warnings] == ["odd-version", "deep"]
    assert "Number(version) = 1)" in session.warnings[0].reason  # String([[1]]) is "1"
    worse = "[[" + "[" * 5000 + "]" * 5000 + "],2]"  # String() of it recurses 5000 deep
    with pytest.raises(SessionError, match=r"^deep\.jsonl: line 1: the header field 'version'"):
        SessionFile.parse(f"{HEADER}{worse}}}\n", name="deep.jsonl")


def test_recover_overview_reads_an_object_or_array_parent_id(tmp_path: Path) -> None:
    def entry(entry_id: str, parent: object, text: str) -> dict[str, object]:
        return {"type": "message", "id": entry_id, "parentId": parent,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": text, "timestamp": 1}}  # fmt: skip

    lines = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        entry("a", None, "one"),
        entry("b", {"x": 1}, "two"),
        entry("c", ["a"], "three"),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = subprocess.run(
        [*CLI, "recover", str(path), "overview"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout)["counts"]
    # a parentId that is no id links to nothing (Pi's Map lookup): three roots, three leaves
    assert (counts["allEntries"], counts["leaves"], counts["otherBranches"]) == (3, 3, 2)
