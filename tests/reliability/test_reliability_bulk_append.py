"""Issue 41: ``SessionFile.append_messages`` stores many messages as one append (one write of
all their lines, indexed once, the entries kept being what the lines read back as) with the
lines one ``append_message`` each would make, and keeps every guarantee of a single append:
all or nothing (a failed write's bytes blanked, nothing indexed), what another writer appended
read in first, under the lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import count
from pathlib import Path
from typing import Any

from pi_condense.session import SessionFile
from support.trees import same_tree


class Clock:
    """Epoch ms that move on every third reading (entries made in one millisecond)."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> int:
        self.readings += 1
        return 1_760_000_000_000 + self.readings // 3


def ids() -> Any:
    numbers = count(1)
    return lambda: f"{next(numbers) % 5:08x}"  # repeats: a taken id must be skipped


def message(n: int) -> dict[str, Any]:
    role = "user" if n % 2 == 0 else "assistant"
    return {"role": role, "content": [{"type": "text", "text": f"m{n} é \u2028"}], "timestamp": n}


def test_the_lines_are_those_of_one_append_message_each(tmp_path: Path) -> None:
    made = {}
    for way in ("one", "bulk"):
        path = tmp_path / f"{way}.jsonl"
        session = SessionFile.create(path, "/w", session_id="sid", clock=Clock(), id_source=ids())
        session.append_custom("before", 1)
        messages = [message(n) for n in range(4)]
        if way == "one":
            got = [session.append_message(m) for m in messages]
        else:
            got = session.append_messages(iter(messages))
        assert got == [e["id"] for e in session.entries[1:]]
        assert session.leaf_id == got[-1]
        assert [m["content"] for m in session.build_context().messages] == [
            m["content"] for m in messages
        ]
        made[way] = (path.read_bytes(), session.entries, SessionFile.load(path).entries)
    assert made["bulk"] == made["one"]
    assert len({made["bulk"][1][i]["id"] for i in range(5)}) == 5


def test_nothing_to_append_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = SessionFile.create(path, "/w", session_id="sid")
    before = path.read_bytes()
    assert session.append_messages([]) == []
    assert path.read_bytes() == before
    assert len(session) == 0


def test_what_another_writer_appended_is_read_in_first(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = SessionFile.create(path, "/w", session_id="sid")
    first = session.append_message(message(0))
    line = {"type": "custom", "customType": "pi", "id": "pi000001", "parentId": first}
    line["timestamp"] = "2026-01-01T00:00:00.000Z"
    with path.open("a") as handle:  # Pi's way: a whole line, no lock
        handle.write(json.dumps(line, separators=(",", ":")) + "\n")
    new = session.append_messages([message(1), message(2)])
    entries = session.entries
    assert [e["id"] for e in entries] == [first, "pi000001", *new]
    assert entries[2]["parentId"] == "pi000001"  # the other writer continued our leaf
    assert SessionFile.load(path).entries == entries
    assert SessionFile.load(path).warnings == []


FSIZE_CHILD = """
import os, resource, signal, sys
from pi_condense.errors import SessionError
from pi_condense.session import SessionFile
path, limit = sys.argv[1], int(sys.argv[2])
session = SessionFile.load(path)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so the write fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
messages = [{"role": "user", "content": "x" * 4000, "timestamp": n} for n in range(5)]
leaf, known = session.leaf_id, len(session)
try:
    session.append_messages(messages)
except SessionError as exc:
    print(exc)
    print(session.failed_appends == [str(exc)], session.leaf_id == leaf, len(session) == known)
"""


def test_a_bulk_append_cut_by_the_file_size_limit_leaves_no_entry(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    SessionFile.create(path, "/w", session_id="sid").append_custom("x", 1)
    before = path.read_bytes()
    limit = len(before) + 9000  # two of the five 4 kB lines fit, the third is cut
    child = subprocess.run(
        [sys.executable, "-c", FSIZE_CHILD, str(path), str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    text, recorded = child.stdout.splitlines()
    assert text == (
        f"{path}: cannot append 5 entries: File too large (the 9000 bytes that reached the "
        "file were blanked, so the file reads as before)"
    )
    assert recorded == "True True True"  # recorded, and nothing of them indexed
    data = path.read_bytes()
    assert data.startswith(before)
    assert len(data) == limit
    assert data[len(before) :].strip(b" \n") == b""  # blanks (line breaks kept)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # Pi's next unlocked append
    os.write(fd, b'{"type":"custom","customType":"pi","id":"pi000001","parentId":null}\n')
    os.close(fd)
    reloaded = SessionFile.load(path)
    assert reloaded.warnings == []
    assert [e.get("customType") for e in reloaded.entries] == ["x", "pi"]


def test_a_session_in_memory_takes_them_as_one_at_a_time() -> None:
    made = []
    for bulk in (False, True):
        session = SessionFile.in_memory("/w", session_id="sid", clock=Clock(), id_source=ids())
        messages = [message(n) for n in range(5)]  # (the id source has five ids)
        if bulk:
            session.append_messages(messages)
        else:
            for m in messages:
                session.append_message(m)
        made.append((session.entries, session.branch(), session.leaf_id))
    assert made[0] == made[1]
    assert len(made[1][0]) == 5


def test_the_entries_kept_are_those_a_reload_reads(tmp_path: Path) -> None:
    """What the session keeps of each message is what its line reads back as: its own
    containers (the caller may change its message afterwards), the keys in the line's order
    and the numbers as the line has them, whether the message is plain JSON or not."""
    path = tmp_path / "s.jsonl"
    session = SessionFile.create(path, "/w", session_id="sid")
    plain = message(0)
    odd = {
        "role": "toolResult",
        "content": [{"type": "text", "text": "out"}],
        "details": {"b": 1, "2": "first", "args": (1, 2.0, -0.0, 2**60 + 1), "ratio": 0.5},
        "isError": False,
    }
    session.append_messages([plain, odd])
    plain["content"].append({"type": "text", "text": "added later"})
    kept = session.entries
    loaded = SessionFile.load(path).entries
    assert len(kept) == 2
    assert all(map(same_tree, kept, loaded))
    assert kept[0]["message"]["content"] == [{"type": "text", "text": "m0 é \u2028"}]
    assert list(kept[1]["message"]["details"]) == ["2", "b", "args", "ratio"]
    # JS prints the double nearest 2**60 + 1 with its shortest digits
    assert kept[1]["message"]["details"]["args"] == [1, 2, 0, 1152921504606847000]
