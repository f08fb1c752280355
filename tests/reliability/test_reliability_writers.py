"""Issue 14, findings 3 and 6: our writer coexists with Pi's unlocked appends; read-only
loads never need the lock; lock waits are bounded; special files are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_condense.errors import CondenseWarning, SessionError
from pi_condense.session import SessionFile
from support import SUPPORT
from support.disks import fill, small_tmpfs

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]
APPENDER = SUPPORT / "appender.py"


def new_session(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    SessionFile.create(path, "/w", session_id="sid")
    return path


def start_appender(
    path: Path, ack: Path, count: int, pause: float = 0.0
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(APPENDER), str(path), str(ack), str(count), str(pause)]
    )


def lines_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]


def test_appends_survive_a_concurrent_unlocked_writer(tmp_path: Path) -> None:
    path = new_session(tmp_path)
    ack = tmp_path / "ack"
    appender = start_appender(path, ack, 0)
    ours: list[str] = []
    try:
        session = SessionFile.load(path)
        deadline = time.monotonic() + 20
        # Appending until the other writer has demonstrably slipped lines in between ours.
        while time.monotonic() < deadline:
            ours.append(session.append_custom("ours", {"n": len(ours)}))
            if len(ours) >= 300 and len(session) > len(ours) + 50:
                break
    finally:
        appender.kill()
        appender.wait()
    entries = lines_of(path)
    ids = [e["id"] for e in entries[1:]]
    assert all(i in ids for i in ours)
    pi_ids = [i for i in ids if str(i).startswith("pi")]
    acknowledged = int(ack.read_text())
    assert len(pi_ids) >= acknowledged + 1  # every acknowledged line of the other writer is there
    assert pi_ids == [f"pi{n:06d}" for n in range(len(pi_ids))]
    reloaded = SessionFile.load(path)
    assert reloaded.warnings == []
    # Our in-memory session saw the other writer's lines too, in file order, none half-read:
    # every line up to our last append (what the other writer added after it is read at our
    # next append, and how many lines that is depends on the machine's load).
    seen = ids.index(ours[-1]) + 1
    assert [e["id"] for e in session.entries][:seen] == ids[:seen]
    assert session.warnings == []


def pi_entry_line(entry_id: str) -> bytes:
    entry = {
        "type": "custom",
        "customType": "pi",
        "id": entry_id,
        "parentId": None,
        "timestamp": "2026-01-01T00:00:00.000Z",
    }
    return (json.dumps(entry, separators=(",", ":")) + "\n").encode()


@pytest.mark.parametrize("when", ["load", "append"])
def test_a_line_read_half_written_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    # The kernel grows a file page by page, so a reader can see the first part of a line
    # another writer is appending right now. Here the other writer finishes its line during
    # the reader's first short wait, as a real in-flight write does.
    path = new_session(tmp_path)
    session = SessionFile.load(path) if when == "append" else None
    line = pi_entry_line("pi000000")
    with path.open("ab") as handle:
        handle.write(line[:40])
    real_sleep = time.sleep
    waits: list[float] = []

    def finish_the_write(seconds: float) -> None:
        if not waits:
            with path.open("ab") as handle:
                handle.write(line[40:])
        waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr("pi_condense.session.lock.time.sleep", finish_the_write)
    if session is None:
        session = SessionFile.load(path)
    else:
        session.append_custom("ours")
    assert waits, "the reader never waited for the rest of the line"
    assert session.warnings == []
    assert session.get_entry("pi000000") is not None
    assert SessionFile.load(path).warnings == []


def test_a_crash_remnant_costs_two_short_waits_then_reads_as_torn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = new_session(tmp_path)
    with path.open("ab") as handle:
        handle.write(pi_entry_line("pi000000")[:40])
    waits: list[float] = []
    monkeypatch.setattr("pi_condense.session.lock.time.sleep", waits.append)
    session = SessionFile.load(path)
    assert len(waits) == 2
    assert sum(waits) < 0.01
    assert [(w.line, w.kind) for w in session.warnings] == [(2, "truncated")]


def hold_flock(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    script = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(path)!r}, os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "sys.stdout.write('locked\\n'); sys.stdout.flush()\n"
        f"time.sleep({seconds})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"locked\n"
    return proc


def test_read_only_loads_do_not_wait_for_a_held_lock(tmp_path: Path) -> None:
    path = new_session(tmp_path)
    SessionFile.load(path).append_custom("x", 1)
    holder = hold_flock(path, 60)
    try:
        result: list[object] = []
        worker = threading.Thread(target=lambda: result.append(len(SessionFile.load(path))))
        worker.start()
        worker.join(15)
        assert result == [1], "load blocked on another process's lock"
        cli = subprocess.run(
            [*CLI, "session", "info", str(path), "--json"],
            capture_output=True,
            timeout=60,
        )
        assert cli.returncode == 0, cli.stderr
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_wait_is_bounded_with_a_clear_message(tmp_path: Path) -> None:
    path = new_session(tmp_path)
    session = SessionFile.load(path)
    session.lock_timeout = 0.5
    holder = hold_flock(path, 60)
    try:
        with pytest.raises(
            SessionError, match=r"timed out after 0\.5 s waiting for the append lock"
        ):
            session.append_custom("x", 1)
    finally:
        holder.kill()
        holder.wait()
    session.append_custom("x", 2)  # once the holder is gone, appends work again
    assert len(SessionFile.load(path)) == 1


def test_a_fifo_or_device_as_session_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "s.jsonl"
    os.mkfifo(fifo)
    for name in (str(fifo), "/dev/zero"):
        result: list[str] = []

        def load(target: str = name, result: list[str] = result) -> None:
            try:
                SessionFile.load(target)
            except SessionError as exc:
                result.append(str(exc))

        worker = threading.Thread(target=load, daemon=True)
        worker.start()
        worker.join(15)
        assert len(result) == 1, f"{name}: load hung"
        assert result[0].startswith(f"{name}: cannot read session file: not a regular file (")


# ---------------------------------------------------------------- issue 37, finding 3

FSIZE_CHILD = """
import os, resource, signal, sys
from pi_condense.errors import SessionError
from pi_condense.session import SessionFile
path, limit = sys.argv[1], int(sys.argv[2])
session = SessionFile.load(path)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so the write fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    session.append_custom("big", "x" * 20000)
except SessionError as exc:
    print(exc)
    print(session.failed_appends == [str(exc)])
