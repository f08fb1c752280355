"""What a new user trips over on the command line: exit codes of refused tool calls, clearly
labelled sizes, reruns of the quickstart, error wording, help rendering, dry-run wording and
output-directory refusals. Real subprocesses on prefixes of the bundled example session."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT
from pi_condense.cli._common import EXAMPLE_SESSION
from pi_condense.cli.condense_cmd import example_folder
from pi_condense.js import json as jsjson
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.tools.query import ContextTreeQuery

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]


def run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PI_CODING_AGENT_DIR": str(cwd / "agent"), "COLUMNS": "200"}
    environ.update(env)
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, cwd=cwd, env=environ, timeout=300
    )


LEAF = SessionFile.load(EXAMPLE_SESSION).branch()[400]["id"]
"""The 401st entry of the example: a prefix with a few closed chains (fast to condense)."""


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's first 401 entries, condensed."""
    root = tmp_path_factory.mktemp("prefix")
    target = root / "prefix.jsonl"
    proc = run("condense", str(EXAMPLE_SESSION), "--leaf", LEAF, "-o", str(target), "-q", cwd=root)
    assert proc.returncode == 0, proc.stderr
    return target


# ------------------------------------------------------------------ refused tool calls


def test_query_of_an_unknown_ref_prints_the_answer_and_exits_2(
    prefix: Path, tmp_path: Path
) -> None:
    session = SessionFile.load(prefix)
    tool = ContextTreeQuery(PrunerState.from_session(session), str(prefix.parent), "x")
    proc = run("query", str(prefix), "t1", "t9999", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == tool.query(["t1", "t9999"]).text
    assert proc.stderr == "pi-condense: not in the index: t9999\n"
    ok = run("query", str(prefix), "t1", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("## toolRef: t1\n")


def test_recovery_tools_exit_2_when_nothing_is_found(prefix: Path, tmp_path: Path) -> None:
    missing = run("recover", str(prefix), "read", "deadbeef", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stdout.startswith("Entry deadbeef was not found in scope active.")
    assert missing.stderr == "pi-condense: entry deadbeef not found\n"
    empty = run("recover", str(prefix), "search", "  ", cwd=tmp_path)
    assert empty.returncode == 2
    assert "must not be empty" in empty.stdout
    found = run("recover", str(prefix), "search", "theme", "--limit", "1", cwd=tmp_path)
    assert found.returncode == 0, found.stderr


def long_output_session(path: Path, lines: int) -> None:
    session = SessionFile.create(path, "/repo", session_id="s-long")
    output = "".join(f"line {i}\n" for i in range(lines))
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "read it"}], "timestamp": 1000},
        {
            "role": "assistant",
            "stopReason": "toolUse",
            "timestamp": 2000,
            "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}],
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "isError": False,
            "timestamp": 2100,
            "content": [{"type": "text", "text": output}],
        },
        {
            "role": "assistant",
            "stopReason": "stop",
            "timestamp": 3000,
            "content": [{"type": "text", "text": "done"}],
        },
    ]
    for message in messages:
        session.append_message(message)


