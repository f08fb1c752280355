"""Loading a session indexes its entries with one loop, the native one
(``_core.index_entries``), for files of every size and for entries appended one at a time.
It must give what the index rules say (below, :func:`_model`): the entries, the id index
(the later entry wins, ids that are not strings under their ``Map`` key), labels, warnings,
the tip, and for a linear file the context the general walk of the branch gives. The files
mix the entries Pi writes with the odd ones a damaged or foreign file holds (extra headers,
ids that are numbers or missing, repeated ids, message entries without a message, odd
``type`` values, dangling and forked parents).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_condense.js.values import ABSENT, map_key, truthy
from pi_condense.session import SessionFile
from pi_condense.session import index as session_index
from support.session_entries import HEADER, _entry, sessions

ODD = st.sampled_from(
    [
        {"type": "session", "version": 3, "id": "again"},
        {"type": "message", "id": 7, "parentId": None, "message": {"role": "user"}},
        {"type": "message", "parentId": None, "message": {"role": "user"}},
        {"type": "message", "id": None, "parentId": None, "message": {"role": "user"}},
        {"type": "message", "id": "nomsg", "parentId": None, "message": "text"},
        {"type": 3, "id": "oddtype", "parentId": None},
        {"type": None, "id": "nulltype", "parentId": None},
        {"type": "label", "id": "lab", "targetId": "e1", "label": ""},
        {"type": "label", "id": "lab2", "targetId": 7, "label": "seven"},
        {"type": "message", "id": "e0", "parentId": None, "message": {"role": "user"}},
    ]
)


@st.composite
def files(draw: Any) -> list[dict[str, Any]]:
    entries = draw(sessions())
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


def _model(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The index rules, entry by entry (the header is line 1, each entry one line)."""
    kept: list[dict[str, Any]] = []
    warnings: list[tuple[int, str, str]] = []
    by_id: dict[Any, dict[str, Any]] = {}
    labels: dict[Any, Any] = {}
    linear, previous, tip = True, None, None
    for line, entry in enumerate(entries, start=2):
        kind = entry.get("type")
        if kind == "session":
            reason = "extra session header ignored (only the first line is the header)"
            warnings.append((line, "extra-header", reason))
            continue
        entry_id = entry.get("id", ABSENT)
        key = map_key(entry_id)
        seen = key in by_id
        if not isinstance(entry_id, str):
            reason = "entry has no string id (it cannot be a parent or a leaf)"
            warnings.append((line, "bad-entry", reason))
        elif seen:
            reason = f"duplicate entry id {entry_id!r}: the later entry wins in the id index"
            warnings.append((line, "duplicate-id", reason))
        if kind == "message" and not isinstance(entry.get("message"), dict):
            reason = "message entry without a message object (left out of the context)"
            warnings.append((line, "bad-entry", reason))
        if kind == "label":
            target = map_key(entry.get("targetId", ABSENT))
            if truthy(entry.get("label", ABSENT)):
                labels[target] = entry.get("label")
            else:
                labels.pop(target, None)
        parent = entry.get("parentId")
        follows = parent is None if not kept else parent == previous
        linear = linear and isinstance(entry_id, str) and not seen and follows
        previous = tip = entry_id
        by_id[key] = entry
        kept.append(entry)
    return {
        "entries": kept,
        "warnings": warnings,
        "by_id": by_id,
        "labels": labels,
        "tip": tip,
        "linear": len(kept) if linear and kept else 0,
    }


def _index(session: SessionFile) -> dict[str, Any]:
    return {
        "entries": session.entries,
        "warnings": [(w.line, w.kind, w.reason) for w in session.warnings],
        "by_id": session._by_id,
        "labels": session._labels,
        "tip": session._tip,
        "linear": session._linear_count,
    }


def _facts(session: SessionFile) -> tuple[Any, ...]:
    context = session.build_context()
    return (
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
def test_the_index_follows_the_rules_and_the_linear_context_is_the_walked_one(
    entries: list[dict[str, Any]],
) -> None:
    text = json.dumps(HEADER) + "\n" + "".join(json.dumps(e) + "\n" for e in entries)
    session = SessionFile.parse(text)
    assert _index(session) == _model(entries)
    walked = SessionFile.parse(text)
    walked._linear_count, walked._linear_context = 0, None
    assert _facts(session) == _facts(walked)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many items each call of the native loop is handed."""
    calls: list[int] = []
    real = session_index.index_entries

    def counted(items: Any, *args: Any) -> Any:
        calls.append(len(items))
        return real(items, *args)

    monkeypatch.setattr(session_index, "index_entries", counted)
    return calls


def test_a_small_file_and_an_appended_entry_are_indexed_natively(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counted(monkeypatch)
    entries = [_entry("user", n, f"e{n}", f"e{n - 1}" if n else None) for n in range(3)]
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(HEADER) + "\n" + "".join(json.dumps(e) + "\n" for e in entries))
    session = SessionFile.load(path)
    assert calls == [3]
    assert [m["content"] for m in session.build_context().messages] == ["m0", "m1", "m2"]
    with path.open("a") as f:
        f.write(json.dumps(_entry("user", 3, "e3", "e2")) + "\n")
    session.refresh()
    assert calls == [3, 1]
    assert session.leaf_id == "e3"
    assert [m["content"] for m in session.build_context().messages] == ["m0", "m1", "m2", "m3"]


def test_a_long_linear_file_is_read_natively_to_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = [
        _entry("user" if n % 2 else "custom", n, f"e{n}", f"e{n - 1}" if n else None)
        for n in range(200)
    ]
    text = json.dumps(HEADER) + "\n" + "".join(json.dumps(e) + "\n" for e in entries)
    calls = _counted(monkeypatch)
    session = SessionFile.parse(text)
    assert calls == [200]  # every entry read by the native loop, in one call
    assert len(session.build_context().messages) == 100
    assert session.branch() == session.entries


def test_appended_entries_that_refile_a_branch_id_drop_the_kept_branch(tmp_path: Any) -> None:
    # A forked file: the kept branch path is walked; then another writer appends entries,
    # one of which files an id of that branch again (the later entry wins): the branch is
    # read again from the new entry.
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
        session = SessionFile.parse(text)
        assert gc.isenabled() is running
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False]
    assert len(session.build_context().messages) == 100
