"""The native module releases what it makes: loading a session, or splitting an occurrence key,
again and again leaves nothing behind (issue 41: a corpus worker grew with every session)."""

from __future__ import annotations

import contextlib
import gc
import json
import sys
from collections.abc import Callable

from pi_condense import _core
from pi_condense.session import SessionFile

ROUNDS = 5


def _blocks_left(work: Callable[[], object]) -> int:
    """Python memory blocks still allocated per round after ``work`` ran ``ROUNDS`` times."""
    work()
    gc.collect()
    before = sys.getallocatedblocks()
    for _ in range(ROUNDS):
        work()
    gc.collect()
    return (sys.getallocatedblocks() - before) // ROUNDS


def _session_bytes(lines: int) -> bytes:
    header = {"type": "session", "version": 3, "id": "leak-1", "cwd": "/w"}
    rows = [header]
    parent = None
    for n in range(lines):
        message = {"role": "user", "content": [{"type": "text", "text": f"line {n}"}]}
        rows.append({"type": "message", "id": f"e{n}", "parentId": parent, "message": message})
        parent = f"e{n}"
    return "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8")


def test_loading_a_session_leaves_nothing_behind() -> None:
    data = _session_bytes(2000)
    loaded = SessionFile.parse(data)
    assert len(loaded.entries) == 2000
    # Before: two index objects of every line's slice were never released (4,000 a load).
    assert _blocks_left(lambda: SessionFile.parse(data)) < 100


def test_splitting_a_key_leaves_nothing_behind() -> None:
    # A key that is not valid UTF-8 (a lone surrogate) is cut by a slice of the str itself.
    ids = ["x" * (300 + n) + "\ud800" for n in range(500)]
    keys = [f"{tool_id}@{n + 1}" for n, tool_id in enumerate(ids)]
    assert _core.parse_occ_key(keys[0]) == (ids[0], 1)

    def split_all() -> None:
        for key in keys:
            _core.parse_occ_key(key)

    assert _blocks_left(split_all) < 50


def test_copying_entries_as_their_lines_read_back_leaves_nothing_behind() -> None:
    # plain entries (copied), and ones left for their text: a "1.0" deep inside, after
    # containers were copied already, and a value stringify refuses
    plain = [
        {"type": "message", "id": f"e{n}", "message": {"content": [{"text": f"{n}"}], "n": n}}
        for n in range(500)
    ]
    odd = [{"a": [{"b": 1}, {"c": [1.0]}]}, {"a": {"b": [{"c": 1}], "2": 0}}]
    copies, missed = _core.reload_copies(plain + odd)
    assert missed == [500, 501]
    assert copies[:500] == plain

    def copy_and_write() -> None:
        _core.reload_copies(plain + odd)
        _core.stringify_lines(plain)
        with contextlib.suppress(TypeError):
            _core.stringify_lines([*plain, {"x": object()}])

    assert _blocks_left(copy_and_write) < 50
