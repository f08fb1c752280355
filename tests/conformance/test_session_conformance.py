"""Session-format vectors: our branch walk and context against Pi's own SessionManager.

Every case of ``conformance/session/context-cases.jsonl`` (produced by Pi 0.83 opened
read-only, see its README) must give byte-identical ``JSON.stringify(messages)``, the same
branch (ids when present, entry types), thinking level and model. Key order of appended
entries is checked against ``replay/large-default/session.jsonl.gz``, which Pi wrote itself.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from pi_condense.js import json as jsjson
from pi_condense.session import SessionFile


def _cases(conformance_dir: Path) -> list[dict[str, Any]]:
    path = conformance_dir / "session" / "context-cases.jsonl"
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _shared() -> Path:
    from conftest import shared_root

    return shared_root() / "conformance"


CASES = _cases(_shared())
CASE_IDS = [f"{c['session']}@{c['leaf'] or 'leaf'}" for c in CASES]
_SESSIONS: dict[str, SessionFile] = {}


def _session_path(conformance_dir: Path, fixtures_dir: Path, name: str) -> Path:
    if name.startswith("tree-"):
        return conformance_dir / "session" / name
    return fixtures_dir / name


def _open(conformance_dir: Path, fixtures_dir: Path, name: str) -> SessionFile:
    if name not in _SESSIONS:
        _SESSIONS[name] = SessionFile.load(_session_path(conformance_dir, fixtures_dir, name))
    return _SESSIONS[name]


def _branch_type(entry: dict[str, Any]) -> str:
    kind = str(entry["type"])
    if kind == "message":
        return f"message:{entry['message']['role']}"
    if kind in ("custom", "custom_message"):
        return f"{kind}:{entry['customType']}"
    return kind


def test_case_count(conformance_dir: Path) -> None:
    assert len(CASES) == 9
    assert {c["session"] for c in CASES} == {"large-session.jsonl", "tree-1.jsonl", "tree-2.jsonl"}


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_context_messages_bytes(
    case: dict[str, Any], conformance_dir: Path, fixtures_dir: Path
) -> None:
    session = _open(conformance_dir, fixtures_dir, case["session"])
    context = session.build_context(case["leaf"])
    assert jsjson.dumps(context.messages) == case["messagesJson"]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_context_thinking_level_and_model(
    case: dict[str, Any], conformance_dir: Path, fixtures_dir: Path
) -> None:
    session = _open(conformance_dir, fixtures_dir, case["session"])
    context = session.build_context(case["leaf"])
    assert context.thinking_level == case["thinkingLevel"]
    assert context.model == case["model"]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_branch(case: dict[str, Any], conformance_dir: Path, fixtures_dir: Path) -> None:
    session = _open(conformance_dir, fixtures_dir, case["session"])
    branch = session.branch(case["leaf"])
    assert [_branch_type(e) for e in branch] == case["branchTypes"]
    if "branchIds" in case:
        assert [e["id"] for e in branch] == case["branchIds"]
        assert branch[-1]["id"] == case["resolvedLeaf"]
    if case["leaf"] is None and "resolvedLeaf" in case:
        assert session.leaf_id == case["resolvedLeaf"]


def test_fixture_sessions_load_without_warnings(conformance_dir: Path, fixtures_dir: Path) -> None:
    for name in ("large-session.jsonl", "before-compaction.jsonl"):
        session = SessionFile.load(fixtures_dir / name)
        assert session.warnings == []
        assert session.version == 1
    for name in ("tree-1.jsonl", "tree-2.jsonl"):
        session = SessionFile.load(conformance_dir / "session" / name)
        assert session.warnings == []
        assert session.version == 3


def test_fixture_entry_counts(fixtures_dir: Path) -> None:
    # Counts from fixtures/pi-sessions/README.md (its "entries" count the header line too).
    large = SessionFile.load(fixtures_dir / "large-session.jsonl")
    assert len(large.entries) == 1019 - 1
    roles = [e["message"]["role"] for e in large.entries if e["type"] == "message"]
    assert (roles.count("user"), roles.count("assistant"), roles.count("toolResult")) == (
        88,
        453,
        373,
    )
    before = SessionFile.load(fixtures_dir / "before-compaction.jsonl")
    assert len(before.entries) == 1003 - 1
    assert sum(1 for e in before.entries if e["type"] == "compaction") == 2
    roles = [e["message"]["role"] for e in before.entries if e["type"] == "message"]
    assert roles.count("bashExecution") == 3


def _pi_written_key_orders(conformance_dir: Path) -> dict[str, set[tuple[str, ...]]]:
    path = conformance_dir / "replay" / "large-default" / "session.jsonl.gz"
    orders: dict[str, set[tuple[str, ...]]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            orders.setdefault(entry["type"], set()).add(tuple(entry))
    return orders


def test_append_key_order_matches_pi_writer(conformance_dir: Path, tmp_path: Path) -> None:
    orders = _pi_written_key_orders(conformance_dir)
    session = SessionFile.create(tmp_path / "s.jsonl", "/proj", session_id="sid")
    session.append_message({"role": "user", "content": "hi", "timestamp": 1})
    session.append_thinking_level_change("high")
    session.append_model_change("anthropic", "claude-x")
    session.append_custom("context-prune-stats", {"callCount": 1})
    session.append_custom_message("context-prune-summary", "text", display=True, details={"k": 1})
    fresh = SessionFile.load(tmp_path / "s.jsonl")
    assert tuple(fresh.header) in orders["session"]
    for entry in fresh.entries:
        assert orders[entry["type"]] == {tuple(entry)}, entry["type"]


def test_append_key_order_matches_tree_fixtures(conformance_dir: Path, tmp_path: Path) -> None:
    # compaction, branch_summary and label entries as they appear in the v3 tree fixtures.
    seen: dict[str, set[tuple[str, ...]]] = {}
    for name in ("tree-1.jsonl", "tree-2.jsonl"):
        with (conformance_dir / "session" / name).open(encoding="utf-8") as f:
            for line in f:
                entry = json.loads(line)
                if entry["type"] in ("compaction", "branch_summary", "label"):
                    seen.setdefault(entry["type"], set()).add(tuple(entry))
    session = SessionFile.create(tmp_path / "s.jsonl", "/proj", session_id="sid")
    first = session.append_message({"role": "user", "content": "hi", "timestamp": 1})
    session.append_compaction("summary", first, 1234)
    session.branch_with_summary(first, "what happened")
    session.append_label(first, "bookmark")
    fresh = SessionFile.load(tmp_path / "s.jsonl")
    for entry in fresh.entries[1:]:
        assert seen[entry["type"]] == {tuple(entry)}, entry["type"]
