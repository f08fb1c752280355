"""Issue 14, finding 2: `condense --in-place` never loses a line Pi appends, keeps the
session's permissions, and recovers from an interrupted earlier run."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from pi_condense.session import SessionFile
from support import SUPPORT
from support.inplace import APPEND_BEFORE_SWAP, leftovers
from support.sessions import write_session

APPENDER = SUPPORT / "appender.py"


def cli(args: list[str], tmp_path: Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}\nfrom pi_condense.cli import main\nmain()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent"), "COLUMNS": "120"},
        timeout=300,
        check=False,
    )


def test_a_line_appended_right_before_the_swap_is_not_lost(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl")
    original = session.read_bytes()
    prelude = APPEND_BEFORE_SWAP.format(
        session=str(session), appender=str(APPENDER), ack=str(tmp_path / "ack")
    )
    proc = cli(["condense", str(session), "--in-place", "-q"], tmp_path, prelude)
    assert (tmp_path / "ack").read_text() == "0"  # the other writer's line was acknowledged
    data = session.read_bytes()
    assert data.startswith(original)
    assert b'"id":"pi000000"' in data[len(original) :]
    assert proc.returncode == 2, proc.stderr
    assert "a line was appended while the file was being replaced" in proc.stderr
    assert "nothing was replaced" in proc.stderr
    assert leftovers(tmp_path) == []
    assert SessionFile.load(session).warnings == []


def test_permissions_are_kept(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl")
    session.chmod(0o600)
    proc = cli(["condense", str(session), "--in-place", "-q"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(session.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "s.jsonl.bak").stat().st_mode) == 0o600
    out = cli(["condense", str(session), "--out", str(tmp_path / "o.jsonl"), "-q"], tmp_path)
    assert out.returncode == 0, out.stderr


def test_a_run_killed_before_its_swap_does_not_block_the_retry(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl")
    original = session.read_bytes()
    # What a run killed between its backup and its swap leaves: the backup is still the
    # session's own inode, and its unlocked temporary files.
    os.link(session, tmp_path / "s.jsonl.bak")
    (tmp_path / ".s.jsonl.pi-condense-0123456789ab.tmp").write_bytes(original[:100])
    (tmp_path / ".s.jsonl.bak.pi-condense-ba9876543210.tmp").write_bytes(b"")
    proc = cli(["condense", str(session), "--in-place", "-q"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "s.jsonl.bak").read_bytes() == original
    assert session.read_bytes() != original
    assert leftovers(tmp_path) == []
    # A finished run's backup is a real backup: never overwritten (the session is done).
    again = cli(["condense", str(session), "--in-place", "--force", "-q"], tmp_path)
    assert again.returncode == 0
    assert "already condensed in place" in again.stderr
    assert (tmp_path / "s.jsonl.bak").read_bytes() == original
