"""Session files: load rules, migrations, warnings, context building, durable appends.

Expected values follow spec 01 (load rules, migrations, key orders, buildSessionContext) and
spec 11 section 5 (Date semantics); epoch/ISO pairs were checked against Node 20.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_condense.errors import SessionError
from pi_condense.js import json as jsjson
from pi_condense.js import time as jstime
from pi_condense.session import ABSENT, SessionFile, build_session_context

T0 = 1735689600000  # 2025-01-01T00:00:00.000Z
HEADER_V3 = (
    '{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}'
)
HEADER_V1 = '{"type":"session","id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}'


def counter_ids(start: int = 1) -> Callable[[], str]:
    counter = itertools.count(start)
    return lambda: f"{next(counter):08x}"


def fixed_clock(ms: int = 1760000001000) -> Callable[[], int]:
    return lambda: ms


def ticking_clock(start: int = T0, step: int = 1000) -> Callable[[], int]:
    counter = itertools.count()
    return lambda: start + step * next(counter)


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    return path


def msg_line(entry_id: str, parent: str | None, text: str, role: str = "user", ts: int = 1) -> str:
    parent_json = "null" if parent is None else f'"{parent}"'
    message = f'{{"role":"{role}","content":"{text}","timestamp":{ts}}}'
    return (
        f'{{"type":"message","id":"{entry_id}","parentId":{parent_json},'
        f'"timestamp":"2025-01-01T00:00:0{ts}.000Z","message":{message}}}'
    )


def kinds(session: SessionFile) -> list[tuple[int, str]]:
    return [(w.line, w.kind) for w in session.warnings]


# --------------------------------------------------------------------------------------------
# Loading: Pi's rules, with warnings


def test_load_v3_basic(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.jsonl",
        "\n".join([HEADER_V3, msg_line("a1", None, "hi"), msg_line("a2", "a1", "yo", "user", 2)])
        + "\n",
    )
    session = SessionFile.load(path)
    assert session.session_id == "s1"
    assert session.version == 3
    assert session.header["cwd"] == "/p"
    assert session.path == path.resolve()
    assert session.session_dir == str(path.resolve().parent)
    assert [e["id"] for e in session.entries] == ["a1", "a2"]
    assert session.leaf_id == "a2"
    assert session.file_leaf_id == "a2"
    assert session.get_entry("a1") is session.entries[0]
    assert session.get_entry("zz") is None
    assert session.warnings == []


def test_malformed_lines_are_skipped_with_warnings(tmp_path: Path) -> None:
    lines = [
        HEADER_V3,  # 1
        msg_line("a1", None, "one"),  # 2
        '{"type":"message", broken',  # 3
        "",  # 4 blank
        "   \t",  # 5 blank
        "[1,2]",  # 6 not an object
        "42",  # 7 not an object
        msg_line("a2", "a1", "two", ts=2) + "\r",  # 8 CRLF line parses
        "\u00a0\u2028",  # 9 JS whitespace only: blank for trim()
        "\x1c",  # 10 Python whitespace, not JS whitespace: JSON.parse fails
        '{"type":"session","id":"other","timestamp":"x","cwd":"/"}',  # 11 extra header
        msg_line("a3", "a2", "three", ts=3),  # 12
    ]
    session = SessionFile.load(write(tmp_path / "s.jsonl", "\n".join(lines) + "\n"))
    assert [e["id"] for e in session.entries] == ["a1", "a2", "a3"]
    assert kinds(session) == [
        (3, "invalid-json"),
        (6, "not-object"),
        (7, "not-object"),
        (10, "invalid-json"),
        (11, "extra-header"),
    ]
    assert all(str(w).startswith(f"line {w.line}: ") for w in session.warnings)
    assert session.leaf_id == "a3"


def test_line_numbers_count_leading_blank_lines_and_bom(tmp_path: Path) -> None:
    text = "\ufeff\n \n" + HEADER_V3 + "\n" + msg_line("a1", None, "x") + "\nnot json\n\n"
    session = SessionFile.load(write(tmp_path / "s.jsonl", text))
    assert [e["id"] for e in session.entries] == ["a1"]
    assert kinds(session) == [(5, "invalid-json")]


def test_truncated_last_line_is_reported_not_fatal(tmp_path: Path) -> None:
    text = HEADER_V3 + "\n" + msg_line("a1", None, "x") + '\n{"type":"message","id":"a2","par'
    session = SessionFile.load(write(tmp_path / "s.jsonl", text))
    assert [e["id"] for e in session.entries] == ["a1"]
    assert kinds(session) == [(3, "truncated")]
    assert "truncated" in session.warnings[0].reason


def test_complete_last_line_without_newline_loads(tmp_path: Path) -> None:
    text = HEADER_V3 + "\n" + msg_line("a1", None, "x")
    session = SessionFile.load(write(tmp_path / "s.jsonl", text))
    assert [e["id"] for e in session.entries] == ["a1"]
    assert session.warnings == []


def test_invalid_utf8_is_replaced_and_reported(tmp_path: Path) -> None:
    data = (HEADER_V3 + "\n").encode() + msg_line("a1", None, "AB").encode().replace(
        b"AB", b"A\xffB"
    )
    (tmp_path / "s.jsonl").write_bytes(data + b"\n")
    session = SessionFile.load(tmp_path / "s.jsonl")
    assert session.entries[0]["message"]["content"] == "A\ufffdB"
    assert kinds(session) == [(2, "invalid-utf8")]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "no valid JSON line"),
        (" \n\n\t\n", "no valid JSON line"),
        ("garbage\n" + msg_line("a1", None, "x") + "\n", "line 2: the first entry is not"),
        (msg_line("a1", None, "x") + "\n" + HEADER_V3 + "\n", "line 1: the first entry is not"),
        ('{"type":"session","timestamp":"x"}\n', "line 1: the first entry is not"),
        ('{"type":"session","id":7}\n', "line 1: the first entry is not"),
        ("[1]\n" + HEADER_V3 + "\n", "line 1: the first entry is not"),
        (HEADER_V3[:20], "truncated"),
    ],
)
def test_invalid_file_raises_session_error(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path / "bad.jsonl", text)
    with pytest.raises(SessionError) as info:
        SessionFile.load(path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)


def test_missing_file_raises_session_error(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match=r"missing\.jsonl"):
        SessionFile.load(tmp_path / "missing.jsonl")


def test_first_parsed_line_is_the_header(tmp_path: Path) -> None:
    # Pi validates the first line that parsed: a broken line before the header is skipped.
    text = "oops\n" + HEADER_V3 + "\n" + msg_line("a1", None, "x") + "\n"
    session = SessionFile.load(write(tmp_path / "s.jsonl", text))
    assert session.session_id == "s1"
    assert kinds(session) == [(1, "invalid-json")]


def test_header_only_session(tmp_path: Path) -> None:
    session = SessionFile.load(write(tmp_path / "s.jsonl", HEADER_V3 + "\n"))
    assert session.entries == []
    assert session.leaf_id is None
    assert session.branch() == []
    context = session.build_context()
    assert (context.messages, context.thinking_level, context.model) == ([], "off", None)


# --------------------------------------------------------------------------------------------
# Migrations


V1_LINES = [
    HEADER_V1,
    '{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"u1","timestamp":1}}',
    '{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":2}}',
    '{"type":"message","timestamp":"2025-01-01T00:00:03.000Z","message":{"role":"user","content":"u2","timestamp":3}}',
    '{"type":"message","timestamp":"2025-01-01T00:00:04.000Z","message":{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":4}}',
    '{"type":"compaction","timestamp":"2025-01-01T00:00:05.000Z","summary":"S","firstKeptEntryIndex":3,"tokensBefore":100}',
    '{"type":"message","timestamp":"2025-01-01T00:00:06.000Z","message":{"role":"user","content":"u3","timestamp":6}}',
]


def test_v1_migration_ids_parents_and_first_kept_index(tmp_path: Path) -> None:
    path = write(tmp_path / "v1.jsonl", "\n".join(V1_LINES) + "\n")
    session = SessionFile.load(path, id_source=counter_ids())
    ids = [f"{n:08x}" for n in range(1, 7)]
    assert [e["id"] for e in session.entries] == ids
    assert [e["parentId"] for e in session.entries] == [None, *ids[:-1]]
    assert session.version == 1
    assert session.header["version"] == 3
    compaction = session.entries[4]
    # File index 3 (header = 0) is the third entry; the index key is deleted, new keys appended.
    assert compaction["firstKeptEntryId"] == ids[2]
    assert list(compaction) == [
        "type",
        "timestamp",
        "summary",
        "tokensBefore",
        "id",
        "parentId",
        "firstKeptEntryId",
    ]
    context = session.build_context()
    assert jsjson.dumps(context.messages) == (
        '[{"role":"compactionSummary","summary":"S","tokensBefore":100,"timestamp":1735689605000},'
        '{"role":"user","content":"u2","timestamp":3},'
        '{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":4},'
        '{"role":"user","content":"u3","timestamp":6}]'
    )
    assert context.model == {"provider": "p", "modelId": "m"}


@pytest.mark.parametrize("index", ["0", "99", "1.5", "-1", '"3"', "true"])
def test_v1_first_kept_index_without_target(tmp_path: Path, index: str) -> None:
    lines = list(V1_LINES)
    lines[5] = lines[5].replace('"firstKeptEntryIndex":3', f'"firstKeptEntryIndex":{index}')
    session = SessionFile.load(write(tmp_path / "v1.jsonl", "\n".join(lines) + "\n"))
    compaction = session.entries[4]
    assert "firstKeptEntryId" not in compaction
    numeric = index not in ('"3"', "true")
    assert ("firstKeptEntryIndex" in compaction) is not numeric
    # No kept entries: the summary, then what follows the compaction.
    assert [m["role"] for m in session.build_context().messages] == ["compactionSummary", "user"]


def test_v1_fixture_first_kept_entry_index(fixtures_dir: Path) -> None:
    path = fixtures_dir / "before-compaction.jsonl"
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    session = SessionFile.load(path)
    entries = session.entries
    assert len(entries) == len(raw) - 1
    assert [e["parentId"] for e in entries] == [None] + [e["id"] for e in entries[:-1]]
    assert all(len(e["id"]) == 8 and int(e["id"], 16) >= 0 for e in entries)
    compactions = [(i, r) for i, r in enumerate(raw) if r["type"] == "compaction"]
    assert len(compactions) == 2
    for file_index, record in compactions:
        entry = entries[file_index - 1]
        target = record["firstKeptEntryIndex"]
        assert entry["firstKeptEntryId"] == entries[target - 1]["id"]
        assert "firstKeptEntryIndex" not in entry


def test_v1_ids_come_from_the_id_source(fixtures_dir: Path) -> None:
    session = SessionFile.load(fixtures_dir / "large-session.jsonl", id_source=counter_ids())
    assert [e["id"] for e in session.entries[:3]] == ["00000001", "00000002", "00000003"]
    assert session.leaf_id == f"{len(session.entries):08x}"


def test_v2_hook_message_becomes_custom(tmp_path: Path) -> None:
    header = HEADER_V3.replace('"version":3', '"version":2')
    hook = (
        '{"type":"message","id":"a2","parentId":"a1","timestamp":"2025-01-01T00:00:02.000Z",'
        '"message":{"role":"hookMessage","customType":"h","content":"c","display":true,"timestamp":2}}'
    )
    session = SessionFile.load(
        write(tmp_path / "v2.jsonl", "\n".join([header, msg_line("a1", None, "x"), hook]) + "\n")
    )
    assert session.version == 2
    assert session.header["version"] == 3
    assert [e["id"] for e in session.entries] == ["a1", "a2"]  # v2 ids are kept
    assert session.entries[1]["message"]["role"] == "custom"
    assert jsjson.dumps(session.build_context().messages[1]) == (
        '{"role":"custom","customType":"h","content":"c","display":true,"timestamp":2}'
    )


@pytest.mark.parametrize("name", ["before-compaction.jsonl", "large-session.jsonl"])
def test_load_never_rewrites_the_file(fixtures_dir: Path, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    shutil.copyfile(fixtures_dir / name, path)
    before = (path.read_bytes(), os.stat(path).st_mtime_ns, os.stat(path).st_size)
    session = SessionFile.load(path)
    session.build_context()
    session.branch()
    session.refresh()
    assert (path.read_bytes(), os.stat(path).st_mtime_ns, os.stat(path).st_size) == before


# --------------------------------------------------------------------------------------------
# Lone surrogates


SURROGATE_LINES = [
    '{"type":"message","id":"00000001","parentId":null,"timestamp":"2025-10-09T08:53:25.712Z",'
    '"message":{"role":"user","content":[{"type":"text","text":"cut \\ud83d"}],'
    '"timestamp":1760000001000}}',
    '{"type":"custom","customType":"x","data":{"s":"\\ude00 then \U0001f600 then \\udfff"},'
    '"id":"00000002","parentId":"00000001","timestamp":"2025-10-09T08:53:26.000Z"}',
]


def test_lone_surrogate_lines_load_and_serialize_back(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", "\n".join([HEADER_V3, *SURROGATE_LINES]) + "\n")
    session = SessionFile.load(path)
    assert session.warnings == []
    assert session.entries[0]["message"]["content"][0]["text"] == "cut \ud83d"
    assert session.entries[1]["data"]["s"] == "\ude00 then \U0001f600 then \udfff"
    assert [jsjson.dumps(e) for e in session.entries] == SURROGATE_LINES


def test_append_lone_surrogate_round_trips(tmp_path: Path) -> None:
    session = SessionFile.create(
        tmp_path / "s.jsonl", "/p", clock=fixed_clock(), id_source=counter_ids()
    )
    session.append_custom("x", {"s": "a\ud83d"})
    line = (tmp_path / "s.jsonl").read_text(encoding="utf-8").splitlines()[1]
    assert '"s":"a\\ud83d"' in line
    assert SessionFile.load(tmp_path / "s.jsonl").entries[0]["data"] == {"s": "a\ud83d"}


# --------------------------------------------------------------------------------------------
# Context building


def test_custom_message_and_branch_summary_in_context() -> None:
    lines = [
        HEADER_V3,
        msg_line("a1", None, "x"),
        '{"type":"custom_message","customType":"n","content":"c","display":false,'
        '"id":"a2","parentId":"a1","timestamp":"2025-01-01T00:00:07.500Z"}',
        '{"type":"custom_message","customType":"n","content":[{"type":"text","text":"t"}],'
        '"display":true,"details":{"k":1},"id":"a3","parentId":"a2","timestamp":"bogus"}',
        '{"type":"custom","customType":"state","data":{},"id":"a4","parentId":"a3",'
        '"timestamp":"2025-01-01T00:00:08.000Z"}',
        '{"type":"branch_summary","id":"a5","parentId":"a4","timestamp":"2025-01-01T00:00:05.000Z",'
        '"fromId":"a1","summary":"went elsewhere"}',
        '{"type":"branch_summary","id":"a6","parentId":"a5","timestamp":"2025-01-01T00:00:06.000Z",'
        '"fromId":"a1","summary":""}',
        '{"type":"thinking_level_change","id":"a7","parentId":"a6",'
        '"timestamp":"2025-01-01T00:00:09.000Z","thinkingLevel":"high"}',
        '{"type":"model_change","id":"a8","parentId":"a7","timestamp":"2025-01-01T00:00:09.000Z",'
        '"provider":"openai","modelId":"gpt"}',
    ]
    session = SessionFile.parse("\n".join(lines) + "\n")
    context = session.build_context()
    assert jsjson.dumps(context.messages) == (
        '[{"role":"user","content":"x","timestamp":1},'
        '{"role":"custom","customType":"n","content":"c","display":false,"timestamp":1735689607500},'
        '{"role":"custom","customType":"n","content":[{"type":"text","text":"t"}],"display":true,'
        '"details":{"k":1},"timestamp":null},'
        '{"role":"branchSummary","summary":"went elsewhere","fromId":"a1",'
        '"timestamp":1735689605000}]'
    )
    assert context.thinking_level == "high"
    assert context.model == {"provider": "openai", "modelId": "gpt"}
    # Same through Pi's free function.
    assert jsjson.dumps(build_session_context(session.entries).messages) == jsjson.dumps(
        context.messages
    )
    assert build_session_context(session.entries, None).messages == []


def _two_compactions(c2_keeps_from: str) -> SessionFile:
    lines = [
        HEADER_V3,
        msg_line("a1", None, "one", ts=1),
        msg_line("a2", "a1", "two", ts=2),
        msg_line("a3", "a2", "three", ts=3),
        '{"type":"compaction","id":"c1","parentId":"a3","timestamp":"2025-01-01T00:00:05.000Z",'
        '"summary":"old","firstKeptEntryId":"a2","tokensBefore":5}',
        msg_line("a4", "c1", "four", ts=4),
        '{"type":"compaction","id":"c2","parentId":"a4","timestamp":"2025-01-01T00:00:06.000Z",'
        f'"summary":"new","firstKeptEntryId":"{c2_keeps_from}","tokensBefore":9}}',
        msg_line("a5", "c2", "five", ts=5),
    ]
    return SessionFile.parse("\n".join(lines) + "\n")


def test_compaction_keeps_from_first_kept_entry() -> None:
    session = _two_compactions("a4")
    # The last compaction on the path wins; kept entries start at its firstKeptEntryId.
    assert jsjson.dumps(session.build_context().messages) == (
        '[{"role":"compactionSummary","summary":"new","tokensBefore":9,"timestamp":1735689606000},'
        '{"role":"user","content":"four","timestamp":4},'
        '{"role":"user","content":"five","timestamp":5}]'
    )
    assert jsjson.dumps(session.build_context("a4").messages) == (
        '[{"role":"compactionSummary","summary":"old","tokensBefore":5,"timestamp":1735689605000},'
        '{"role":"user","content":"two","timestamp":2},'
        '{"role":"user","content":"three","timestamp":3},'
        '{"role":"user","content":"four","timestamp":4}]'
    )


def test_compaction_inside_the_kept_range_of_a_later_one_shows_its_summary() -> None:
    # c2 keeps from a2, so c1 (between a3 and a4) lies inside its kept range: current Pi (and
    # the reference runner's host) emits c1's summary at its place (spec 01 section 7, as
    # corrected); older pi-mono dropped it. Expected bytes: the reference runner's render.
    session = _two_compactions("a2")
    expected = (
        '[{"role":"compactionSummary","summary":"new","tokensBefore":9,"timestamp":1735689606000},'
        '{"role":"user","content":"two","timestamp":2},'
        '{"role":"user","content":"three","timestamp":3},'
        '{"role":"compactionSummary","summary":"old","tokensBefore":5,"timestamp":1735689605000},'
        '{"role":"user","content":"four","timestamp":4},'
        '{"role":"user","content":"five","timestamp":5}]'
    )
    assert jsjson.dumps(session.build_context().messages) == expected
    assert jsjson.dumps(build_session_context(session.entries).messages) == expected


def test_session_name_line_breaks_become_one_space(tmp_path: Path) -> None:
    session = SessionFile.create(tmp_path / "s.jsonl", cwd="/w")
    session.append_session_info("  first\r\n\nsecond \n")
    assert session.entries[-1]["name"] == "first second"
    reloaded = SessionFile.load(tmp_path / "s.jsonl")
    assert reloaded.entries[-1]["name"] == "first second"


def test_parent_cycle_terminates() -> None:
    lines = [HEADER_V3, msg_line("a1", "a2", "one"), msg_line("a2", "a1", "two", ts=2)]
    session = SessionFile.parse("\n".join(lines) + "\n")
    assert [e["id"] for e in session.branch()] == ["a1", "a2"]
    assert len(session.build_context().messages) == 2


def test_parent_cycle_below_the_leaf_ends_at_the_first_repeat() -> None:
    # a4 -> a3 -> a2 -> a3 (a cycle the leaf leads into) and a self-parented entry.
    lines = [
        HEADER_V3,
        msg_line("a2", "a3", "two", ts=2),
        msg_line("a3", "a2", "three", ts=3),
        msg_line("a4", "a3", "four", ts=4),
        msg_line("s1", "s1", "self", ts=5),
    ]
    session = SessionFile.parse("\n".join(lines) + "\n")
    assert [e["id"] for e in session.branch("a4")] == ["a2", "a3", "a4"]
    assert [e["id"] for e in session.branch()] == ["s1"]
    session.set_leaf("a4")
    assert [m["content"] for m in session.build_context().messages] == ["two", "three", "four"]


def test_unknown_leaf_raises() -> None:
    session = SessionFile.parse(HEADER_V3 + "\n" + msg_line("a1", None, "x") + "\n")
    for call in (session.branch, session.build_context, session.set_leaf):
        with pytest.raises(SessionError, match="nope"):
            call("nope")


# --------------------------------------------------------------------------------------------
# Appending


def test_create_writes_header_immediately(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "new.jsonl"
    session = SessionFile.create(path, "/work", session_id="sid-1", clock=fixed_clock())
    assert path.read_bytes() == (
        b'{"type":"session","version":3,"id":"sid-1","timestamp":"2025-10-09T08:53:21.000Z",'
        b'"cwd":"/work"}\n'
    )
    assert session.session_id == "sid-1"
    assert session.session_dir == str(path.parent)
    with pytest.raises(SessionError, match="already exists"):
        SessionFile.create(path, "/work")
    forked = SessionFile.create(
        tmp_path / "f.jsonl", "/w", session_id="f", parent_session="/x.jsonl"
    )
    assert list(forked.header) == ["type", "version", "id", "timestamp", "cwd", "parentSession"]


def test_append_lines_are_exact(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = SessionFile.create(
        path, "/p", session_id="s", clock=fixed_clock(), id_source=counter_ids()
    )
    assert session.append_custom("t", {"a": 1}) == "00000001"
    session.append_custom("t")
    session.append_custom_message("m", "body", display=True)
    session.append_custom_message("m", [{"type": "text", "text": "b"}], False, details={"d": 0})
    session.append_message({"role": "user", "content": "hi", "timestamp": 5})
    session.append_entry({"type": "session_info", "name": "named"})
    ts = '"timestamp":"2025-10-09T08:53:21.000Z"'
    assert path.read_text(encoding="utf-8").splitlines()[1:] == [
        f'{{"type":"custom","customType":"t","data":{{"a":1}},"id":"00000001","parentId":null,{ts}}}',
        f'{{"type":"custom","customType":"t","id":"00000002","parentId":"00000001",{ts}}}',
        '{"type":"custom_message","customType":"m","content":"body","display":true,'
        f'"id":"00000003","parentId":"00000002",{ts}}}',
        '{"type":"custom_message","customType":"m","content":[{"type":"text","text":"b"}],'
        f'"display":false,"details":{{"d":0}},"id":"00000004","parentId":"00000003",{ts}}}',
        f'{{"type":"message","id":"00000005","parentId":"00000004",{ts},'
        '"message":{"role":"user","content":"hi","timestamp":5}}',
        f'{{"type":"session_info","id":"00000006","parentId":"00000005",{ts},"name":"named"}}',
    ]
    fresh = SessionFile.load(path)
    assert [jsjson.dumps(e) for e in fresh.entries] == [jsjson.dumps(e) for e in session.entries]
    # custom_message in context: timestamp = Date.parse(entry.timestamp), details omitted if absent.
    assert jsjson.dumps(fresh.build_context().messages[0]) == (
        '{"role":"custom","customType":"m","content":"body","display":true,"timestamp":1760000001000}'
    )


def test_append_entry_rejects_reserved_keys_and_header_type() -> None:
    session = SessionFile.in_memory("/p")
    with pytest.raises(SessionError, match="assigned by the session"):
        session.append_entry({"type": "custom", "customType": "x", "id": "mine"})
    with pytest.raises(SessionError, match="type"):
        session.append_entry({"type": "session"})
    with pytest.raises(SessionError, match="type"):
        session.append_entry({"customType": "x"})
    assert session.entries == []


def test_append_entry_absent_values_are_omitted() -> None:
    session = SessionFile.in_memory("/p", clock=fixed_clock(), id_source=counter_ids())
    session.append_entry(
        {
            "type": "compaction",
            "summary": "s",
            "firstKeptEntryId": "x",
            "tokensBefore": 3,
            "details": ABSENT,
            "fromHook": True,
        }
    )
    assert list(session.entries[0]) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
        "fromHook",
    ]


def test_ids_are_unique_pi_generate_id_rule(tmp_path: Path) -> None:
    text = HEADER_V3 + "\n" + msg_line("aaaaaaaa", None, "x") + "\n"
    candidates = iter(["aaaaaaaa", "bbbbbbbb", "bbbbbbbb", "cccccccc"])
    session = SessionFile.load(
        write(tmp_path / "s.jsonl", text), id_source=lambda: next(candidates)
    )
    assert session.append_custom("t") == "bbbbbbbb"
    assert session.append_custom("t") == "cccccccc"
    stuck = SessionFile.in_memory("/p", id_source=lambda: "dddddddd")
    assert stuck.append_custom("t") == "dddddddd"
    fallback = stuck.append_custom("t")  # 100 collisions: a full random UUID, like Pi
    assert len(fallback) == 36
    assert fallback != "dddddddd"


def test_parent_chaining_and_leaf_navigation(tmp_path: Path) -> None:
    session = SessionFile.create(tmp_path / "s.jsonl", "/p", id_source=counter_ids())
    a = session.append_message({"role": "user", "content": "a", "timestamp": 1})
    b = session.append_message({"role": "user", "content": "b", "timestamp": 2})
    assert session.get_entry(b)["parentId"] == a  # type: ignore[index]
    session.set_leaf(a)
    c = session.append_custom("t")
    assert session.get_entry(c)["parentId"] == a  # type: ignore[index]
    assert [e["id"] for e in session.branch()] == [a, c]
    assert [e["id"] for e in session.branch(b)] == [a, b]
    session.set_leaf(None)
    d = session.append_custom("t")
    assert session.get_entry(d)["parentId"] is None  # type: ignore[index]
    summary = session.branch_with_summary(b, "back")
    entry = session.get_entry(summary)
    assert entry is not None
    assert (entry["parentId"], entry["fromId"]) == (b, b)
    root_summary = session.branch_with_summary(None, "from root")
    entry = session.get_entry(root_summary)
    assert entry is not None
    assert (entry["parentId"], entry["fromId"]) == (None, "root")
    label = session.append_label(a, "mark")
    assert session.get_label(a) == "mark"
    session.append_label(a)
    assert session.get_label(a) is None
    fresh = SessionFile.load(tmp_path / "s.jsonl")
    assert fresh.leaf_id == fresh.entries[-1]["id"]
    assert fresh.get_label(a) is None
    assert fresh.get_entry(label) is not None


def test_iso_timestamps_from_clock(tmp_path: Path) -> None:
    session = SessionFile.in_memory("/p", clock=ticking_clock(T0 + 7, 1001))
    session.append_custom("t")
    session.append_custom("t")
    assert [e["timestamp"] for e in session.entries] == [
        "2025-01-01T00:00:01.008Z",
        "2025-01-01T00:00:02.009Z",
    ]


def test_append_is_fsynced_and_visible_to_fresh_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    session = SessionFile.create(tmp_path / "s.jsonl", "/p")
    assert synced
    synced.clear()
    entry_id = session.append_custom("t", {"n": 1})
    assert len(synced) == 1
    fresh = SessionFile.load(tmp_path / "s.jsonl")
    assert fresh.get_entry(entry_id) == session.get_entry(entry_id)


def test_torn_last_line_is_terminated_before_append(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = SessionFile.create(path, "/p", id_source=counter_ids())
    first = session.append_custom("t")
    with path.open("ab") as f:
        f.write(b'{"type":"custom","cust')  # a crashed writer
    reloaded = SessionFile.load(path, id_source=counter_ids(100))
    assert kinds(reloaded) == [(3, "truncated")]
    second = reloaded.append_custom("t")
    lines = path.read_bytes().split(b"\n")
    assert lines[2] == b'{"type":"custom","cust'
    assert json.loads(lines[3])["id"] == second
    fresh = SessionFile.load(path)
    assert kinds(fresh) == [(3, "invalid-json")]
    assert [e["id"] for e in fresh.entries] == [first, second]
    assert fresh.get_entry(second)["parentId"] == first  # type: ignore[index]


def test_torn_line_written_after_load_is_terminated(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = SessionFile.create(path, "/p", id_source=counter_ids())
    first = session.append_custom("t")
    with path.open("ab") as f:
        f.write(b'{"type":"mess')
    second = session.append_custom("t")
    assert kinds(session) == [(3, "truncated")]
    assert path.read_bytes().endswith(
        b'{"type":"mess\n' + jsjson.dumps(session.get_entry(second)).encode() + b"\n"
    )
    fresh = SessionFile.load(path)
    assert [e["id"] for e in fresh.entries] == [first, second]


def test_entries_from_another_writer_are_picked_up(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ours = SessionFile.create(path, "/p", id_source=counter_ids(1))
    a = ours.append_custom("t")
    theirs = SessionFile.load(path, id_source=counter_ids(1000))
    b = theirs.append_custom("t", {"from": "them"})
    c = theirs.append_custom("t")
    # Our leaf was the file's last entry, so it follows the other writer's entries.
    d = ours.append_custom("t")
    assert ours.get_entry(b) is not None
    assert ours.get_entry(c) is not None
    assert ours.get_entry(d)["parentId"] == c  # type: ignore[index]
    assert b != a
    assert d not in (a, b, c)
    # An explicitly chosen leaf is kept.
    ours.set_leaf(a)
    theirs.append_custom("t")
    e = ours.append_custom("t")
    assert ours.get_entry(e)["parentId"] == a  # type: ignore[index]
    assert theirs.refresh() == 1  # e; d was picked up by its own append
    assert [x["id"] for x in theirs.entries] == [x["id"] for x in SessionFile.load(path).entries]


def test_rewritten_file_refuses_append(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = SessionFile.create(path, "/p")
    session.append_custom("t")
    rewritten = path.read_bytes().replace(b'"t"', b'"u"') + b"\n"
    path.write_bytes(rewritten)
    with pytest.raises(SessionError, match="rewritten"):
        session.append_custom("t")
    assert path.read_bytes() == rewritten
    path.write_bytes(rewritten[:10])
    with pytest.raises(SessionError, match="rewritten or truncated"):
        session.refresh()


CHILD_WRITER = """
import sys
from pi_condense.session import SessionFile
session = SessionFile.load(sys.argv[1])
open(sys.argv[3], "w").close()
for i in range(int(sys.argv[2])):
    session.append_custom("writer", {"who": "child", "i": i, "pad": "x" * (i % 97) * 40})
