"""Issue 41: ``SessionFile.batched()`` appends thousands of entries with one open and one hold
of the append lock, and keeps every guarantee of a single append: whole lines, what another
writer appended read in before our next line, a file replaced or cut meanwhile refused, and
nothing of a process killed inside the block but whole lines."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pi_condense.errors import CondenseWarning, SessionError
from pi_condense.session import SessionFile


def new_session(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    SessionFile.create(path, "/w", session_id="sid")
    return path


def lock_is_free(path: Path) -> bool:
    """Whether another open of the file can take the append lock now."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # (closing releases a lock it took)
    return True


def unlocked_line(path: Path, entry_id: str, parent: object) -> None:
    """Pi's way: one ``appendFileSync`` of a whole line, no lock."""
    entry = {
        "type": "custom",
        "customType": "pi",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, (json.dumps(entry, separators=(",", ":")) + "\n").encode())
    finally:
        os.close(fd)


def file_ids(path: Path) -> list[str]:
    lines = [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]
    return [e["id"] for e in lines[1:]]


def test_a_batch_holds_the_lock_from_its_first_append_to_its_end(tmp_path: Path) -> None:
    path = new_session(tmp_path)
    session = SessionFile.load(path)
    with session.batched():
        assert lock_is_free(path)  # taken at the first append, not before
        first = [session.append_custom("ours", {"n": n}) for n in range(50)]
        assert not lock_is_free(path)
    assert lock_is_free(path)
    assert file_ids(path) == first
    assert [e["parentId"] for e in session.entries[1:]] == first[:-1]
    assert SessionFile.load(path).warnings == []


def test_a_writer_between_two_batches_is_read_in_and_never_overwritten(tmp_path: Path) -> None:
    path = new_session(tmp_path)
    session = SessionFile.load(path)
    with session.batched():
        ours = [session.append_custom("ours", {"n": n}) for n in range(20)]
    other = SessionFile.load(path)  # another pi-condense writer, taking the lock
    theirs = other.append_custom("theirs", 1)
    unlocked_line(path, "pi1", theirs)  # and Pi, without it
    with session.batched():
        ours += [session.append_custom("ours", {"n": n}) for n in range(20, 40)]
    assert file_ids(path) == [*ours[:20], theirs, "pi1", *ours[20:]]
    assert [e["id"] for e in session.entries] == file_ids(path)
    assert session.get_entry(ours[20])["parentId"] == "pi1"  # it continued our branch
    assert SessionFile.load(path).warnings == []


def test_an_unlocked_writer_inside_a_batch_is_read_in_before_our_next_line(
    tmp_path: Path,
) -> None:
    path = new_session(tmp_path)
    session = SessionFile.load(path)
    with session.batched():
        first = session.append_custom("ours", 0)
        unlocked_line(path, "pi1", first)
        unlocked_line(path, "pi2", None)  # a line that starts another branch
        with pytest.warns(CondenseWarning, match="do not continue from this session's leaf"):
            second = session.append_custom("ours", 1)
        unlocked_line(path, "pi3", second)
        third = session.append_custom("ours", 2)
    assert file_ids(path) == [first, "pi1", "pi2", second, "pi3", third]
    assert [e["id"] for e in session.entries] == file_ids(path)
    assert session.get_entry(second)["parentId"] == first  # not Pi's other branch
    assert session.get_entry(third)["parentId"] == "pi3"
    assert SessionFile.load(path).warnings == []


@pytest.mark.parametrize("change", ["replaced", "truncated"])
def test_a_file_replaced_or_cut_inside_a_batch_fails_the_next_append(
    tmp_path: Path, change: str
) -> None:
    path = new_session(tmp_path)
    session = SessionFile.load(path)
    with session.batched():
        session.append_custom("ours", 0)
        data = path.read_bytes()
        if change == "replaced":
            (tmp_path / "copy").write_bytes(data + data.splitlines(keepends=True)[-1])
            os.replace(tmp_path / "copy", path)
            expected = r"s\.jsonl: the file was replaced since it was opened for appending"
        else:
            os.truncate(path, len(data) - 10)
            expected = r"s\.jsonl: the file was rewritten or truncated since it was loaded"
        with pytest.raises(SessionError, match=expected):
            session.append_custom("ours", 1)
        kept = path.read_bytes()
    assert path.read_bytes() == kept  # nothing was written
    assert lock_is_free(path)
    assert len(session.failed_appends) == 1
    assert expected.split(": ")[-1] in session.failed_appends[0]


BATCH_WRITER = """
import sys
from pi_condense.session import SessionFile
session = SessionFile.load(sys.argv[1])
with session.batched():
    n = 0
    while True:
        session.append_custom("ours", {"n": n, "pad": "x" * (n * 997 % 60000)})
        n += 1
        if n == 200:
            sys.stdout.write("going\\n")
            sys.stdout.flush()
"""


