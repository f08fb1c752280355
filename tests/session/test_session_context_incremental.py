"""The session's context and branch, kept as entries arrive, against a plain reading.

A :class:`SessionFile` reads the entries of a linear file (each entry the child of the one
before) once: the load indexes them, takes the tip's branch to be every entry and reads the
context in the same pass, and later appends read only the new entries. These properties
compare what it gives with a direct transcription of spec 01 sections 5 and 7 (walk from
the leaf, then ``buildSessionContext``) over random entry trees: linear files, forks, a
repeated or missing id, labels, custom and compaction entries, model and thinking changes,
and entries that arrive after the load (another writer's appends picked up by ``refresh``,
and our own appends).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Optional

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_condense.errors import CondenseWarning
from pi_condense.js import time as jstime
from pi_condense.session import SessionFile
from support.session_entries import HEADER, sessions


def _walk(entries: list[dict[str, Any]], leaf: dict[str, Any]) -> list[dict[str, Any]]:
    """Spec 01 section 5: the later entry wins in the id map; stop at a null or unknown
    parent (or where the walk would repeat an entry)."""
    by_id = {}
    for entry in entries:
        if isinstance(entry.get("id"), str):
            by_id[entry["id"]] = entry
    path: list[dict[str, Any]] = []
    seen: set[int] = set()
    current: Optional[dict[str, Any]] = leaf
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        path.append(current)
        parent = current.get("parentId")
        current = by_id.get(parent) if isinstance(parent, str) and parent else None
    path.reverse()
    return path


def _message_of(entry: dict[str, Any]) -> Optional[dict[str, Any]]:
    kind = entry.get("type")
    if kind == "message":
        return entry["message"] if isinstance(entry.get("message"), dict) else None
    if kind == "custom_message":
        custom = {"role": "custom"}
        for key in ("customType", "content", "display", "details"):
            if key in entry:
                custom[key] = entry[key]
        custom["timestamp"] = jstime.date_value(entry["timestamp"])
        return custom
    if kind == "branch_summary" and entry.get("summary"):
        summary = {"role": "branchSummary", "summary": entry["summary"]}
        if "fromId" in entry:
            summary["fromId"] = entry["fromId"]
        summary["timestamp"] = jstime.date_value(entry["timestamp"])
        return summary
    if kind == "compaction":  # reached only inside the kept range of a later compaction
        return _summary_of(entry)
    return None


def _summary_of(compaction: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "compactionSummary",
        "summary": compaction["summary"],
        "tokensBefore": compaction["tokensBefore"],
        "timestamp": jstime.date_value(compaction["timestamp"]),
    }


def _expected(entries: list[dict[str, Any]], leaf: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Spec 01 section 7 over the branch of ``leaf``: (messages, thinking level, model)."""
    path = _walk(entries, leaf)
    thinking: Any = "off"
    model: Any = None
    compaction: Optional[dict[str, Any]] = None
    for entry in path:
        kind = entry.get("type")
        if kind == "thinking_level_change":
            thinking = entry.get("thinkingLevel")
        elif kind == "model_change":
            model = {k: entry[f] for k, f in (("provider", "provider"), ("modelId", "modelId"))}
        elif kind == "message" and entry["message"].get("role") == "assistant":
            message = entry["message"]
            model = {"provider": message["provider"], "modelId": message["model"]}
        elif kind == "compaction":
            compaction = entry
    if compaction is None:
        kept = path
        messages: list[Any] = []
    else:
        at = path.index(compaction)
        kept_id = compaction["firstKeptEntryId"]
        first = next((i for i, e in enumerate(path[:at]) if e["id"] == kept_id), at)
        kept = path[first:at] + path[at + 1 :]
        messages = [_summary_of(compaction)]
    messages += [m for m in map(_message_of, kept) if m is not None]
    return messages, thinking, model


def _lines(entries: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in entries)


def _context(session: SessionFile) -> tuple[Any, Any, Any]:
    context = session.build_context()
    return context.messages, context.thinking_level, context.model


def _customs(entries: list[dict[str, Any]], leaf: dict[str, Any]) -> list[dict[str, Any]]:
    """What the pruner's state is rebuilt from: the branch's custom and custom_message
    entries."""
    return [e for e in _walk(entries, leaf) if e["type"] in ("custom", "custom_message")]