"""


@pytest.mark.skipif(sys.platform == "win32", reason="advisory locks are POSIX-only")
def test_concurrent_writer_process_never_interleaves(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ready = tmp_path / "ready"
    count = 300
    ours = SessionFile.create(path, "/p")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_WRITER, str(path), str(count), str(ready)]
    )
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.005)
    for i in range(count):
        ours.append_custom("writer", {"who": "parent", "i": i, "pad": "y" * (i % 89) * 40})
    assert child.wait(timeout=120) == 0
    fresh = SessionFile.load(path)
    assert fresh.warnings == []
    entries = fresh.entries
    assert len(entries) == 2 * count
    for who in ("parent", "child"):
        assert [e["data"]["i"] for e in entries if e["data"]["who"] == who] == list(range(count))
    ids = [e["id"] for e in entries]
    assert len(set(ids)) == len(ids)
    # Each writer picked up the other's entries before appending: one linear chain.
    assert [e["parentId"] for e in entries] == [None, *ids[:-1]]


def test_in_memory_sessions_never_touch_disk(tmp_path: Path) -> None:
    session = SessionFile.in_memory(
        "/p", session_id="mem", clock=fixed_clock(), id_source=counter_ids()
    )
    assert session.path is None
    assert session.session_dir == ""
    a = session.append_message({"role": "user", "content": "x", "timestamp": 1})
    session.append_custom_message("n", "note", True)
    assert session.refresh() == 0
    assert [m["role"] for m in session.build_context().messages] == ["user", "custom"]
    assert session.leaf_id != a
    source = write(tmp_path / "s.jsonl", HEADER_V3 + "\n" + msg_line("a1", None, "x") + "\n")
    before = source.read_bytes()
    parsed = SessionFile.parse(source.read_bytes(), session_dir="/sessions")
    parsed.append_custom("t")
    assert parsed.path is None
    assert parsed.session_dir == "/sessions"
    assert source.read_bytes() == before
    assert [e["parentId"] for e in parsed.entries] == [None, "a1"]


# --------------------------------------------------------------------------------------------
# JS Date helpers


@pytest.mark.parametrize(
    ("ms", "iso"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (1760000001000, "2025-10-09T08:53:21.000Z"),
        (1760000001123.9, "2025-10-09T08:53:21.123Z"),
        (253402300800000, "+010000-01-01T00:00:00.000Z"),
        (-62198755200001, "-000002-12-31T23:59:59.999Z"),
        (8.64e15, "+275760-09-13T00:00:00.000Z"),
    ],
)
def test_to_iso_string(ms: float, iso: str) -> None:
    assert jstime.to_iso_string(ms) == iso


@pytest.mark.parametrize("ms", [8.64e15 + 1, float("nan"), float("inf")])
def test_to_iso_string_invalid(ms: float) -> None:
    with pytest.raises(ValueError, match="invalid time value"):
        jstime.to_iso_string(ms)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-10-09T08:53:21.000Z", 1760000001000),
        ("2025-10-09T08:53:21Z", 1760000001000),
        ("2025-10-09T08:53:21.1239Z", 1760000001123),
        ("2025-10-09T08:53:21.1Z", 1760000001100),
        ("2025-10-09T08:53Z", 1759999980000),
        ("2025-10-09", 1759968000000),
        ("2025-10", 1759276800000),
        ("2025", 1735689600000),
        ("2025-02-31", 1740960000000),
        ("2025-10-09T24:00:00Z", 1760054400000),
        ("2025-10-09T08:53:21+02:00", 1759992801000),
        ("2025-10-09T08:53:21+0200", 1759992801000),
        ("2025-10-09T08:53:21.000-00:00", 1760000001000),
        ("2025-10-09 08:53:21Z", 1760000001000),
        ("2025-10-09t08:53:21z", 1760000001000),
        ("+002025-10-09T08:53:21Z", 1760000001000),
        ("-000001-01-01T00:00:00Z", -62198755200000),
        ("+275760-09-13T00:00:00.000Z", 8640000000000000),
        ("0000-01-01T00:00:00Z", -62167219200000),
        ("0049-12-30Z", 2524435200000),
    ],
)
def test_date_parse(text: str, expected: int) -> None:
    assert jstime.date_parse(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # toISOString()'s own form, parsed by the fast path (expected values as above: V8).
        ("2025-02-31T00:00:00.000Z", 1740960000000),
        ("2025-10-09T24:00:00.000Z", 1760054400000),
        ("0000-01-01T00:00:00.000Z", -62167219200000),
        ("1970-01-01T00:00:00.001Z", 1),
    ],
)
def test_date_parse_canonical_form(text: str, expected: int) -> None:
    assert jstime.date_parse(text) == expected


def two(n: int) -> str:
    return f"{n:02d}"


@given(
    st.integers(0, 9999),
    *(st.integers(0, 99) for _ in range(5)),
    st.integers(0, 999),
)
def test_the_canonical_fast_path_agrees_with_the_general_parser(
    year: int, month: int, day: int, hour: int, minute: int, second: int, millis: int
) -> None:
    from pi_condense.js.time import _date_parse_any

    text = f"{year:04d}-{two(month)}-{two(day)}T{two(hour)}:{two(minute)}:{two(second)}"
    text += f".{millis:03d}Z"
    fast, general = jstime.date_parse(text), _date_parse_any(text)
    assert fast == general or (fast != fast and general != general), text
    if year >= 1 and 1 <= month <= 12 and 1 <= day <= 28 and hour <= 23 and minute <= 59:
        from datetime import UTC, datetime

        if second <= 59:  # a valid instant: the proleptic Gregorian UTC time JS uses too
            when = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
            assert fast == int(when.timestamp()) * 1000 + millis


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "2025-02-32",
        "2025-02-32T00:00:00.000Z",
        "2025-13-01T00:00:00.000Z",
        "2025-10-09T24:00:00.001Z",
        "2025-10-09T08:60:00.000Z",
        "2025-10-09T08:53:21.000\u0660Z",
        "2025-10-09T24:00:01Z",
        "2025-10-09T08:53:60Z",
        "2025-00-09",
        "-000000-01-01T00:00:00Z",
        "2025-10-09T08:53:21.Z",
        " 2025-10-09T08:53:21Z",
        "2025-10-09T08:53:21Z ",
        "2025-10-09T8:53:21Z",
        "2025-10-09T08:53:21+24:00",
        "+275760-09-13T00:00:00.001Z",
        "2025-10-09+01:00",
    ],
)
def test_date_parse_invalid_is_nan(text: str) -> None:
    assert jstime.date_parse(text) != jstime.date_parse(text)  # NaN


@pytest.mark.skipif(not hasattr(time, "tzset"), reason="needs time.tzset")
def test_date_parse_local_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert jstime.date_parse("2025-10-09T08:53:21") == 1760014401000
        assert jstime.date_parse("2025-10-09 08:53:21") == 1760014401000
        assert jstime.date_parse("2025-10-09") == 1759968000000  # date-only forms are UTC
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 0), (True, 1), (1.7, 1), (-1.7, -1), (["2025-01-01"], 1735689600000)],
)
def test_date_value(value: Any, expected: int) -> None:
    assert jstime.date_value(value) == expected


@pytest.mark.parametrize("value", [[], {}, 8.64e15 + 1, "x"])
def test_date_value_nan(value: Any) -> None:
    result = jstime.date_value(value)
    assert result != result


# --------------------------------------------------------------------------------------------
# Properties


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _json_equal(a: Any, b: Any) -> bool:
    return jsjson.dumps(a) == jsjson.dumps(b)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads=st.lists(JSON_VALUES, min_size=1, max_size=5), message_text=st.text())
def test_property_load_of_appended_entries_round_trips(
    payloads: list[Any], message_text: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        session = SessionFile.create(path, "/p", session_id="s")
        ids = [session.append_custom("prop", payload) for payload in payloads]
        ids.append(
            session.append_message({"role": "user", "content": message_text, "timestamp": 1})
        )
        fresh = SessionFile.load(path)
        assert fresh.warnings == []
        assert [e["id"] for e in fresh.entries] == ids
        assert [jsjson.dumps(e) for e in fresh.entries] == [
            jsjson.dumps(e) for e in session.entries
        ]
        for entry, payload in zip(fresh.entries, payloads, strict=False):
            assert _json_equal(entry["data"], payload)
        assert fresh.entries[-1]["message"]["content"] == message_text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(last=JSON_VALUES)
def test_property_cut_at_every_offset_of_last_line(last: Any) -> None:
    session = SessionFile.in_memory(
        "/p", session_id="s", clock=fixed_clock(), id_source=counter_ids()
    )
    session.append_custom("a", {"x": "é😀"})
    session.append_custom("b", [1, 2])
    session.append_custom("last", last)
    lines = [jsjson.dumps(session.header)] + [jsjson.dumps(e) for e in session.entries]
    prefix = ("\n".join(lines[:-1]) + "\n").encode("utf-8")
    final = lines[-1].encode("utf-8")
    earlier = lines[1:-1]
    for cut in range(len(final) + 1):
        loaded = SessionFile.parse(prefix + final[:cut])
        assert [jsjson.dumps(e) for e in loaded.entries[:2]] == earlier
        if cut == len(final):
            assert loaded.warnings == []
            assert len(loaded.entries) == 3
        elif cut == 0:
            assert loaded.warnings == []
            assert len(loaded.entries) == 2
        else:
            assert len(loaded.entries) == 2
            assert (4, "truncated") in kinds(loaded)
            assert {kind for _, kind in kinds(loaded)} <= {"truncated", "invalid-utf8"}


def test_v1_ids_are_stable_across_loads_without_an_injected_id_source(
    fixtures_dir: Path,
) -> None:
    path = fixtures_dir / "large-session.jsonl"
    first = SessionFile.load(path)
    second = SessionFile.load(path)
    ids = [e["id"] for e in first.entries]
    assert ids == [e["id"] for e in second.entries]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    # still a single linear branch, as Pi's migration builds it
    assert [e["parentId"] for e in first.entries] == [None, *ids[:-1]]


@given(
    st.lists(
        st.integers(-62135596800000, 253402300799999) | st.floats(-1e13, 1e13),
        min_size=1,
        max_size=12,
    )
)
def test_to_iso_string_of_any_sequence_agrees_with_datetime(values: list[float]) -> None:
    # The printer remembers the last value and the days it printed: neither may go stale.
    from datetime import UTC, datetime, timedelta

    for ms in [*values, *values[::-1], *values]:
        when = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=int(ms))
        clock = f"{when.hour:02d}:{when.minute:02d}:{when.second:02d}"
        day = f"{when.year:04d}-{when.month:02d}-{when.day:02d}"
        assert jstime.to_iso_string(ms) == f"{day}T{clock}.{when.microsecond // 1000:03d}Z"
