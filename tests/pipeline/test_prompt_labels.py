"""Summarizer prompts (spec 05 section 13) and label rewriting / footer (section 14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pi_condense.capture import CapturedBatch, rescan_branch
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.summarize.labels import refs_footer, substitute_inline_refs, summary_details
from pi_condense.summarize.prompt import (
    RANGE_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    batch_prompt,
    range_prompt,
    serialize_batch,
    utf16_slice,
)
from support.agent import read_gz


def call(name: str, args: Any, text: str, is_error: bool = False) -> dict[str, Any]:
    return {
        "toolCallId": name + "_1",
        "toolName": name,
        "args": args,
        "resultText": text,
        "isError": is_error,
    }


def refs(n: int) -> list[dict[str, Any]]:
    return [{"shortId": f"t{i}", "toolCallId": f"c{i}"} for i in range(1, n + 1)]


# ---------------------------------------------------------------------------- prompts


def test_system_prompt_is_eleven_lines_without_trailing_newline() -> None:
    lines = SYSTEM_PROMPT.split("\n")
    assert len(lines) == 11
    # pi-condense 2.11.2's src/summarizer.ts, the image paragraph (its summarizer test looks
    # for "means the tool returned an image you cannot see").
    assert lines[8] == (
        "A result line of the form [image returned: <type> sha256:<hash>] means the tool "
        "returned an image you cannot see: state that an image was returned, and never describe "
        "or guess its content."
    )
    assert lines[0] == "You are summarizing a batch of tool calls made by an AI coding assistant."
    assert lines[-1].endswith("if you skip a tool, skip its label too.")
    assert RANGE_SYSTEM_PROMPT.count("\n") == 4
    assert "`t12` or `b3`" in RANGE_SYSTEM_PROMPT


def test_serialization_vector_from_the_spec() -> None:
    batch = CapturedBatch(
        0, 0, "hi", [call("read", {"path": "a"}, "ok"), call("bash", {}, "e", is_error=True)]
    )
    assert serialize_batch(batch) == (
        'Assistant said: hi\n\n[[1:read]] Tool: read({\n  "path": "a"\n})\nResult (OK): ok'
        "\n---\n[[2:bash]] Tool: bash({})\nResult (ERROR): e"
    )
    assert batch_prompt(batch) == (
        SYSTEM_PROMPT + "\n\n<tool-call-batch>\n" + serialize_batch(batch) + "\n</tool-call-batch>"
    )


def test_serialization_without_assistant_text_numbers_calls_contiguously() -> None:
    batch = CapturedBatch(0, 0, "", [call("a", {}, "1"), call("b", {}, "2"), call("c", {}, "3")])
    text = serialize_batch(batch)
    assert text.startswith("[[1:a]] Tool: a({})")
    assert "[[2:b]] Tool: b(" in text
    assert "[[3:c]] Tool: c(" in text


def test_long_results_are_cut_at_2000_utf16_units() -> None:
    text = "x" * 1999 + "\U0001f600" + "tail"
    batch = CapturedBatch(0, 0, "", [call("read", {}, text)])
    out = serialize_batch(batch)
    # 1999 + 2 (pair) + 4 = 2005 units: the cut keeps 1999 x and the high surrogate only.
    assert out.endswith("x" * 1999 + "\ud83d ...[5 chars truncated]")
    assert utf16_slice("a\U0001f600b", 0, 3) == "a\U0001f600"


def test_range_prompt_wraps_the_joined_summaries() -> None:
    assert range_prompt(["- a", "- b"]) == (
        RANGE_SYSTEM_PROMPT + "\n\n<sub-task-summaries>\n- a\n\n- b\n</sub-task-summaries>"
    )
    assert range_prompt("- a\n\n- b") == range_prompt(["- a", "- b"])


def test_first_batch_prompt_of_the_vector(conformance_dir: Path) -> None:
    """Rescan the vector session up to its first summary: the batch prompt must be the one
    the reference sent."""
    root = conformance_dir / "replay" / "large-default"
    lines = read_gz(root / "session.jsonl.gz").decode("utf-8").splitlines()
    first_summary = next(i for i, line in enumerate(lines) if "context-prune-summary" in line)
    session = SessionFile.parse("\n".join(lines[:first_summary]) + "\n")
    batches = rescan_branch(session.branch(), PrunerState(), lambda n, a: False, lambda: 0)
    calls = [json.loads(line) for line in read_gz(root / "summarizer.jsonl.gz").splitlines()]
    assert batch_prompt(batches[0]) == calls[0]["prompt"]
    assert batch_prompt(batches[1]) == calls[1]["prompt"]
    ranged = next(c for c in calls if c["kind"] == "range")
    assert ranged["prompt"].startswith(RANGE_SYSTEM_PROMPT + "\n\n<sub-task-summaries>\n")
    assert ranged["prompt"].endswith("\n</sub-task-summaries>")


# ---------------------------------------------------------------------------- labels


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("- [[1:read]] Read a.ts", "- `t1` Read a.ts"),
        ("- [[2:read]] x", "- x"),  # name mismatch (tool 2 is bash)
        ("* [[2:Bash ]] z", "* `t2` z"),  # trimmed, case-insensitive
        ("  [[3:read]] q", "  q"),  # out of range
        ("- [[0:read]] q", "- q"),  # N = 0
        ("- **[[1:read]]** x", "- **** x"),
        ("1. [[1:read]] did x", "1. did x"),
        ("> [[1:read]] quoted", "> quoted"),
        ("- [[1:read]]", "- `t1` "),
        ("- [[1:read]]    spaced", "- `t1` spaced"),
        ("see [[2:bash]] here", "see here"),
        ("argv[1] and a[[b]] stay", "argv[1] and a[[b]] stay"),
        ("no label at all", "no label at all"),
        ("- [[\u0661:read]] x", "- [[\u0661:read]] x"),  # not an ASCII digit
        ("\ufeff- [[1:read]] bom", "\ufeff- `t1` bom"),  # U+FEFF is JS whitespace
        ("\x1c- [[1:read]] fs", "\x1c- fs"),  # U+001C is not: no anchored match
    ],
)
def test_substitute_inline_refs(line: str, expected: str) -> None:
    assert substitute_inline_refs(line, refs(2), ["read", "bash"]) == expected


def test_duplicate_labels_on_separate_lines_are_both_rewritten() -> None:
    text = "- [[1:read]] a\n- [[1:read]] b\nplain"
    assert substitute_inline_refs(text, refs(1), ["read"]) == "- `t1` a\n- `t1` b\nplain"


def test_fenced_lines_are_left_alone() -> None:
    text = "- [[1:read]] a\n```\n[[1:read]] in fence\n  [[1:read]] again\n```\n[[1:read]] out"
    assert substitute_inline_refs(text, refs(1), ["read"]) == (
        "- `t1` a\n```\n[[1:read]] in fence\n  [[1:read]] again\n```\n`t1` out"
    )


def test_dotted_names_validate_and_mismatches_strip() -> None:
    names = ["mcp.github.search", "fs.read"]
    assert substitute_inline_refs("- [[1:MCP.github.search]] x", refs(2), names) == "- `t1` x"
    assert substitute_inline_refs("- [[2:fs.write]] y", refs(2), names) == "- y"


def test_footer_exact_text_and_composition() -> None:
    footer = refs_footer(refs(2))
    assert footer == (
        "\n\n---\n**Summarized tool refs**: `t1`, `t2`\n"
        "Use `context_tree_query` with these refs to retrieve the original full outputs."
    )
    body = substitute_inline_refs("- [[1:read]] a\n- [[2:bash]] b", refs(2), ["read", "bash"])
    full = body + footer
    assert full.count("`t1`") == 2
    assert full.count("`t2`") == 2


def test_summary_details_key_order() -> None:
    ref = [{"shortId": "t1", "toolCallId": "a", "resultTimestamp": 5}]
    details = summary_details(ref, ["read"], 3, 100)
    assert list(details) == ["toolCallRefs", "toolNames", "turnIndex", "timestamp"]
    assert details["toolCallRefs"] == ref
    assert details["toolCallRefs"][0] is not ref[0]
