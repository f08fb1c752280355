"""Loading a session indexes its entries natively first (``_core.index_entries``), then with
the Python loop from the first entry the native loop leaves to it (an id that is not a str,
a ``type`` that is not one). Both must give exactly what the Python loop alone gives: the
entries, the id index (the later entry wins), labels, warnings, the tip, the branch and the
context. The files below mix the entries Pi writes with the odd ones a damaged or foreign
file holds (extra headers, ids that are numbers or missing, repeated ids, message entries
without a message, odd ``type`` values, dangling and forked parents).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_condense.session import SessionFile
from pi_condense.session import index as session_index
from support.session_entries import HEADER, _entry, sessions

ODD = st.sampled_from(
    [
        {"type": "session", "version": 3, "id": "again"},
        {"type": "message", "id": 7, "parentId": None, "message": {"role": "user"}},
        {"type": "message", "parentId": None, "message": {"role": "user"}},
        {"type": "message", "id": "nomsg", "parentId": None, "message": "text"},
        {"type": 3, "id": "oddtype", "parentId": None},
        {"type": None, "id": "nulltype", "parentId": None},
        {"type": "label", "id": "lab", "targetId": "e1", "label": ""},
        {"type": "message", "id": "e0", "parentId": None, "message": {"role": "user"}},
    ]
)


@st.composite
def files(draw: Any) -> list[dict[str, Any]]:
    entries = draw(sessions())
    # Repeat the session to pass the native loop's threshold, with fresh ids.
    copies = draw(st.integers(1, 3))
    grown: list[dict[str, Any]] = []
    for c in range(copies):
        for entry in entries:
            moved = json.loads(json.dumps(entry))
            for key in ("id", "parentId", "targetId"):
                if isinstance(moved.get(key), str):
                    moved[key] = f"{moved[key]}.{c}" if c else moved[key]
            grown.append(moved)
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(grown)))
        grown.insert(at, draw(ODD))
    return grown


def _load(text: str, threshold: int, monkeypatch: pytest.MonkeyPatch) -> SessionFile:
    monkeypatch.setattr(session_index, "_NATIVE_INDEX_FROM", threshold)
    return SessionFile.parse(text)


def _facts(session: SessionFile) -> tuple[Any, ...]:
    context = session.build_context()
    ids = [e.get("id") for e in session.entries]
    labels = {i: session.get_label(i) for i in ids if isinstance(i, str)}
    return (
        session.entries,
        [(w.line, w.kind, w.reason) for w in session.warnings],
        labels,
        session.leaf_id,
        session.branch(),
        context.messages,
        context.thinking_level,
        context.model,
        session.custom_entries(),
    )


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entries=files())
def test_the_native_loop_gives_what_the_python_loop_gives(
    entries: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = json.dumps(HEADER) + "\n" + "".join(json.dumps(e) + "\n" for e in entries)
    native = _facts(_load(text, 1, monkeypatch))
    python = _facts(_load(text, 10**9, monkeypatch))
    assert native == python


def test_a_long_linear_file_is_read_natively_to_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = [
        _entry("user" if n % 2 else "custom", n, f"e{n}", f"e{n - 1}" if n else None)
        for n in range(200)
    ]
    text = json.dumps(HEADER) + "\n" + "".join(json.dumps(e) + "\n" for e in entries)
    calls: list[int] = []
    real = session_index.index_entries

    def counted(items: Any, *args: Any) -> Any:
        done = real(items, *args)
        calls.append(done.read)
        return done

    monkeypatch.setattr(session_index, "index_entries", counted)
    session = _load(text, 1, monkeypatch)
    assert calls == [200]  # every entry read by the native loop
    assert len(session.build_context().messages) == 100
    assert session.branch() == session.entries


def test_appended_entries_that_refile_a_branch_id_drop_the_kept_branch(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A forked file: the kept branch path is walked; then another writer appends entries,
    # one of which files an id of that branch again (the later entry wins): the branch is
    # read again from the new entry.
    monkeypatch.setattr(session_index, "_NATIVE_INDEX_FROM", 1)
    first = [_entry("user", n, f"e{n}", f"e{n - 1}" if n else None) for n in range(10)]
    first.append(_entry("user", 10, "e10", "e3"))  # a fork: not a linear file
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(HEADER) + "\n" + "".join(json.dumps(e) + "\n" for e in first))
    session = SessionFile.load(path)
    assert [e["id"] for e in session.branch()] == ["e0", "e1", "e2", "e3", "e10"]
    again = _entry("user", 11, "e2", None)  # e2 filed again, now a root
    more = [_entry("user", 12 + n, f"x{n}", "e10" if n == 0 else f"x{n - 1}") for n in range(3)]
    with path.open("a") as f:
        f.write("".join(json.dumps(e) + "\n" for e in [again, *more]))
    session.refresh()
    assert [e["id"] for e in session.branch()] == ["e2", "e3", "e10", "x0", "x1", "x2"]


@pytest.mark.parametrize("running", [True, False])
def test_loading_pauses_the_collector_and_leaves_it_as_it_was(
    running: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parsed entries live as long as the session: the cyclic collector is off while they
    # are built, and back to what it was afterwards.
    import gc

    entries = [_entry("user", n, f"e{n}", f"e{n - 1}" if n else None) for n in range(100)]
    text = json.dumps(HEADER) + "\n" + "".join(json.dumps(e) + "\n" for e in entries)
    seen: list[bool] = []
    real = session_index.index_entries

    def observed(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(session_index, "index_entries", observed)
    was = gc.isenabled()
    try:
        (gc.enable if running else gc.disable)()
        session = _load(text, 1, monkeypatch)
        assert gc.isenabled() is running
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False]
    assert len(session.build_context().messages) == 100