PROPERTY = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(entries=sessions())
def test_loaded_context_and_branch_match_the_spec(entries: list[dict[str, Any]]) -> None:
    session = SessionFile.parse(json.dumps(HEADER) + "\n" + _lines(entries))
    expected = _expected(entries, entries[-1])
    assert _context(session) == expected
    assert session.branch() == _walk(entries, entries[-1])
    assert session.custom_entries() == _customs(entries, entries[-1])
    named = [e for e in entries if e["id"] == entries[0]["id"]][-1]  # the later entry wins
    assert session.custom_entries(named["id"]) == _customs(entries, named)
    # Asked again (the kept context), and a fresh list each time.
    first, again = session.build_context(), session.build_context()
    assert (again.messages, again.thinking_level, again.model) == expected
    assert first.messages is not again.messages


@PROPERTY
@given(entries=sessions(), cut=st.integers(0, 40), ask_between=st.booleans())
def test_entries_another_writer_appends_extend_the_context(
    tmp_path: Path, entries: list[dict[str, Any]], cut: int, ask_between: bool
) -> None:
    cut = min(cut, len(entries) - 1)
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(HEADER) + "\n" + _lines(entries[: cut + 1]))
    session = SessionFile.load(path)
    if ask_between:
        assert _context(session) == _expected(entries[: cut + 1], entries[cut])
    with path.open("a") as f:
        f.write(_lines(entries[cut + 1 :]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CondenseWarning)
        session.refresh()
    # The leaf follows the new last entry only if that continues from the old one (issue 37).
    if _continues(entries, cut):
        leaf = entries[-1]
    else:
        # The leaf stays on its id, which names the later entry when one repeats it (as
        # Pi's leafId does: the later entry wins in the id map).
        leaf = [e for e in entries if e.get("id") == entries[cut]["id"]][-1]
    assert _context(session) == _expected(entries, leaf)
    assert session.branch() == _walk(entries, leaf)
    assert session.custom_entries() == _customs(entries, leaf)


def _continues(entries: list[dict[str, Any]], cut: int) -> bool:
    """Whether the last entry's parent chain through the entries after ``cut`` reaches the
    entry at ``cut`` (by id), or the entry at ``cut`` has no id to reach."""
    old = entries[cut].get("id")
    if not (isinstance(old, str) and old):
        return True
    fresh = [id(e) for e in entries[cut + 1 :]]
    for entry in reversed(_walk(entries, entries[-1])):
        if entry.get("id") == old:
            return True
        if id(entry) not in fresh:
            return False
    return False


@PROPERTY
@given(entries=sessions(), texts=st.lists(st.text(max_size=5), min_size=1, max_size=6))
def test_our_appends_extend_the_context(entries: list[dict[str, Any]], texts: list[str]) -> None:
    session = SessionFile.parse(json.dumps(HEADER) + "\n" + _lines(entries))
    assert _context(session) == _expected(entries, entries[-1])
    for i, text in enumerate(texts):
        role = "assistant" if i % 2 else "user"
        message: dict[str, Any] = {"role": role, "content": text, "timestamp": i}
        if role == "assistant":
            message.update(provider="live", model=f"live-{i}")
        session.append_message(message)
        all_entries = session.entries
        assert _context(session) == _expected(all_entries, all_entries[-1])
    session.append_custom("ext", {"i": 1})
    all_entries = session.entries
    assert session.custom_entries() == _customs(all_entries, all_entries[-1])


def test_hundreds_of_appends_at_once_grow_the_same_branch(tmp_path: Path) -> None:
    """A late join's flush appends thousands of entries between two looks at a long branch:
    the branch is the same list grown (same epoch), so what was learned of it is kept."""
    session = SessionFile.create(tmp_path / "s.jsonl", cwd="/w")
    with session.deferred_sync():
        for n in range(600):
            session.append_message({"role": "user", "content": f"a{n}", "timestamp": 1 + n})
    epoch, path = session.branch_path()
    first = list(path)
    with session.deferred_sync():
        for n in range(500):
            session.append_message({"role": "user", "content": f"b{n}", "timestamp": 700 + n})
    again, grown = session.branch_path()
    assert again == epoch
    assert grown is path
    assert grown[: len(first)] == first
    assert len(grown) == len(first) + 500
    assert grown == session.branch()
    # the leaf moved off the branch: a new branch (new epoch)
    session.set_leaf(first[-1]["id"])
    session.append_message({"role": "user", "content": "fork", "timestamp": 5000})
    moved, forked = session.branch_path()
    assert moved != epoch
    assert forked == session.branch()
    assert len(forked) == len(first) + 1
