"""Session recovery tools (seed 003, spec 06 part B) over real session files.

The fixture mirrors the seed module's own test session (active branch with a compaction, an
abandoned branch, a malformed entry); expected values come from the seed contract, the spec
and that test file, never from this implementation's output.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any, Optional

import pytest
from typer.testing import CliRunner

from pi_condense.cli import app
from pi_condense.session import SessionFile
from pi_condense.tools import SessionRecovery
from pi_condense.tools.base import ToolResult
from pi_condense.tools.recovery.common import clamp_int
from pi_condense.tools.recovery.cursors import Cursor

# ----------------------------------------------------------------------------- helpers


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def call(id_: str, name: str, args: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": id_, "name": name, "arguments": args}


def msg(id_: str, parent: Optional[str], second: int, message: dict[str, Any]) -> dict[str, Any]:
    stamp = f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}.000Z"
    return {
        "type": "message",
        "id": id_,
        "parentId": parent,
        "timestamp": stamp,
        "message": message,
    }


def header(session_id: str = "session-1", **extra: Any) -> dict[str, Any]:
    return {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/work",
        **extra,
    }


def write_session(path: Path, lines: list[dict[str, Any]]) -> SessionFile:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return SessionFile.load(path)


def fixture_lines() -> list[dict[str, Any]]:
    return [
        header(parentSession="/sessions/parent.jsonl"),
        msg("u1", None, 0, {"role": "user", "content": "Fix ФАЙЛ alpha before compaction"}),
        msg(
            "a1",
            "u1",
            1,
            {
                "role": "assistant",
                "content": [
                    text("Inspecting alpha"),
                    call("call-read", "read", {"path": "src/read.ts"}),
                ],
            },
        ),
        msg(
            "r1",
            "a1",
            2,
            {
                "role": "toolResult",
                "toolCallId": "call-read",
                "toolName": "read",
                "content": [text("alpha source")],
                "isError": False,
            },
        ),
        {
            "type": "compaction",
            "id": "comp1",
            "parentId": "r1",
            "timestamp": "2026-01-01T00:00:03.000Z",
            "summary": "Earlier alpha work was compacted",
            "firstKeptEntryId": "u2",
            "tokensBefore": 42000,
            "details": {"readFiles": ["carried-read.ts"], "modifiedFiles": ["carried-write.ts"]},
        },
        msg(
            "u2",
            "comp1",
            4,
            {"role": "user", "content": [text("Latest instruction: finish recovery")]},
        ),
        msg(
            "a2",
            "u2",
            5,
            {
                "role": "assistant",
                "content": [
                    call(
                        "call-patch",
                        "apply_patch",
                        {"input": "*** Begin Patch\n*** Update File: src/changed.ts\n*** End"},
                    )
                ],
            },
        ),
        msg(
            "r2",
            "a2",
            6,
            {
                "role": "toolResult",
                "toolCallId": "call-patch",
                "toolName": "apply_patch",
                "content": [text("Patch failed")],
                "isError": True,
            },
        ),
        msg(
            "a3",
            "r2",
            7,
            {
                "role": "assistant",
                "content": [
                    call("pending-other", "read", {"path": "src/pending.ts"}),
                    call("current-call", "session_recovery_context", {}),
                ],
            },
        ),
        {
            "type": "custom",
            "id": "custom1",
            "parentId": "a3",
            "timestamp": "2026-01-01T00:00:08.000Z",
            "customType": "safe",
            "data": {"value": 1},
        },
        {"type": "message", "message": {"role": "user", "content": "malformed without id"}},
        msg("u-abandoned", "u1", 3, {"role": "user", "content": "Abandoned branch phrase"}),
    ]


@pytest.fixture
def session(tmp_path: Path) -> SessionFile:
    return write_session(tmp_path / "s.jsonl", fixture_lines())


@pytest.fixture
def tools(session: SessionFile) -> SessionRecovery:
    # The file's last entry is the abandoned one; the active branch ends at custom1.
    return SessionRecovery(session, leaf="custom1")


def payload(result: ToolResult) -> Any:
    assert not result.is_error, result.text
    return json.loads(result.text)


def chain_session(tmp_path: Path, count: int, make: Any, name: str = "c.jsonl") -> SessionFile:
    lines: list[dict[str, Any]] = [header()]
    parent: Optional[str] = None
    for i in range(count):
        entry = make(i, parent)
        lines.append(entry)
        parent = entry["id"]
    return write_session(tmp_path / name, lines)


def user(i: int, parent: Optional[str]) -> dict[str, Any]:
    return msg(f"u-page-{i}", parent, i, {"role": "user", "content": f"PAGE_SENTINEL {i}"})


# ------------------------------------------------------------------ active vs all branches


def test_overview_maps_active_and_all_branches(tools: SessionRecovery) -> None:
    active = payload(tools.overview({}))
    every = payload(tools.overview({"scope": "all"}))
    assert active["scope"] == "active"
    assert active["session"] == {
        "id": "session-1",
        "name": None,
        "persisted": True,
        "hasParentSession": True,
    }
    assert [s["id"] for s in active["sections"]] == ["section:u1", "section:comp1", "section:u2"]
    # The malformed entry without an id is ignored in both scopes.
    assert active["counts"]["activeEntries"] == 9
    assert active["counts"]["allEntries"] == 10
    assert active["counts"]["selectedEntries"] == 9
    assert active["counts"]["compactions"] == 1
    assert active["counts"]["leaves"] == 2  # custom1 and u-abandoned
    assert active["counts"]["otherBranches"] == 1
    assert "section:u-abandoned" in [s["id"] for s in every["sections"]]
    assert "section:u-abandoned" not in [s["id"] for s in active["sections"]]
    assert every["counts"]["selectedEntries"] == 10


def test_section_summary_counts(tools: SessionRecovery) -> None:
    first = payload(tools.overview({}))["sections"][0]
    assert first == {
        "id": "section:u1",
        "label": "Fix ФАЙЛ alpha before compaction",
        "startEntryId": "u1",
        "endEntryId": "r1",
        "entryCount": 3,
        "roles": {"user": 1, "assistant": 1, "toolResult": 1},
        "toolCalls": 1,
        "toolResults": 1,
        "errors": 0,
        "readFileCount": 1,
        "modifiedFileCount": 0,
    }
    compaction = payload(tools.overview({}))["sections"][1]
    assert compaction["label"] == "Compaction: Earlier alpha work was compacted"
    assert compaction["readFileCount"] == compaction["modifiedFileCount"] == 1


def test_search_reads_the_active_branch_unless_scope_is_all(tools: SessionRecovery) -> None:
    assert payload(tools.search({"query": "Abandoned"}))["totalMatches"] == 0
    every = payload(tools.search({"query": "Abandoned", "scope": "all"}))
    assert [m["entryId"] for m in every["matches"]] == ["u-abandoned"]
    # Any scope other than "all" is the active branch.
    assert payload(tools.search({"query": "Abandoned", "scope": "ALL"}))["scope"] == "active"


def test_session_name_is_the_latest_session_info(tmp_path: Path) -> None:
    lines = [
        header(),
        {"type": "session_info", "id": "i1", "parentId": None, "timestamp": "t", "name": "Old"},
        {"type": "session_info", "id": "i2", "parentId": "i1", "timestamp": "t", "name": "New"},
    ]
    overview = payload(SessionRecovery(write_session(tmp_path / "n.jsonl", lines)).overview({}))
    assert overview["session"]["name"] == "New"
    assert overview["session"]["hasParentSession"] is False
    in_memory = SessionFile.parse("\n".join(json.dumps(line) for line in lines))
    assert payload(SessionRecovery(in_memory).overview({}))["session"]["persisted"] is False


# ------------------------------------------------------------------ pre-compaction search


def test_search_finds_entries_hidden_by_compaction(tools: SessionRecovery) -> None:
    found = payload(tools.search({"query": "alpha source"}))
    assert [m["entryId"] for m in found["matches"]] == ["r1"]
    assert found["matches"][0] == {
        "entryId": "r1",
        "sectionId": "section:u1",
        "type": "message",
        "role": "toolResult",
        "timestamp": "2026-01-01T00:00:02.000Z",
        "snippet": "alpha source call-read",
    }


def test_search_finds_pre_compaction_text_in_a_real_session(fixtures_dir: Path) -> None:
    # A real Pi session with two compactions: user messages before the latest compaction's
    # firstKeptEntryId are not in the model context any more, but search still finds them.
    session = SessionFile.load(fixtures_dir / "before-compaction.jsonl")
    branch = session.branch()
    compaction = [e for e in branch if e["type"] == "compaction"][-1]
    kept = next(i for i, e in enumerate(branch) if e["id"] == compaction["firstKeptEntryId"])
    context_json = json.dumps(session.build_context().messages, ensure_ascii=False)

    def first_text(entry: dict[str, Any]) -> str:
        message = entry.get("message") or {}
        if message.get("role") != "user" or not isinstance(message.get("content"), list):
            return ""
        return next((b["text"] for b in message["content"] if b.get("type") == "text"), "")

    hidden = [
        e
        for e in branch[:kept]
        if len(first_text(e)) > 40 and json.dumps(first_text(e)[:40])[1:-1] not in context_json
    ]
    assert len(hidden) > 5
    tools = SessionRecovery(session)
    for entry in (hidden[0], hidden[-1]):
        phrase = first_text(entry)[:40]
        found = payload(tools.search({"query": phrase, "case_sensitive": True}))
        assert entry["id"] in [m["entryId"] for m in found["matches"]]


# ------------------------------------------------------------------ Unicode, case, queries


def test_unicode_case_insensitive_search(tools: SessionRecovery) -> None:
    found = payload(tools.search({"query": "файл"}))
    assert found["totalMatches"] == 1
    assert found["caseSensitive"] is False
    match = found["matches"][0]
    assert (match["entryId"], match["sectionId"], match["role"]) == ("u1", "section:u1", "user")
    strict = payload(tools.search({"query": "файл", "case_sensitive": True}))
    assert strict["totalMatches"] == 0
    assert payload(tools.search({"query": "ФАЙЛ", "case_sensitive": True}))["totalMatches"] == 1


def test_search_covers_arguments_summaries_and_call_ids(tools: SessionRecovery) -> None:
    def ids(query: str) -> list[str]:
        return [m["entryId"] for m in payload(tools.search({"query": query}))["matches"]]

    assert ids("src/pending.ts") == ["a3"]  # compact JSON arguments
    assert ids("apply_patch") == ["a2"]  # tool name
    assert ids("compacted") == ["comp1"]  # compaction summary
    assert ids("call-patch") == ["r2"]  # a tool result by its call id
    assert ids('{"path":"src/read.ts"}') == ["a1"]
    assert ids("value") == []  # custom entry data is never searched


def test_query_validation(tools: SessionRecovery) -> None:
    empty = tools.search({"query": "   "})
    assert not empty.is_error
    assert empty.text == "Search query must not be empty."
    assert tools.search({"query": 5}).is_error
    assert tools.search({}).is_error
    long = payload(tools.search({"query": "  " + "q" * 700}))
    assert long["query"] == "q" * 500


def test_snippet_is_centred_and_bounded(tmp_path: Path) -> None:
    body = "a" * 1000 + " NEEDLE " + "b" * 1000
    s = chain_session(tmp_path, 1, lambda i, p: msg("x", p, 0, {"role": "user", "content": body}))
    snippet = payload(SessionRecovery(s).search({"query": "needle"}))["matches"][0]["snippet"]
    assert snippet.startswith("\u2026")
    assert snippet.endswith("\u2026")
    assert "NEEDLE" in snippet
    assert len(snippet) == 362
    assert abs(snippet.index("NEEDLE") - 180) <= 3


def test_dcp_control_entries_are_hidden_from_search(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [header(), user(0, None)]
    lines.append(
        {
            "type": "custom",
            "id": "dcp-control",
            "parentId": "u-page-0",
            "timestamp": "2026-01-01T00:09:30.000Z",
            "customType": "dcp-journal",
            "data": {"secret": "DCP_CONTROL_SECRET"},
        }
    )
    tools = SessionRecovery(write_session(tmp_path / "d.jsonl", lines))
    assert payload(tools.search({"query": "DCP_CONTROL_SECRET"}))["totalMatches"] == 0


# ---------------------------------------------------------------------------- pagination


def test_overview_and_search_paginate_with_cursors(tmp_path: Path) -> None:
    tools = SessionRecovery(chain_session(tmp_path, 55, user))
    one = payload(tools.overview({"max_sections": 20}))
    assert len(one["sections"]) == 20
    assert one["hasMore"] is True
    assert one["remainingSections"] == 35
    two = payload(tools.overview({"max_sections": 20, "cursor": one["nextCursor"]}))
    assert two["sections"][0]["id"] == "section:u-page-20"
    three = payload(tools.overview({"max_sections": 20, "cursor": two["nextCursor"]}))
    assert [s["id"] for s in three["sections"]][-1] == "section:u-page-54"
    assert len(three["sections"]) == 15
    assert three["hasMore"] is False
    assert "nextCursor" not in three

    seen: list[str] = []
    page = payload(tools.search({"query": "PAGE_SENTINEL", "limit": 20}))
    assert len(page["matches"]) == 20
    assert page["hasMore"] is True
    assert page["totalMatches"] == 55
    seen += [m["entryId"] for m in page["matches"]]
    page = payload(
        tools.search({"query": "PAGE_SENTINEL", "limit": 20, "cursor": page["nextCursor"]})
    )
    assert page["matches"][0]["entryId"] == "u-page-20"
    seen += [m["entryId"] for m in page["matches"]]
    page = payload(
        tools.search({"query": "PAGE_SENTINEL", "limit": 20, "cursor": page["nextCursor"]})
    )
    seen += [m["entryId"] for m in page["matches"]]
    assert "nextCursor" not in page
    assert seen == [f"u-page-{i}" for i in range(55)]


def test_numeric_parameters_are_clamped(tmp_path: Path) -> None:
    tools = SessionRecovery(chain_session(tmp_path, 120, user))

    def sections(value: Any) -> int:
        return len(payload(tools.overview({"max_sections": value}))["sections"])

    assert sections(0) == 1
    assert sections(2.9) == 2
    assert sections("5") == sections(True) == sections(float("nan")) == 20
    assert len(payload(tools.search({"query": "PAGE", "limit": 500}))["matches"]) == 50
    assert len(payload(tools.search({"query": "PAGE", "limit": -3}))["matches"]) == 1
    limits = (20, 1, 100)
    assert clamp_int(10**9, limits) == 100
    assert clamp_int(-5.5, limits) == 1
    assert clamp_int(float("inf"), limits) == clamp_int(None, limits) == 20


# --------------------------------------------------------------- reading sections/entries


def test_read_a_bounded_section_and_continue(tools: SessionRecovery) -> None:
    first = tools.read_section(
        {"section_id": "section:u1", "max_entries": 2, "max_body_chars": 100}
    )
    assert "Fix ФАЙЛ alpha" in first.text
    assert first.text.startswith("Section section:u1: Fix ФАЙЛ alpha before compaction\n\n[u1] ")
    details = first.details
    assert (details["sectionId"], details["entryCount"], details["renderedCount"]) == (
        "section:u1",
        3,
        2,
    )
    assert details["hasMore"] is True
    assert details["truncated"] is True
    assert details["sourceAvailable"] is True
    assert isinstance(details["nextCursor"], str)
    assert "alpha source" not in first.text
    rest = tools.read_section({"cursor": details["nextCursor"], "max_entries": 2})
    assert rest.text.startswith("Section section:u1: ")
    assert "[r1] 2026-01-01T00:00:02.000Z message toolResult" in rest.text
    assert "tool_result read#call-read\nalpha source" in rest.text
    assert rest.details["hasMore"] is False
    assert "nextCursor" not in rest.details


def test_entry_rendering_by_kind(tools: SessionRecovery) -> None:
    comp = tools.read_section({"entry_id": "comp1"}).text
    assert comp == (
        "[comp1] 2026-01-01T00:00:03.000Z compaction\nEarlier alpha work was compacted\n"
        "firstKeptEntryId: u2\ntokensBefore: 42000"
    )
    a1 = tools.read_section({"entry_id": "a1"}).text
    assert a1 == (
        "[a1] 2026-01-01T00:00:01.000Z message assistant\nInspecting alpha\n"
        'tool_call read#call-read {"path":"src/read.ts"}'
    )
    r2 = tools.read_section({"entry_id": "r2"}).text
    assert r2.splitlines()[1] == "tool_result apply_patch#call-patch error"
    custom = tools.read_section({"entry_id": "custom1"}).text
    assert custom == (
        '[custom1] 2026-01-01T00:00:08.000Z custom\n{"customType":"safe","data":{"value":1}}'
    )


def test_unknown_section_and_entry_are_normal_results(tools: SessionRecovery) -> None:
    missing = tools.read_section({"section_id": "section:nope"})
    assert not missing.is_error
    assert missing.text == (
        "Section section:nope was not found in scope active. Run session_overview with the "
        "same scope to refresh section IDs."
    )
    assert missing.details == {
        "scope": "active",
        "sectionId": "section:nope",
        "found": False,
        "sourceAvailable": False,
    }
    entry = tools.read_section({"entry_id": "u-abandoned"})
    assert not entry.is_error
    assert entry.details["found"] is False
    found = tools.read_section({"entry_id": "u-abandoned", "scope": "all"})
    assert "Abandoned branch phrase" in found.text


def test_exactly_one_of_section_id_or_entry_id(tools: SessionRecovery) -> None:
    for args in ({}, {"section_id": "section:u1", "entry_id": "u1"}):
        result = tools.read_section(args)
        assert result.is_error
        assert "exactly one of section_id or entry_id" in result.text
    assert tools.read_section({"section_id": 7}).is_error
    assert tools.read_section({"entry_id": "x" * 201}).is_error


def late_entry(i: int, parent: Optional[str]) -> dict[str, Any]:
    if i == 0:
        return msg("u-long", None, 0, {"role": "user", "content": "one long section"})
    content = f"LATE_SENTINEL:{'z' * 12000}" if i == 119 else f"result-{i}"
    result = {"role": "toolResult", "toolCallId": f"call-{i}", "toolName": "read"}
    return msg(f"r-{i}", parent, i % 60, {**result, "content": [text(content)], "isError": False})


def test_direct_late_entry_read_continues_a_long_body(tmp_path: Path) -> None:
    tools = SessionRecovery(chain_session(tmp_path, 120, late_entry))
    direct = tools.read_section({"entry_id": "r-119", "max_body_chars": 500})
    assert "LATE_SENTINEL" in direct.text
    assert "result-1" not in direct.text
    assert direct.details["entryId"] == "r-119"
    assert direct.details["sectionId"] == "section:u-long"
    assert direct.details["sourceAvailable"] is True
    assert direct.details["hasMore"] is True
    assert len(direct.text) < 1000

    pages = [direct]
    while "nextCursor" in pages[-1].details:
        pages.append(
            tools.read_section({"cursor": pages[-1].details["nextCursor"], "max_body_chars": 500})
        )
        assert len(pages) < 40
    assert pages[-1].details["hasMore"] is False
    body = ""
    for page in pages:
        lines = page.text.split("\n")
        assert lines[0].startswith("[r-119] ")
        if lines[-1].startswith("\u2026[more available"):
            lines.pop()
        body += "\n".join(lines[1:])
    assert body == "tool_result read#call-119\nLATE_SENTINEL:" + "z" * 12000


def xs(page: str) -> int:
    """x characters in the entry body (the section title repeats a preview of them)."""
    return sum(len(run) for run in re.findall("xx+", page.split("[long-user]", 1)[1]))


def test_long_body_in_a_section_is_bounded_and_continues(tmp_path: Path) -> None:
    s = chain_session(
        tmp_path, 1, lambda i, p: msg("long-user", p, 0, {"role": "user", "content": "x" * 10000})
    )
    tools = SessionRecovery(s)
    first = tools.read_section({"section_id": "section:long-user", "max_body_chars": 100})
    assert "more available" in first.text
    assert first.details["hasMore"] is True
    assert first.details["truncated"] is True
    assert first.details["sourceAvailable"] is True
    assert isinstance(first.details["nextCursor"], str)
    assert len(first.text) < 1000
    total = xs(first.text)
    cursor = first.details["nextCursor"]
    calls = 1
    while cursor:
        page = tools.read_section({"cursor": cursor, "max_body_chars": 8000})
        assert "[long-user]" in page.text
        total += xs(page.text)
        cursor = page.details.get("nextCursor")
        calls += 1
    assert (total, calls) == (10000, 3)  # 100, then 8000, then the last 1900


def test_cursor_pages_never_split_astral_characters(tmp_path: Path) -> None:
    body = "\U0001f600a" * 400  # 1200 UTF-16 units; 101-unit pages end inside pairs
    s = chain_session(
        tmp_path, 1, lambda i, p: msg("emoji", p, 0, {"role": "user", "content": body})
    )
    tools = SessionRecovery(s)
    page = tools.read_section({"entry_id": "emoji", "max_body_chars": 101})
    pieces = []
    while True:
        lines = page.text.split("\n")
        if lines[-1].startswith("\u2026[more available"):
            lines.pop()
        pieces.append("\n".join(lines[1:]))
        if "nextCursor" not in page.details:
            break
        page = tools.read_section({"cursor": page.details["nextCursor"], "max_body_chars": 101})
    assert "".join(pieces) == body
    assert len(pieces) == 12  # 1200 units, at most 101 per page and never half a pair


def test_total_output_is_bounded(tmp_path: Path) -> None:
    def big(i: int, parent: Optional[str]) -> dict[str, Any]:
        role = "user" if i == 0 else "assistant"
        return msg(f"e{i}", parent, i, {"role": role, "content": [text(f"{i}:" + "w" * 9000)]})

    tools = SessionRecovery(chain_session(tmp_path, 50, big))
    cursor: Optional[str] = None
    rendered = 0
    for _ in range(50):
        args: dict[str, Any] = {"max_entries": 50, "max_body_chars": 8000}
        args.update({"cursor": cursor} if cursor else {"section_id": "section:e0"})
        page = tools.read_section(args)
        assert len(page.text) <= 30000
        rendered += len(re.findall("w{7990,8000}", page.text))
        cursor = page.details.get("nextCursor")
        if cursor is None:
            break
    assert rendered == 50  # every entry's first 8000 chars, none skipped

    long_labels = chain_session(
        tmp_path,
        100,
        lambda i, p: msg(f"u{i}", p, i, {"role": "user", "content": f"{i} " + "label " * 40}),
        "labels.jsonl",
    )
    overview = SessionRecovery(long_labels).overview({"max_sections": 100})
    assert len(overview.text) <= 30000
    data = json.loads(overview.text)  # still complete JSON: the page shrank instead
    assert 0 < len(data["sections"]) < 100
    assert data["hasMore"] is True


# ------------------------------------------------------------------- empty / malformed


def test_empty_and_missing_sessions(tmp_path: Path) -> None:
    expected = (
        "No raw session entries are available for scope {}. The session may be new, "
        "ephemeral, or unavailable in this context."
    )
    none = SessionRecovery(None)
    result = none.overview({})
    assert result.text == expected.format("active")
    assert result.details == {"scope": "active", "entryCount": 0}
    assert none.search({"query": "x", "scope": "all"}).text == expected.format("all")
    header_only = SessionRecovery(write_session(tmp_path / "e.jsonl", [header()]))
    for outcome in (
        header_only.overview({}),
        header_only.read_section({"section_id": "section:x"}),
        header_only.search({"query": "x"}),
        header_only.recovery_context({}),
    ):
        assert outcome.text == expected.format("active")
        assert not outcome.is_error


def test_partially_shaped_entries_are_rendered_conservatively(tmp_path: Path) -> None:
    lines = [
        header(),
        msg("u", None, 0, {"role": "user", "content": [{"type": "image", "data": "..."}]}),
        {"type": "message", "id": "m-no-object", "parentId": "u", "message": "oops"},
        msg(
            "m-bad-blocks",
            "m-no-object",
            2,
            {"role": "assistant", "content": [7, {"type": "toolCall"}]},
        ),
        {"type": "weird_type", "id": "w", "parentId": "m-bad-blocks", "payload": {"k": [1, 2]}},
        {"type": "", "id": "no-type", "parentId": "w"},
        {"id": "no-type-at-all", "parentId": "w"},
        msg("r", "w", 5, {"role": "toolResult"}),
    ]
    tools = SessionRecovery(write_session(tmp_path / "p.jsonl", lines), leaf="r")
    overview = payload(tools.overview({}))
    assert overview["counts"]["selectedEntries"] == 5  # the two type-less entries are ignored
    assert overview["sections"][0]["label"] == "User message"
    read = tools.read_section({"section_id": "section:u"})
    assert not read.is_error
    assert '[m-no-object] message\n{"message":"oops"}' in read.text
    assert "[m-bad-blocks] 2026-01-01T00:00:02.000Z message assistant" in read.text
    assert '[w] weird_type\n{"payload":{"k":[1,2]}}' in read.text
    assert "tool_result unknown#unknown" in read.text
    context = payload(tools.recovery_context({}))
    assert context["originalUserRequest"] is None
    assert context["pendingToolCalls"] == []


# ------------------------------------------------------------------- recovery context


def test_recovery_context_signals(tools: SessionRecovery) -> None:
    got = payload(tools.recovery_context({}, "current-call"))
    assert got["originalUserRequest"] == {
        "entryId": "u1",
        "sectionId": "section:u1",
        "text": "Fix ФАЙЛ alpha before compaction",
    }
    assert got["latestUserInstruction"] == {
        "entryId": "u2",
        "sectionId": "section:u2",
        "text": "Latest instruction: finish recovery",
    }
    assert got["readFiles"] == ["src/read.ts", "carried-read.ts", "src/pending.ts"]
    assert got["modifiedFiles"] == ["carried-write.ts", "src/changed.ts"]
    assert got["recentErrors"] == [
        {
            "entryId": "r2",
            "sectionId": "section:u2",
            "toolCallId": "call-patch",
            "toolName": "apply_patch",
            "message": "Patch failed",
        }
    ]
    assert got["pendingToolCalls"] == [
        {"id": "pending-other", "name": "read", "entryId": "a3", "sectionId": "section:u2"}
    ]
    assert got["lastMeaningfulAction"] == {
        "entryId": "a3",
        "type": "message",
        "role": "assistant",
        "toolCalls": [{"id": "pending-other", "name": "read"}],
    }
    assert got["compactionCount"] == 1
    assert (got["entryCount"], got["sectionCount"]) == (9, 3)
    assert tools.recovery_context({}, "current-call").details == {
        "scope": "active",
        "entryCount": 9,
        "sectionCount": 3,
        "recentErrorCount": 1,
        "pendingToolCallCount": 1,
    }


def test_current_call_is_excluded_only_when_named(tools: SessionRecovery) -> None:
    pending = payload(tools.recovery_context({}))["pendingToolCalls"]
    assert [p["id"] for p in pending] == ["pending-other", "current-call"]


def errors_session(i: int, parent: Optional[str]) -> dict[str, Any]:
    if i == 0:
        return msg("u", None, 0, {"role": "user", "content": "go"})
    if i % 2:
        return msg(
            f"a{i}", parent, i, {"role": "assistant", "content": [call(f"c{i}", "bash", {})]}
        )
    result = {"role": "toolResult", "toolCallId": f"c{i - 1}", "toolName": "bash"}
    return msg(f"r{i}", parent, i, {**result, "content": [text(f"boom {i}")], "isError": True})


def test_recent_errors_are_the_latest_ones(tmp_path: Path) -> None:
    tools = SessionRecovery(chain_session(tmp_path, 61, errors_session))
    got = payload(tools.recovery_context({}))
    assert [e["message"] for e in got["recentErrors"]] == [
        f"boom {i}" for i in (52, 54, 56, 58, 60)
    ]
    three = payload(tools.recovery_context({"recent_error_limit": 3}))["recentErrors"]
    assert [e["entryId"] for e in three] == ["r56", "r58", "r60"]
    capped = payload(tools.recovery_context({"recent_error_limit": 99}))["recentErrors"]
    assert len(capped) == 20
    assert got["pendingToolCalls"] == []


def test_unknown_tools_are_not_guessed_to_modify_files(tmp_path: Path) -> None:
    args = {"path": "a.txt", "paths": ["b.txt", " b.txt ", ""], "file_path": "c.txt"}
    content = [
        call("1", "mystery_tool", {"path": "m.txt"}),
        call("2", "bash", {"path": "sh.txt"}),
        call("3", "Edit", args),
        call(
            "4", "apply_patch", {"patch": "--- a/x\n+++ b/y.py\n+++ /dev/null\r\n*** Move to: z.py"}
        ),
        call("5", "grep", {"paths": "g.txt"}),
    ]
    s = chain_session(
        tmp_path, 1, lambda i, p: msg("a", p, 0, {"role": "assistant", "content": content})
    )
    got = payload(SessionRecovery(s).recovery_context({}))
    assert got["readFiles"] == ["g.txt"]
    assert got["modifiedFiles"] == ["a.txt", "c.txt", "b.txt", "y.py", "z.py"]


def test_web_recoverable_compact_details_are_recoverable(tmp_path: Path) -> None:
    details = {
        "results": [
            {"title": "Recovered", "url": "https://example.com", "content": "RAW_SENTINEL"}
        ],
        "contextGateway": {"version": 1, "representation": "web-recoverable-compact"},
    }
    result = {"role": "toolResult", "toolCallId": "web-large", "toolName": "web_search"}

    def make(i: int, parent: Optional[str]) -> dict[str, Any]:
        if i == 0:
            return msg("u-web", None, 0, {"role": "user", "content": "research"})
        compact = [text("[Context Gateway compact]")]
        return msg(
            "r-web", parent, 1, {**result, "content": compact, "details": details, "isError": False}
        )

    tools = SessionRecovery(chain_session(tmp_path, 2, make))
    found = payload(tools.search({"query": "web-large"}))["matches"][0]
    assert (found["entryId"], found["role"]) == ("r-web", "toolResult")
    read = tools.read_section({"entry_id": "r-web", "max_body_chars": 10000})
    assert "recoverable_raw_details:" in read.text
    assert "RAW_SENTINEL" in read.text


# ------------------------------------------------------------------- stable section ids


def test_section_ids_stay_stable_as_the_session_grows(tmp_path: Path) -> None:
    path = tmp_path / "grow.jsonl"
    session = write_session(path, fixture_lines()[:10])  # up to custom1
    tools = SessionRecovery(session)
    before = [s["id"] for s in payload(tools.overview({}))["sections"]]
    cursor = tools.read_section({"section_id": "section:u1", "max_entries": 1}).details[
        "nextCursor"
    ]
    session.append_message({"role": "user", "content": "a new request"})
    session.append_message({"role": "assistant", "content": [text("ok")]})
    after = [s["id"] for s in payload(tools.overview({}))["sections"]]
    assert after[:3] == before
    assert len(after) == 4
    # A cursor issued before the appends still continues at the same place.
    resumed = tools.read_section({"cursor": cursor})
    assert "[a1] " in resumed.text
    assert "[r1] " in resumed.text


# ------------------------------------------------------------------------------ cursors


def forge(fields: dict[str, Any]) -> str:
    return "rc1." + base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")


def test_hostile_cursors_are_rejected(tools: SessionRecovery) -> None:
    good = payload(tools.search({"query": "a", "limit": 1}))["nextCursor"]
    decoded = json.loads(base64.urlsafe_b64decode(good[4:] + "=" * (-len(good[4:]) % 4)))
    edited = dict(decoded, a="u2")  # check digits no longer match
    for bad in (
        "garbage",
        "rc1.!!!!",
        "rc1." + base64.urlsafe_b64encode(b"not json").decode(),
        forge({"v": 1}),
        forge(edited),
        forge(dict(decoded, o="0")),
        "rc1." + "A" * 5000,
        12345,
        good[:-2],
    ):
        result = tools.search({"query": "a", "cursor": bad})
        assert result.is_error, bad
        assert result.text.startswith("Invalid cursor: "), result.text


def test_cursor_bound_to_tool_scope_query_case_and_session(
    tools: SessionRecovery, tmp_path: Path
) -> None:
    search = payload(tools.search({"query": "a", "limit": 1}))["nextCursor"]
    overview = tools.overview({"max_sections": 1}).details["nextCursor"]

    def refused(result: ToolResult, fragment: str) -> None:
        assert result.is_error
        assert fragment in result.text, result.text

    refused(tools.overview({"cursor": search}), "continues session_search, not session_overview")
    refused(tools.search({"query": "a", "cursor": overview}), "continues session_overview")
    refused(tools.read_section({"cursor": search}), "continues session_search")
    refused(tools.search({"query": "a", "cursor": search, "scope": "all"}), "scope active")
    refused(tools.search({"query": "b", "cursor": search}), "different query or case")
    refused(tools.search({"query": "a", "case_sensitive": True, "cursor": search}), "case")
    other = SessionRecovery(write_session(tmp_path / "o.jsonl", [header("other"), user(0, None)]))
    refused(other.search({"query": "a", "cursor": search}), "another session")
    # The same query with the original settings is accepted.
    assert not tools.search({"query": "a", "cursor": search}).is_error


def test_stale_cursors_are_rejected(tmp_path: Path) -> None:
    lines = fixture_lines()
    tools = SessionRecovery(write_session(tmp_path / "s.jsonl", lines), leaf="custom1")
    cursor = tools.overview({"max_sections": 2}).details["nextCursor"]  # after section:comp1
    search = payload(tools.search({"query": "alpha", "limit": 2}))["nextCursor"]  # after a1
    read = tools.read_section({"section_id": "section:u2", "max_entries": 1}).details["nextCursor"]
    # The same session id, but the active branch now ends at the abandoned entry.
    tools.view.leaf = "u-abandoned"
    for result in (
        tools.overview({"cursor": cursor}),
        tools.read_section({"cursor": read}),
        tools.search({"query": "alpha", "cursor": search}),
    ):
        assert result.is_error
        assert result.text.startswith("Stale cursor: "), result.text


def test_read_cursor_target_checks_and_forged_offsets(tools: SessionRecovery) -> None:
    cursor = tools.read_section({"section_id": "section:u1", "max_entries": 1}).details[
        "nextCursor"
    ]
    mismatch = tools.read_section({"cursor": cursor, "section_id": "section:u2"})
    assert mismatch.is_error
    assert "continues section section:u1" in mismatch.text
    assert not tools.read_section({"cursor": cursor, "section_id": "section:u1"}).is_error
    # A well-formed cursor whose offset lies past the entry's body.
    forged = Cursor("read", "active", "session-1", "", "u1", "", 10**6).encode()
    past = tools.read_section({"cursor": forged})
    assert past.is_error
    assert past.text.startswith("Stale cursor: entry u1 changed")


# ---------------------------------------------------------------------------------- CLI


def test_cli_recover_commands(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_session(path, fixture_lines())
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        result = runner.invoke(app, ["recover", str(path), *args])
        return result

    overview = invoke("overview", "--scope", "all", "--limit", "2")
    assert overview.exit_code == 0, overview.output
    data = json.loads(overview.stdout)
    assert [s["id"] for s in data["sections"]] == ["section:u1", "section:comp1"]
    nxt = invoke("overview", "--scope", "all", "--limit", "2", "--cursor", data["nextCursor"])
    assert json.loads(nxt.stdout)["sections"][0]["id"] == "section:u2"

    search = invoke("search", "файл", "--leaf", "custom1", "--json")
    assert search.exit_code == 0
    assert json.loads(search.stdout)["details"]["matchCount"] == 1
    assert json.loads(invoke("search", "файл", "--case-sensitive").stdout)["totalMatches"] == 0

    read = invoke("read", "comp1", "--leaf", "custom1")
    assert read.stdout.startswith("[comp1] 2026-01-01T00:00:03.000Z compaction\n")
    section = invoke("read", "section:u1", "--leaf", "custom1", "--limit", "1")
    assert section.stdout.startswith("Section section:u1: ")
    token = section.stderr.split("--cursor ", 1)[1].strip()
    rest = invoke("read", "--cursor", token, "--leaf", "custom1")
    assert rest.exit_code == 0
    assert "[a1] " in rest.stdout
    assert "[r1] " in rest.stdout

    context = invoke("context", "--leaf", "custom1", "--exclude-call", "current-call")
    assert [p["id"] for p in json.loads(context.stdout)["pendingToolCalls"]] == ["pending-other"]

    bad = invoke("search", "a", "--cursor", "rc1.garbage")
    assert bad.exit_code == 2
    assert "Invalid cursor" in bad.stderr
    assert invoke("overview", "--leaf", "missing").exit_code == 2
    missing = runner.invoke(app, ["recover", str(tmp_path / "nope.jsonl"), "overview"])
    assert missing.exit_code == 2