def test_a_process_killed_inside_a_batch_leaves_whole_lines_and_no_lock(tmp_path: Path) -> None:
    # Linux stops a write at a page boundary when SIGKILL arrives, so lines of up to 60 KB
    # (15 pages) can be cut: the cut one may only be our unacknowledged entry, never a line of
    # the writer that appends after the kill (Pi, without a lock), and never glued to it
    path = new_session(tmp_path)
    pis: list[str] = []
    for round_ in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", BATCH_WRITER, str(path)], stdout=subprocess.PIPE
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"going\n"
        time.sleep(0.01 * (round_ % 4))
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
        proc.stdout.close()
        loaded = SessionFile.load(path)
        assert len(loaded) >= 200 * (round_ + 1) + 2 * round_
        assert lock_is_free(path)
        pis.append(f"pi{round_}")
        unlocked_line(path, pis[-1], loaded.entries[-1]["id"])
        with loaded.batched():  # the next writer appends at once, after every line
            last = loaded.append_custom("after", round_)
        assert [e["id"] for e in SessionFile.load(path).entries][-2:] == [pis[-1], last]
    final = SessionFile.load(path)
    # a kill while a line was written over its reserved whitespace leaves that line cut, but
    # still ended by its newline: skipped on load, one per kill at most
    assert {w.kind for w in final.warnings} <= {"invalid-json"}
    assert len(final.warnings) <= 8
    assert set(pis) <= {e["id"] for e in final.entries}


JOINER = """
import json, sys, warnings
from pi_condense.integrations.openai_agents import CondenseFilter
history = []
for p in range(100):
    history.append({"role": "user", "content": f"task {p}"})
    for t in range(3):
        call = f"call_{p}_{t}"
        path = json.dumps({"path": f"f{p}_{t}.txt"})
        history.append({"type": "function_call", "id": f"fc_{p}_{t}", "call_id": call,
                        "name": "read", "arguments": path, "status": "completed"})
        text = "".join(f"line {n} of f{p}_{t}.txt\\n" for n in range(60))
        history.append({"type": "function_call_output", "call_id": call, "output": text})
    history.append({"type": "message", "id": f"msg_{p}", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": f"done {p}", "annotations": []}]})
history.append({"role": "user", "content": "and now?"})
history += [{"role": "user", "content": "go on"}] if sys.argv[2:] == ["on"] else []
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    hook = CondenseFilter(session=sys.argv[1])
out = hook.condense(history)
assert "ref `" in json.dumps(out)
hook.close()
"""


def test_a_late_join_killed_midway_leaves_whole_lines_and_the_next_join_completes(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    complete = subprocess.run([sys.executable, "-c", JOINER, str(tmp_path / "whole.jsonl")])
    assert complete.returncode == 0
    took = time.monotonic() - started
    whole = len(SessionFile.load(tmp_path / "whole.jsonl"))
    for round_, share in enumerate((0.45, 0.65)):  # storing the messages, flushing
        path = tmp_path / f"killed-{round_}.jsonl"
        proc = subprocess.Popen([sys.executable, "-c", JOINER, str(path)])
        time.sleep(took * share)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        if not path.exists():
            continue  # killed before the session was created
        assert path.read_bytes().endswith(b"\n")
        assert SessionFile.load(path).warnings == []
        assert lock_is_free(path)
        if round_:
            continue
        # the conversation goes on (the messages are stored by one write: a kill after it and
        # before the flush leaves a session whose next call of the very same history is a
        # restart, which flushes the backlog at its next turn, not at once)
        again = subprocess.run([sys.executable, "-c", JOINER, str(path), "on"], timeout=120)
        assert again.returncode == 0
        loaded = SessionFile.load(path)
        assert loaded.warnings == []
        assert len(loaded) >= whole


def test_a_reader_leaves_a_reserved_line_unread_until_it_is_written(tmp_path: Path) -> None:
    # an append first puts its line's shape in whitespace at the end, then writes the line
    # over it: a reader between the two must neither consume the blanks (it would miss the
    # line) nor take the write in place for a rewritten file
    path = new_session(tmp_path)
    writer = SessionFile.load(path)
    reader = SessionFile.load(path)
    line = (
        b'{"type":"custom","customType":"ours","id":"e1","parentId":null,'
        b'"timestamp":"2026-01-01T00:00:00.000Z"}\n'
    )
    with open(path, "ab") as f:
        f.write(b" " * (len(line) - 1) + b"\n")
    assert reader.refresh() == 0
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, line, path.stat().st_size - len(line))
    finally:
        os.close(fd)
    assert reader.refresh() == 1
    assert reader.entries[-1]["id"] == "e1"
    assert reader.warnings == []
    assert writer.append_custom("next", 1) == SessionFile.load(path).entries[-1]["id"]


def test_a_line_cut_while_written_over_its_reservation_is_skipped_alone(tmp_path: Path) -> None:
    # killed in the middle of the write in place: our line is cut short but keeps its
    # newline, so the line Pi appends next is whole
    path = new_session(tmp_path)
    with open(path, "ab") as f:
        f.write(b'{"type":"custom","customType":"ours","id":"cut","da' + b" " * 40 + b"\n")
    unlocked_line(path, "pi1", None)
    loaded = SessionFile.load(path)
    assert [e["id"] for e in loaded.entries] == ["pi1"]
    assert [(w.line, w.kind) for w in loaded.warnings] == [(2, "invalid-json")]
