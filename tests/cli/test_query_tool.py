"""context_tree_query (spec 06 part A) and Pi's truncateHead (spec 06 A.3).

Expected texts come from the spec, the reference's src/query-tool.test.ts and the
conformance vectors (whose recovery vectors hold three live runs of the reference tool).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import tarfile
from pathlib import Path
from typing import Any, Optional

import pytest

from pi_condense.capture import image_digest
from pi_condense.js import json as jsjson
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.tools import QUERY_TOOL, ContextTreeQuery, condense_tools, truncate_head

NOT_FOUND = "(not found in index \u2014 may not have been summarized yet)"
SPILL_MISSING = "(spilled output unavailable \u2014 sidecar file missing)"
SID = "sess-1234"
SECRET = "TOP-SECRET-CONTENT-1f2e3d"


def record(
    tool_call_id: str,
    text: str,
    ts: Optional[float] = None,
    *,
    turn: int = 0,
    batch_ts: float = 1000,
    **extra: Any,
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "toolCallId": tool_call_id,
        "toolName": "bash",
        "args": {"cmd": "ls"},
        "resultText": text,
        "isError": False,
        "turnIndex": turn,
        "timestamp": batch_ts,
    }
    if ts is not None:
        r["resultTimestamp"] = ts
    r.update(extra)
    return r


def index_entry(*records: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "custom",
        "customType": "context-prune-index",
        "data": {"toolCalls": list(records)},
    }


def run(st: PrunerState, ids: list[str], session_dir: str = "/nonexistent") -> str:
    return ContextTreeQuery(st, session_dir, SID).execute({"toolCallIds": ids}).text


def blocks(text: str) -> int:
    return text.count("## toolRef:")


# ----------------------------------------------------------------------- registration


def test_registration_strings_are_the_reference_ones() -> None:
    # Spec 06 A.1.
    assert QUERY_TOOL.name == "context_tree_query"
    assert QUERY_TOOL.label == "Query Original Tool History"
    assert QUERY_TOOL.description == (
        "Retrieve original tool call results that have been pruned from active context. Pass "
        "the short refs listed in a pruner-summary message, e.g. context_tree_query({ "
        'toolCallIds: ["t12", "t3"] }), to get back the full original outputs. A raw id that '
        "was reused returns every occurrence, each labelled id@timestamp. Results include the "
        "original image blocks when the pruned output carried images."
    )
    assert QUERY_TOOL.prompt_snippet == "Retrieve original pruned tool outputs by short ref"
    assert QUERY_TOOL.prompt_guidelines == (
        "When you need the full output of a tool call that was summarized and pruned from "
        "context, use context_tree_query with the short refs listed in the relevant "
        "pruner-summary message.",
    )


def test_parameter_schema_is_the_typebox_schema() -> None:
    # Type.Object({toolCallIds: Type.Array(Type.String(), {description})}) as TypeBox builds
    # it: options spread before type/items.
    expected = (
        '{"type":"object","properties":{"toolCallIds":{"description":"Required. One or more '
        'short refs (e.g. \\"t12\\") or raw tool call IDs from a pruner-summary message. A '
        'reused raw id returns every occurrence, each labelled id@timestamp.","type":"array",'
        '"items":{"type":"string"}}},"required":["toolCallIds"]}'
    )
    assert jsjson.dumps(QUERY_TOOL.parameters) == expected


# ------------------------------------------------------------------------- execution


def test_spec_vector_legacy_and_occurrence_records() -> None:
    st = PrunerState.from_branch(
        [
            index_entry(record("bash_23", "OLD", turn=0, batch_ts=1000)),
            index_entry(record("bash_23", "NEW", 2150, turn=1, batch_ts=2000, isError=True)),
        ]
    )
    result = ContextTreeQuery(st, "/nonexistent", SID).execute({"toolCallIds": ["bash_23", "nope"]})
    assert result.text == (
        "## toolRef: bash_23\nOccurrence: legacy (no resultTimestamp)\nTool: bash\n"
        'Args: {\n  "cmd": "ls"\n}\nStatus: OK\nTurn: 0\n\nOLD\n\n---\n\n'
        '## toolRef: bash_23@2150\nTool: bash\nArgs: {\n  "cmd": "ls"\n}\nStatus: ERROR\n'
        "Turn: 1\n\nNEW\n\n---\n\n"
        f"## toolRef: nope\n{NOT_FOUND}"
    )
    assert list(result.details["results"]) == ["bash_23", "bash_23@2150"]
    assert result.content == [{"type": "text", "text": result.text}]
    assert not result.is_error


def test_bare_id_with_two_occurrences_returns_both_chronologically() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "SECOND", 2150, turn=1)])
    st.add_batch([record("bash_23", "FIRST", 1150)])
    text = run(st, ["bash_23"])
    assert blocks(text) == 2
    assert 0 <= text.index("FIRST") < text.index("SECOND")
    assert "## toolRef: bash_23@1150\n" in text
    assert "## toolRef: bash_23@2150\n" in text


def test_occurrence_key_returns_exactly_one_block() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150)])
    st.add_batch([record("bash_23", "SECOND", 2150, turn=1)])
    text = run(st, ["bash_23@2150"])
    assert blocks(text) == 1
    assert "SECOND" in text
    assert "FIRST" not in text


def test_single_match_is_labelled_with_the_callers_input() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150)])
    text = run(st, ["bash_23"])
    assert text.startswith("## toolRef: bash_23\nTool: bash\n")
    assert "bash_23@" not in text


def test_content_dedup_alias_is_its_own_block_with_its_own_timestamp() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "SAME", 1150)])
    st.register_duplicate("bash_23@9150", "bash_23@1150")
    result = ContextTreeQuery(st, "/nonexistent", SID).execute({"toolCallIds": ["bash_23"]})
    assert blocks(result.text) == 2
    assert result.text.count("\n\nSAME") == 2
    assert list(result.details["results"]) == ["bash_23@1150", "bash_23@9150"]
    assert result.details["results"]["bash_23@9150"]["resultTimestamp"] == 9150


def test_colliding_short_refs_resolve_to_their_own_occurrence() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150)])
    st.add_batch([record("bash_23", "SECOND", 2150, turn=1)])
    st.register_refs(
        [
            {"shortId": "t1", "toolCallId": "bash_23", "resultTimestamp": 1150},
            {"shortId": "t2", "toolCallId": "bash_23", "resultTimestamp": 2150},
        ]
    )
    first, second = run(st, ["t1"]), run(st, ["t2"])
    assert first.startswith("## toolRef: t1\n")
    assert "FIRST" in first
    assert "SECOND" not in first
    assert "SECOND" in second
    assert "FIRST" not in second


def test_unknown_ids_and_empty_input() -> None:
    st = PrunerState()
    assert run(st, ["nope"]) == f"## toolRef: nope\n{NOT_FOUND}"
    assert run(st, []) == ""


def test_bad_arguments_are_refused() -> None:
    tool = ContextTreeQuery(PrunerState(), "/nonexistent", SID)
    for args in ({}, {"toolCallIds": "t1"}, {"toolCallIds": [1]}):
        result = tool.execute(args)
        assert result.is_error
        assert "toolCallIds must be an array of strings" in result.text


def test_live_reference_runs_in_the_recovery_vectors(conformance_dir: Path) -> None:
    # The recovery vectors' inputs hold three context_tree_query calls that the replay ran
    # through the real reference tool: its content and details are in the session file.
    checked = 0
    for vector in ("large-recovery-grace3", "large-recovery-grace0"):
        raw = (conformance_dir / "replay" / vector / "session.jsonl.gz").read_bytes()
        session = SessionFile.parse(gzip.decompress(raw))
        for entry in session.entries:
            message = entry.get("message") or {}
            if message.get("toolName") != "context_tree_query":
                continue
            branch = session.branch(entry["parentId"])
            calls = [
                c
                for e in branch
                if (e.get("message") or {}).get("role") == "assistant"
                for c in e["message"]["content"]
                if c.get("type") == "toolCall" and c["id"] == message["toolCallId"]
            ]
            assert len(calls) == 1
            tool = ContextTreeQuery(PrunerState.from_branch(branch), "/nonexistent", "x")
            result = tool.execute(calls[0]["arguments"])
            assert jsjson.dumps(result.content) == jsjson.dumps(message["content"])
            assert jsjson.dumps(result.details) == jsjson.dumps(message["details"])
            checked += 1
    assert checked == 6


def test_spill_vector_reads_every_blob_from_the_mapped_session_dir(
    conformance_dir: Path, tmp_path: Path
) -> None:
    vector_dir = conformance_dir / "replay" / "large-protect-spill"
    session = SessionFile.parse(gzip.decompress((vector_dir / "session.jsonl.gz").read_bytes()))
    recorded = json.loads((vector_dir / "meta.json").read_text())["options"]["sessionDir"]
    blobs: dict[str, str] = {}
    with tarfile.open(vector_dir / "blobs.tar.gz") as tar:
        for member in tar.getmembers():
            f = tar.extractfile(member) if member.isfile() else None
            if f is not None:
                data = f.read()
                blobs[os.path.normpath(member.name)] = data.decode("utf-8")
                target = tmp_path / os.path.normpath(member.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
    st = PrunerState.from_session(session)
    tool = ContextTreeQuery(st, str(tmp_path), session.session_id, recorded_session_dir=recorded)
    spilled = [r for r in st.index.records() if r.get("spillPath")]
    assert len(spilled) >= len(blobs) == 9
    for r in spilled:
        key = f"{r['toolCallId']}@{r['resultTimestamp']}"
        text = tool.execute({"toolCallIds": [key]}).text
        blob = blobs[os.path.relpath(r["spillPath"], recorded)]
        assert text.endswith("\n\n" + blob), key
        assert len(blob) > len(r["resultPreview"])
    # Without the mapping the recorded absolute paths are outside this session's blob dir.
    unmapped = ContextTreeQuery(st, str(tmp_path), session.session_id)
    r = spilled[0]
    text = unmapped.execute({"toolCallIds": [f"{r['toolCallId']}@{r['resultTimestamp']}"]}).text
    assert text.endswith(
        "\n\n" + r["resultPreview"] + "\n[Spill file not read: the path resolves outside this "
        "session's blob directory]"
    )


# -------------------------------------------------------------------------- spill files


@pytest.fixture
def session_dir(tmp_path: Path) -> Path:
    (tmp_path / "sessions" / f"{SID}-blobs").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text(SECRET)
    return tmp_path / "sessions"


def spilled(path: Any, preview: Optional[str] = "HEAD-PREVIEW") -> PrunerState:
    extra: dict[str, Any] = {"spillPath": path, "spillBytes": 10}
    if preview is not None:
        extra["resultPreview"] = preview
    st = PrunerState()
    st.add_batch([record("s", "", 7, **extra)])
    return st


def body(text: str) -> str:
    return text.split("Turn: 0\n\n", 1)[1]


def test_spill_file_inside_the_blob_dir_is_read(session_dir: Path) -> None:
    blob = session_dir / f"{SID}-blobs" / "s_7.txt"
    blob.write_bytes("full output \u00e9\n".encode() + b"\xff")
    text = run(spilled(str(blob)), ["s@7"], str(session_dir))
    # Invalid UTF-8 reads back as U+FFFD, as Node's readFile(path, "utf-8") does.
    assert body(text) == "full output \u00e9\n\ufffd"


def test_missing_spill_file_falls_back_like_the_reference(session_dir: Path) -> None:
    gone = str(session_dir / f"{SID}-blobs" / "gone.txt")
    assert body(run(spilled(gone), ["s@7"], str(session_dir))) == "HEAD-PREVIEW"
    assert body(run(spilled(gone, None), ["s@7"], str(session_dir))) == SPILL_MISSING


def refused(text: str, reason: str) -> None:
    assert SECRET not in text
    assert body(text) == f"HEAD-PREVIEW\n[Spill file not read: {reason}]"


OUTSIDE = "the path resolves outside this session's blob directory"


def test_absolute_path_outside_the_blob_dir_is_refused(session_dir: Path) -> None:
    secret = str(session_dir.parent / "secret.txt")
    refused(run(spilled(secret), ["s@7"], str(session_dir)), OUTSIDE)
    refused(run(spilled("/etc/passwd"), ["s@7"], str(session_dir)), OUTSIDE)


def test_dot_dot_escape_is_refused(session_dir: Path) -> None:
    escape = str(session_dir / f"{SID}-blobs" / ".." / ".." / "secret.txt")
    refused(run(spilled(escape), ["s@7"], str(session_dir)), OUTSIDE)


def test_symlink_to_outside_is_refused(session_dir: Path) -> None:
    blobs = session_dir / f"{SID}-blobs"
    (blobs / "link.txt").symlink_to(session_dir.parent / "secret.txt")
    refused(run(spilled(str(blobs / "link.txt")), ["s@7"], str(session_dir)), OUTSIDE)
    (blobs / "subdir").symlink_to(session_dir.parent, target_is_directory=True)
    via_dir = str(blobs / "subdir" / "secret.txt")
    refused(run(spilled(via_dir), ["s@7"], str(session_dir)), OUTSIDE)


def test_a_symlink_inside_the_blob_dir_to_a_blob_is_followed(session_dir: Path) -> None:
    blobs = session_dir / f"{SID}-blobs"
    (blobs / "real.txt").write_text("REAL")
    (blobs / "alias.txt").symlink_to(blobs / "real.txt")
    assert body(run(spilled(str(blobs / "alias.txt")), ["s@7"], str(session_dir))) == "REAL"


def test_non_regular_files_and_odd_paths_are_refused(session_dir: Path) -> None:
    blobs = session_dir / f"{SID}-blobs"
    os.mkfifo(blobs / "pipe.txt")
    (blobs / "dir.txt").mkdir()
    not_regular = "the path is not a regular file"
    refused(run(spilled(str(blobs / "pipe.txt")), ["s@7"], str(session_dir)), not_regular)
    refused(run(spilled(str(blobs / "dir.txt")), ["s@7"], str(session_dir)), not_regular)
    refused(run(spilled(str(blobs)), ["s@7"], str(session_dir)), OUTSIDE)
    not_absolute = "the recorded spill path is not absolute"
    refused(run(spilled(f"{SID}-blobs/x.txt"), ["s@7"], str(session_dir)), not_absolute)
    unusable = "the recorded spill path is not a usable path string"
    refused(run(spilled(str(blobs / "a\0b")), ["s@7"], str(session_dir)), unusable)
    refused(run(spilled(42), ["s@7"], str(session_dir)), unusable)
    in_memory = "the session has no directory to hold spill files"
    refused(run(spilled(str(blobs / "x.txt")), ["s@7"], ""), in_memory)


def test_recorded_session_dir_maps_a_moved_session_and_never_reads_the_old_place(
    tmp_path: Path,
) -> None:
    old = tmp_path / "old"
    (old / f"{SID}-blobs").mkdir(parents=True)
    (old / f"{SID}-blobs" / "s_7.txt").write_text("DECOY AT THE OLD PLACE")
    new = tmp_path / "new"
    (new / f"{SID}-blobs").mkdir(parents=True)
    (new / f"{SID}-blobs" / "s_7.txt").write_text("MOVED BLOB")
    (tmp_path / "secret.txt").write_text(SECRET)
    st = spilled(str(old / f"{SID}-blobs" / "s_7.txt"))
    tool = ContextTreeQuery(st, str(new), SID, recorded_session_dir=str(old))
    assert body(tool.execute({"toolCallIds": ["s@7"]}).text) == "MOVED BLOB"
    # A `..` path that leaves the recorded dir is not re-rooted, and stays refused.
    escape = spilled(str(old / f"{SID}-blobs" / ".." / ".." / "secret.txt"))
    tool = ContextTreeQuery(escape, str(new), SID, recorded_session_dir=str(old))
    refused(tool.execute({"toolCallIds": ["s@7"]}).text, OUTSIDE)


# ---------------------------------------------------------------- truncation of bodies


def test_long_spill_is_truncated_with_the_reference_notice(session_dir: Path) -> None:
    blob = session_dir / f"{SID}-blobs" / "long.txt"
    blob.write_text("\n".join(f"line {i}" for i in range(2500)))
    text = body(run(spilled(str(blob)), ["s@7"], str(session_dir)))
    assert text.endswith("\nline 1999\n[Output truncated: 2000/2500 lines shown]")
    # A final newline ends the last line; it does not start a 2501st (Pi 0.83's count).
    blob.write_text("".join(f"line {i}\n" for i in range(2500)))
    text = body(run(spilled(str(blob)), ["s@7"], str(session_dir)))
    assert text.endswith("\nline 1999\n[Output truncated: 2000/2500 lines shown]")


def test_result_text_over_the_byte_budget_is_cut_at_a_line(session_dir: Path) -> None:
    st = PrunerState()
    st.add_batch([record("big", ("x" * 1000 + "\n") * 60, 1)])
    text = body(run(st, ["big@1"]))
    # 51 lines of 1000 bytes + 50 separators = 51050 <= 51200; a 52nd line would not fit.
    assert text == "\n".join(["x" * 1000] * 51) + "\n[Output truncated: 51/60 lines shown]"


def pages(tool: ContextTreeQuery, ref: str) -> list[str]:
    """Every part of ``ref``'s output, following each answer's note to the next part."""
    parts = []
    asked: Optional[str] = ref
    while asked is not None:
        text = tool.query([asked]).text
        assert text.startswith(f"## toolRef: {asked}\n")
        content, _, notes = body(text).partition("\n[Output ")
        parts.append(content)
        found = re.search(r"with ref `([^`]+)`", notes)
        asked = found.group(1) if found else None
        assert len(parts) < 20
    return parts


@pytest.mark.parametrize("final_newline", ["", "\n"])
def test_paging_gives_every_part_of_a_long_spill_exactly(
    session_dir: Path, final_newline: str
) -> None:
    blob = session_dir / f"{SID}-blobs" / "long.txt"
    original = "\n".join(f"line {i} " + "y" * (i % 70) for i in range(5200)) + final_newline
    blob.write_text(original)
    state = spilled(str(blob))
    state.register_refs([{"shortId": "t1", "toolCallId": "s", "resultTimestamp": 7}])
    tool = ContextTreeQuery(state, str(session_dir), SID, paging=True)
    parts = pages(tool, "t1")
    assert len(parts) >= 3
    assert "\n".join(parts) == original
    assert all(len(p.encode()) <= 50 * 1024 for p in parts)
    first = tool.query(["t1"]).text
    assert "[Output truncated: " in first  # the reference's note stays, the next part follows
    assert "`t1#" in first
    assert body(tool.query(["t1#99999"]).text) == "[No line 99999: the output has 5200 lines]"
    # without paging (the reference) a part ref is unknown and a cut answer names no next part
    plain = ContextTreeQuery(state, str(session_dir), SID)
    assert "`t1#" not in plain.query(["t1"]).text
    assert NOT_FOUND in plain.query(["t1#2001"]).text


def pieces(tool: ContextTreeQuery, ref: str) -> str:
    """``ref``'s output put back together from its parts, each joined to the next as its
    note says (with a line break, or without one inside a long line)."""
    whole = ""
    asked: Optional[str] = ref
    for _ in range(40):
        if asked is None:
            return whole
        content, _, notes = body(tool.query([asked]).text).partition("\n[Output ")
        assert len(content.encode()) <= 50 * 1024
        found = re.search(r"with ref `([^`]+)`", notes)
        asked = found.group(1) if found else None
        whole += content + ("" if asked is None or "same line" in notes else "\n")
    raise AssertionError("more than 40 parts")


@pytest.mark.parametrize("lines", [["L" * 130_000], ["a", "\u00e9" * 70_000 + "z", "tail"]])
def test_paging_cuts_a_line_longer_than_a_part_inside_the_line(
    session_dir: Path, lines: list[str]
) -> None:
    # A minified file or a one-line log: 130 KB on one line (and 140 KB of two-byte
    # characters between short lines). Pi's cut shows no whole line; paging shows the line
    # in pieces of at most 50 KB, each naming the next as <ref>#<line>.<column>.
    blob = session_dir / f"{SID}-blobs" / "long.txt"
    original = "\n".join(lines)
    blob.write_text(original)
    state = spilled(str(blob))
    state.register_refs([{"shortId": "t1", "toolCallId": "s", "resultTimestamp": 7}])
    tool = ContextTreeQuery(state, str(session_dir), SID, paging=True)
    assert pieces(tool, "t1") == original
    long_line = 1 if len(lines) == 1 else 2
    first_part = tool.query([f"t1#{long_line}"]).text
    assert f"`t1#{long_line}." in first_part
    assert body(tool.query(["t1#1.999999"]).text).startswith("[No column 999999 in line 1:")
    # the reference (no paging) still shows nothing of such a line
    plain = ContextTreeQuery(state, str(session_dir), SID)
    assert "`t1#" not in plain.query(["t1"]).text


def test_paging_refuses_a_part_of_an_ambiguous_id(session_dir: Path) -> None:
    st = PrunerState()
    st.add_batch([record("dup", "a\n" * 3000, 1), record("dup", "b\n" * 3000, 2)])
    tool = ContextTreeQuery(st, str(session_dir), SID, paging=True)
    assert NOT_FOUND in tool.query(["dup#2001"]).text
    assert body(tool.query(["dup@2#2001"]).text) == "b\n" * 1000


def test_truncate_head_untruncated() -> None:
    result = truncate_head("a\nb\n")
    assert result.content == "a\nb\n"
    assert not result.truncated
    assert result.truncated_by is None
    assert (result.total_lines, result.output_lines) == (2, 2)
    assert result.total_bytes == result.output_bytes == 4


# Pi 0.83's splitLinesForCounting: [] for "", else split("\n") less the empty piece after a
# final "\n". The pairs are (content, lines counted).
@pytest.mark.parametrize(
    ("content", "lines"),
    [("", 0), ("a", 1), ("a\n", 1), ("a\n\n", 2), ("\n", 1), ("a\nb", 2), ("a\nb\n", 2)],
)
def test_truncate_head_counts_lines_as_pi(content: str, lines: int) -> None:
    result = truncate_head(content)
    assert (result.total_lines, result.output_lines) == (lines, lines)
    assert (result.content, result.truncated, result.truncated_by) == (content, False, None)
    assert result.total_bytes == result.output_bytes == len(content)


def test_truncate_head_long_output_ending_in_a_newline_at_the_line_limit() -> None:
    exactly = "".join(f"{i}\n" for i in range(2000))  # 2000 lines, each ended by "\n"
    result = truncate_head(exactly)
    assert (result.truncated, result.total_lines, result.content) == (False, 2000, exactly)
    over = exactly + "2000\n"
    result = truncate_head(over)
    assert (result.truncated, result.truncated_by) == (True, "lines")
    assert (result.output_lines, result.total_lines) == (2000, 2001)
    assert result.content == exactly[:-1]  # the kept lines joined: no final newline
    assert result.output_bytes == len(exactly) - 1


def test_truncate_head_long_output_ending_in_a_newline_at_the_byte_limit() -> None:
    line = "x" * 99 + "\n"  # 100 bytes with its newline
    exactly = line * 512  # 51200 bytes = DEFAULT_MAX_BYTES, 512 lines
    result = truncate_head(exactly)
    assert (result.truncated, result.total_lines, result.total_bytes) == (False, 512, 51200)
    over = line * 600  # 60000 bytes, 600 lines
    result = truncate_head(over)
    assert (result.truncated, result.truncated_by) == (True, "bytes")
    # n lines joined take 99 n + (n - 1) bytes: 512 fit (51199), 513 would take 51299.
    assert (result.output_lines, result.total_lines) == (512, 600)
    assert (result.output_bytes, result.total_bytes) == (51199, 60000)
    assert result.content == ("x" * 99 + "\n") * 511 + "x" * 99


def test_truncate_head_by_lines_and_by_bytes() -> None:
    by_lines = truncate_head("1\n2\n3\n4", max_lines=2, max_bytes=100)
    assert (by_lines.content, by_lines.truncated_by, by_lines.output_lines) == ("1\n2", "lines", 2)
    assert by_lines.total_lines == 4
    # "\u00e9" is 2 UTF-8 bytes: "ab" + "\n\u00e9\u00e9" = 2 + 5 = 7 bytes; a third line won't fit.
    by_bytes = truncate_head("ab\n\u00e9\u00e9\ncd", max_lines=10, max_bytes=8)
    assert (by_bytes.content, by_bytes.truncated_by) == ("ab\n\u00e9\u00e9", "bytes")
    assert (by_bytes.output_lines, by_bytes.output_bytes, by_bytes.total_bytes) == (2, 7, 10)


def test_truncate_head_first_line_over_the_budget() -> None:
    result = truncate_head("\U0001f600" * 3 + "\nshort", max_bytes=11)
    assert result.content == ""
    assert result.truncated
    assert result.first_line_exceeds_limit
    assert (result.output_lines, result.total_lines, result.total_bytes) == (0, 2, 18)
    # A lone surrogate counts 3 bytes (as U+FFFD).
    assert truncate_head("\ud800" * 4 + "\nx", max_bytes=11).first_line_exceeds_limit


def test_malformed_records_do_not_break_the_call(session_dir: Path) -> None:
    st = PrunerState()
    st.add_batch([record("none", None, 1), record("num", 5, 2)])  # type: ignore[arg-type]
    st.add_batch([record("odd", "", 3, spillPath=str(session_dir / "x"), resultPreview=7)])
    text = run(st, ["none", "num", "odd"], str(session_dir))
    parts = text.split("\n\n---\n\n")
    assert parts[0].endswith("Turn: 0\n\n")
    assert parts[1].endswith("Turn: 0\n\n5")
    assert parts[2].endswith(f"Turn: 0\n\n{SPILL_MISSING}\n[Spill file not read: {OUTSIDE}]")


# ---------------------------------------------------------------------------------- CLI


def test_cli_query_prints_the_exact_tool_text(conformance_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pi_condense.cli import app

    vector_dir = conformance_dir / "replay" / "large-protect-spill"
    path = tmp_path / "session.jsonl"
    path.write_bytes(gzip.decompress((vector_dir / "session.jsonl.gz").read_bytes()))
    with tarfile.open(vector_dir / "blobs.tar.gz") as tar:
        safe: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp_path, **safe)
    recorded = json.loads((vector_dir / "meta.json").read_text())["options"]["sessionDir"]
    queries = json.loads(gzip.decompress((vector_dir / "query.json.gz").read_bytes()))["queries"]
    multi = next(q for q in queries if len(q["toolCallIds"]) > 1)
    spilled_key = "toolu_01XpKA2swvDXyiFQgRey5dKQ@1763682441261"  # the 43 KB blob
    spilled = next(q for q in queries if q["toolCallIds"] == [spilled_key])
    runner = CliRunner()
    for query in (multi, spilled):
        args = ["query", str(path), *query["toolCallIds"], "--recorded-session-dir", recorded]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert result.stdout_bytes == query["text"].encode("utf-8")
    as_json = runner.invoke(app, ["query", str(path), "nope", "--json"])
    assert json.loads(as_json.stdout) == {
        "content": [{"type": "text", "text": f"## toolRef: nope\n{NOT_FOUND}"}],
        "details": {"results": {}},
    }
    assert runner.invoke(app, ["query", str(path), "t1", "--leaf", "missing"]).exit_code == 2
    assert runner.invoke(app, ["query", str(tmp_path / "none.jsonl"), "t1"]).exit_code == 2


# ----------------------------------------------------------------------- images (2.11.2)
# The cases of pi-condense 2.11.2's src/query-tool.test.ts "context_tree_query image recovery".


def png(data: str) -> dict[str, Any]:
    return {"type": "image", "data": data, "mimeType": "image/png"}


def branch_with(*images: dict[str, Any]) -> list[dict[str, Any]]:
    content = [{"type": "text", "text": "Read image file [image/png]"}, *images]
    message = {"role": "toolResult", "toolCallId": "x", "content": content}
    return [{"type": "message", "message": message}]


def marker_text(data: str) -> str:
    return f"[image returned: image/png sha256:{image_digest(data)}]\nRead image file [image/png]"


def query_content(st: PrunerState, ids: list[str], branch: list[Any]) -> list[Any]:
    tool = ContextTreeQuery(st, "/nonexistent", SID, branch=lambda: branch)
    return tool.execute({"toolCallIds": ids}).content


def test_a_short_ref_returns_only_the_image_its_marker_names() -> None:
    st = PrunerState()
    st.add_batch([record("read_1", marker_text("AAAA"), 1150)])
    st.register_refs([{"shortId": "t1", "toolCallId": "read_1", "resultTimestamp": 1150}])
    content = query_content(st, ["t1"], branch_with(png("AAAA"), png("BBBB")))
    assert content[0]["type"] == "text"
    assert content[1:] == [png("AAAA")]
    assert query_content(st, ["read_1@1150"], branch_with(png("AAAA")))[1:] == [png("AAAA")]


def test_a_bare_alias_id_returns_its_originals_image() -> None:
    st = PrunerState()
    st.add_batch([record("read_1", marker_text("AAAA"), 1150)])
    st.register_duplicate("read_2@2150", "read_1@1150")
    assert query_content(st, ["read_2"], branch_with(png("AAAA")))[1:] == [png("AAAA")]


def test_no_marker_or_no_image_on_the_branch_gives_text_only() -> None:
    legacy = PrunerState()
    legacy.add_batch([record("read_1", "Read image file [image/png]")])
    assert len(query_content(legacy, ["read_1"], branch_with(png("AAAA")))) == 1
    off_branch = PrunerState()
    off_branch.add_batch([record("read_1", marker_text("AAAA"), 1150)])
    assert len(query_content(off_branch, ["read_1"], branch_with(png("BBBB")))) == 1
    pre_change_alias = PrunerState()
    pre_change_alias.add_batch([record("read_1", "Read image file [image/png]", 1150)])
    pre_change_alias.register_duplicate("read_2@2150", "read_1@1150")
    content = query_content(pre_change_alias, ["read_2"], branch_with(png("AAAA"), png("BBBB")))
    assert len(content) == 1
    # Without the branch (a host that cannot give it), text only as well.
    no_branch = ContextTreeQuery(off_branch, "/nonexistent", SID)
    assert len(no_branch.execute({"toolCallIds": ["read_1"]}).content) == 1


def test_the_registry_query_returns_the_image_from_the_session_branch(tmp_path: Path) -> None:
    image = png("QUJD" * 10)
    entries = [
        {
            "type": "session",
            "version": 3,
            "id": SID,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "cwd": "/w",
        },
        {
            "type": "message",
            "id": "a1",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "r1", "name": "read", "arguments": {}}],
                "timestamp": 1,
            },
        },
        {
            "type": "message",
            "id": "a2",
            "parentId": "a1",
            "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {
                "role": "toolResult",
                "toolCallId": "r1",
                "toolName": "read",
                "content": [{"type": "text", "text": "Read image file [image/png]"}, image],
                "isError": False,
                "timestamp": 2,
            },
        },
        {
            "type": "custom",
            "customType": "context-prune-index",
            "id": "a3",
            "parentId": "a2",
            "timestamp": "2026-01-01T00:00:03.000Z",
            "data": {"toolCalls": [record("r1", marker_text(image["data"]), 2)]},
        },
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    tool = condense_tools(str(path))["context_tree_query"]
    assert tool.call({"toolCallIds": ["r1@2"]}).content[1:] == [image]