"""


def append_pi_line(path: Path, entry_id: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, pi_entry_line(entry_id))
    finally:
        os.close(fd)


def assert_reads_as_before(path: Path, before: bytes) -> None:
    """The file holds what it held, then nothing but blanks, then the other writer's line,
    which reads whole (nothing glued onto it)."""
    data = path.read_bytes()
    assert data.startswith(before)
    rest = data[len(before) :]
    assert rest.strip(b" \n") == pi_entry_line("pi000001").strip()
    reloaded = SessionFile.load(path)
    assert reloaded.warnings == []
    assert reloaded.get_entry("pi000001") is not None
    assert [e.get("customType") for e in reloaded.entries] == ["x", "pi"]


def test_an_append_cut_by_the_file_size_limit_leaves_nothing_half_written(
    tmp_path: Path,
) -> None:
    path = new_session(tmp_path)
    SessionFile.load(path).append_custom("x", 1)
    before = path.read_bytes()
    limit = len(before) + 5000  # the 20 kB entry gets 5000 bytes in, then EFBIG
    child = subprocess.run(
        [sys.executable, "-c", FSIZE_CHILD, str(path), str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    message, recorded = child.stdout.splitlines()
    assert message == (
        f"{path}: cannot append entry: File too large (the 5000 bytes that reached the file "
        "were blanked, so the file reads as before)"
    )
    assert recorded == "True"
    assert len(path.read_bytes()) == limit  # the blanked bytes are still there (see below)
    append_pi_line(path, "pi000001")  # Pi's next unlocked append
    assert_reads_as_before(path, before)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "64k") as mnt:
        yield mnt


def test_an_append_on_a_full_disk_leaves_nothing_half_written(small_disk: Path) -> None:
    path = new_session(small_disk)
    session = SessionFile.load(path)
    session.append_custom("x", 1)
    before = path.read_bytes()
    filler = fill(small_disk)
    # Free a little less than the entry needs: part of it gets in, then ENOSPC.
    os.truncate(filler, max(filler.stat().st_size - 8192, 0))
    with pytest.raises(SessionError, match="No space left on device") as caught:
        session.append_custom("big", "x" * 40000)
    assert "were blanked, so the file reads as before" in str(caught.value)
    assert len(path.read_bytes()) > len(before)  # part of the entry had reached the file
    filler.unlink()
    append_pi_line(path, "pi000001")
    assert_reads_as_before(path, before)
    # Our own next append works and picks up the other writer's line.
    session.append_custom("after", 2)
    assert SessionFile.load(path).warnings == []
    assert session.get_entry("pi000001") is not None


# ---------------------------------------------------------------- issue 37, finding 5

STALE_WRITER = """
import json, os, random, re, sys, time
path, stop = sys.argv[1], sys.argv[2]
rng = random.Random(37)
n = 0
while not os.path.exists(stop):
    with open(path, "rb") as handle:
        tail = handle.read()[-4096:]
    ids = re.findall(rb'"id":"([^"]+)"', tail)
    parent = ids[-1].decode() if ids else None
    time.sleep(rng.random() * 0.004)  # meanwhile the other writer may append: a stale tip
    entry = {"type": "custom", "customType": "other", "id": f"ot{n:06d}",
             "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z"}
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, (json.dumps(entry, separators=(",", ":")) + "\\n").encode())
    os.close(fd)
    n += 1