def test_query_full_prints_the_whole_output(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    long_output_session(path, 3000)
    config = tmp_path / "on.json"
    config.write_text('{"enabled": true}')
    flushed = run("flush", str(path), "--config", str(config), cwd=tmp_path)
    assert flushed.returncode == 0, flushed.stderr
    cut = run("query", str(path), "t1", cwd=tmp_path)
    assert cut.returncode == 0, cut.stderr
    assert "line 1999\n" in cut.stdout
    assert "line 2000\n" not in cut.stdout
    # 3000 lines ending in "\n": Pi 0.83 drops the empty piece after the last newline (spec 06 A.3)
    assert cut.stdout.endswith("[Output truncated: 2000/3000 lines shown]")
    full = run("query", str(path), "t1", "--full", cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    body = full.stdout.split("Turn: 0\n\n", 1)[1]
    assert body == "".join(f"line {i}\n" for i in range(3000))


# -------------------------------------------------------------------------- session info


def test_session_info_labels_raw_and_rendered_sizes(prefix: Path, tmp_path: Path) -> None:
    proc = run("session", "info", str(prefix), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    raw = SessionFile.load(EXAMPLE_SESSION).build_context(LEAF).messages
    assert info["rawContextChars"] == jsjson.length(raw)
    assert info["contextChars"] > info["rawContextChars"] > info["renderedChars"]
    summaries = sum(
        1 for e in SessionFile.load(prefix).branch() if e.get("type") == "custom_message"
    )
    assert info["prunerMessages"] == summaries > 0
    table = run("session", "info", str(prefix), cwd=tmp_path).stdout
    assert re.search(rf"context raw +│ {info['rawContextChars']:,} chars", table)
    assert re.search(rf"context rendered +│ {info['renderedChars']:,} chars", table)
    assert "% smaller" in table


# --------------------------------------------------------------------- condense --example


def test_condense_example_can_be_run_twice(tmp_path: Path) -> None:
    first = run("condense", "--example", "--leaf", LEAF, "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("Condensed -> example-session.condensed.jsonl")
    output = tmp_path / "example-session.condensed.jsonl"
    again = run("condense", "--example", "--leaf", LEAF, "-q", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["output"] == "example-session.condensed.jsonl"
    assert output.is_file()
    # A file of that name that is not an earlier example output is kept.
    output.write_text('{"type":"session","id":"mine"}\n')
    kept = run("condense", "--example", "--leaf", LEAF, "-q", cwd=tmp_path)
    assert kept.returncode == 2
    assert kept.stderr == (
        "pi-condense: example-session.condensed.jsonl exists (use --force to overwrite it)\n"
    )
    assert output.read_text() == '{"type":"session","id":"mine"}\n'


def test_condense_example_in_a_clone_writes_beside_the_docs_examples(tmp_path: Path) -> None:
    """The quickstart runs `condense --example` at the top of a clone: the file lands there,
    where the docs' examples read it, and the clone's .gitignore keeps the checkout clean."""
    clone = tmp_path / "pi-condense"
    (clone / ".git").mkdir(parents=True)
    (clone / "rust" / "core").mkdir(parents=True)
    (clone / "pyproject.toml").write_text('[project]\nname = "pi-condense"\n')
    cache = str(tmp_path / "cache")
    proc = run("condense", "--example", "--leaf", LEAF, "-q", cwd=clone, XDG_CACHE_HOME=cache)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Condensed -> example-session.condensed.jsonl")
    assert (clone / "example-session.condensed.jsonl").is_file()
    assert example_folder() == Path()
    ignored = (REPO_ROOT / ".gitignore").read_text("utf-8").splitlines()
    assert "example-session.condensed.jsonl" in ignored


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "args",
    [
        ["condense", "{missing}"],
        ["compact", "{missing}"],
        ["render", "{missing}"],
        ["status", "{missing}"],
        ["session", "info", "{missing}"],
        ["query", "{missing}", "t1"],
        ["condense", str(EXAMPLE_SESSION), "--config", "{missing}"],
    ],
)
def test_errors_name_the_path_once_without_errno(args: list[str], tmp_path: Path) -> None:
    missing = "nope.jsonl"
    proc = run(*[a.replace("{missing}", missing) for a in args], cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pi-condense: ")
    assert lines[0].count("nope.jsonl") == 1
    assert lines[0].endswith(": No such file or directory")
    assert "Errno" not in proc.stderr


NOT_A_HEADER = (
    'not a Pi session file: line 1: the first entry is not a session header ({"type":"session",'
    '"id":"..."})'
)


@pytest.mark.parametrize(
    "command",
    [
        ["render"],
        ["condense"],
        ["session", "info"],
        ["compact"],
        ["status"],
        ["session", "context"],
    ],
)
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"role":"user"}\n', NOT_A_HEADER),
        (
            "hello\n",
            "not a Pi session file: no valid JSON line (line 1: invalid JSON, skipped: "
            "Expecting value: line 1 column 1 (char 0))",
        ),
    ],
)
def test_a_non_session_file_is_named_once(
    command: list[str], content: str, reason: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text(content, encoding="utf-8")
    before = sorted(tmp_path.iterdir())
    proc = run(*command, str(notes), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"pi-condense: {notes}: {reason}\n"
    assert sorted(tmp_path.iterdir()) == before  # nothing written beside it


# ------------------------------------------------------------------------------ help


COMMANDS = [
    [],
    ["condense"],
    ["replay"],
    ["compact"],
    ["query"],
    ["render"],
    ["status"],
    ["stats"],
    ["tree"],
    ["flush"],
    ["config"],
    ["config", "set"],
    ["session", "info"],
    ["recover"],
    ["recover", "s.jsonl", "search"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "root")
def test_help_renders_cleanly(command: list[str], tmp_path: Path) -> None:
    proc = run(*command, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "<bool>" not in text
    assert not re.search(r"\{[A-Z_]+\}", text), text
    assert "Usage: " in text


def test_help_paragraphs_are_not_broken_mid_sentence(tmp_path: Path) -> None:
    text = run("condense", "--help", cwd=tmp_path).stdout
    sentence = (
        "The session's branch (the current one, or --leaf's) is replayed through the pruner "
        "and written with the pruner's entries; other branches are not carried over."
    )
    assert sentence in text


# -------------------------------------------------------------------- compact, replay


def test_compact_dry_run_speaks_in_the_conditional(prefix: Path, tmp_path: Path) -> None:
    dry = run("compact", str(prefix), cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "chains that would be compressed" in dry.stdout
    match = re.search(
        r"^pruner: would compact (\d+) chains? \(([^)]*)\), reclaiming ~(\d+) tokens$",
        dry.stdout,
        re.M,
    )
    assert match, dry.stdout
    assert "compacted" not in dry.stdout
    report = json.loads(run("compact", str(prefix), "--json", cwd=tmp_path).stdout)
    assert match.group(2) == ", ".join(report["compacted"])
    assert int(match.group(3)) == report["reclaimedTokens"]
    copy = tmp_path / "copy.jsonl"
    real = run("compact", str(prefix), "--out", str(copy), cwd=tmp_path)
    assert real.returncode == 0, real.stderr
    assert f"pruner: compacted {match.group(1)} chain" in real.stdout


def test_replay_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"
    leaf = SessionFile.load(EXAMPLE_SESSION).branch()[60]["id"]
    first = run("replay", str(EXAMPLE_SESSION), "--leaf", leaf, "-o", str(out), "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    written = sorted(p.name for p in out.iterdir())
    assert "session.jsonl" in written
    again = run("replay", str(EXAMPLE_SESSION), "--leaf", leaf, "-o", str(out), "-q", cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr == (
        f"pi-condense: {out}: directory is not empty (use --force to write into it)\n"
    )
    forced = run(
        "replay",
        str(EXAMPLE_SESSION),
        "--leaf",
        leaf,
        "-o",
        str(out),
        "-q",
        "--force",
        cwd=tmp_path,
    )
    assert forced.returncode == 0, forced.stderr
    assert sorted(p.name for p in out.iterdir()) == written


@pytest.mark.parametrize(
    "args",
    [
        ["query", "{s}", "t1"],
        ["stats", "{s}"],
        ["tree", "{s}"],
        ["compact", "{s}"],
        ["recover", "{s}", "search", "theme"],
    ],
)
def test_gzipped_sessions_read_like_plain_ones(
    args: list[str], prefix: Path, tmp_path: Path
) -> None:
    packed = tmp_path / "prefix.jsonl.gz"
    packed.write_bytes(gzip.compress(prefix.read_bytes()))
    plain = run(*[a.replace("{s}", str(prefix)) for a in args], cwd=tmp_path)
    zipped = run(*[a.replace("{s}", str(packed)) for a in args], cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert zipped.returncode == 0, zipped.stderr
    assert zipped.stdout == plain.stdout


def test_session_info_reads_gzipped_sessions(prefix: Path, tmp_path: Path) -> None:
    packed = tmp_path / "prefix.jsonl.gz"
    packed.write_bytes(gzip.compress(prefix.read_bytes()))
    plain = json.loads(run("session", "info", str(prefix), "--json", cwd=tmp_path).stdout)
    zipped = json.loads(run("session", "info", str(packed), "--json", cwd=tmp_path).stdout)
    for key in ("file", "sizeBytes"):
        plain.pop(key)
        zipped.pop(key)
    assert zipped == plain