"""


def unanswered_results(messages: list[Any]) -> list[str]:
    """Tool results whose call is not in an earlier assistant message."""
    calls: set[str] = set()
    missing = []
    for message in messages:
        if message.get("role") == "assistant":
            calls.update(c["id"] for c in message["content"] if c.get("type") == "toolCall")
        elif message.get("role") == "toolResult" and message["toolCallId"] not in calls:
            missing.append(message["toolCallId"])
    return missing


def test_a_writer_based_on_an_older_tip_takes_none_of_our_turns_off_the_branch(
    tmp_path: Path,
) -> None:
    path = new_session(tmp_path)
    stop = tmp_path / "stop"
    other = subprocess.Popen([sys.executable, "-c", STALE_WRITER, str(path), str(stop)])
    session = SessionFile.load(path)
    ours: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CondenseWarning)
            for turn in range(250):
                call = {"type": "toolCall", "id": f"c{turn}", "name": "read", "arguments": {}}
                ours.append(session.append_message({"role": "assistant", "content": [call]}))
                text = [{"type": "text", "text": "out"}]
                result = {"role": "toolResult", "toolCallId": f"c{turn}", "toolName": "read",
                          "content": text, "isError": False}  # fmt: skip
                ours.append(session.append_message(result))
                time.sleep(0.002)
    finally:
        stop.write_text("")
        other.wait(timeout=30)
    # said once, naming the session
    assert [str(w.message).split(": another writer")[0] for w in caught] == [str(path)]
    others = [e for e in session.entries if e.get("customType") == "other"]
    assert len(others) >= 50  # the other writer really wrote in between
    branch = {e["id"] for e in session.branch()}
    assert [i for i in ours if i not in branch] == []  # every turn of ours is on our branch
    assert unanswered_results(session.build_context().messages) == []
    reloaded = SessionFile.load(path)
    assert reloaded.warnings == []
    for leaf in [e["id"] for e in reloaded.entries]:  # from every entry, as a reload may pick
        assert unanswered_results(reloaded.build_context(leaf).messages) == [], leaf
