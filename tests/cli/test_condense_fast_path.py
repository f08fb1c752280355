"""`pi-condense condense` with plain arguments runs without typer (``cli._main.fast_condense``):
the same outputs, errors and exit codes as through typer, which still parses everything else.

Each case runs the real command twice as a subprocess: as given (the fast path) and with
``--`` before SESSION, which the fast path leaves to typer (click reads it as the end of the
options, so the command is the same).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pi_condense
from pi_condense.cli._main import fast_condense

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]
EXAMPLE = Path(pi_condense.__file__).parent / "examples" / "example-session.jsonl"


def _one_call(folder: Path) -> Path:
    """The example's header, first user message and first assistant reply."""
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    kept = [lines[0]]
    for line in lines[1:]:
        kept.append(line)
        entry = json.loads(line)
        if entry.get("type") == "message" and entry["message"].get("role") == "assistant":
            break
    path = folder / "one-call.jsonl"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path


def _run(args: list[str], cwd: Path) -> tuple[int, str, str]:
    proc = subprocess.run(
        [*CLI, "condense", *args], capture_output=True, cwd=cwd, timeout=120, text=True
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(
    ("options", "code"),
    [
        (["-o", "{tmp}/out.jsonl", "--force", "--json"], 0),
        (["--out={tmp}/out.jsonl", "--force", "--json", "-q"], 0),
        (["-o", "{tmp}/out.jsonl", "--force", "--quiet"], 0),
        (["-o", "{tmp}/out.jsonl", "--force", "--json", "--config", "{tmp}/config.json"], 0),
        (["-o", "{tmp}/exists.jsonl", "--json"], 2),
        (["-o", "{tmp}/out.jsonl", "--force", "--compat", "nonsense"], 2),
        (["-o", "{tmp}/out.jsonl", "--force", "--leaf", "no-such-id"], 2),
        (["-o", "{tmp}/out.jsonl", "--in-place"], 2),
        (["-o", "{tmp}/out.jsonl", "--force", "--config", "{tmp}/bad.json"], 2),
        (["-o", "{tmp}/out.jsonl", "--force", "--summarizer", "nope:model"], 2),
        (["-o", "{tmp}/out.jsonl", "--force", "--base-url", "http://127.0.0.1:9/v1"], 2),
    ],
    ids=[
        "json",
        "equals-and-quiet",
        "table",
        "config",
        "exists",
        "bad-compat",
        "bad-leaf",
        "out-and-in-place",
        "bad-config",
        "bad-summarizer",
        "base-url-without-api",
    ],
)
def test_the_fast_path_does_what_typer_does(options: list[str], code: int, tmp_path: Path) -> None:
    session = _one_call(tmp_path)
    (tmp_path / "exists.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "config.json").write_text('{"enabled": true, "minBatchChars": 10}\n')
    (tmp_path / "bad.json").write_text("[1]\n")
    args = [option.replace("{tmp}", str(tmp_path)) for option in options]
    fast = _run([*args, str(session)], tmp_path)
    typer_run = _run([*args, "--", str(session)], tmp_path)
    assert fast == typer_run
    assert fast[0] == code, fast[2]
    if "--json" in args and code == 0:
        assert json.loads(fast[1])["llmCalls"] == 1
    if code == 2:
        assert fast[2].startswith("pi-condense: "), fast[2]
        assert "Traceback" not in fast[2]


def test_a_missing_session_is_the_same_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.jsonl")
    fast = _run(["--json", missing], tmp_path)
    assert fast == _run(["--json", "--", missing], tmp_path)
    assert fast[0] == 2
    reason = "cannot read session file: No such file or directory"
    assert fast[2] == f"pi-condense: {missing}: {reason}\n"


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-h"],
        ["s.jsonl", "--no-such-option"],
        ["s.jsonl", "other.jsonl"],
        ["-"],
        ["--", "s.jsonl"],
        ["s.jsonl", "-o"],
        ["s.jsonl", "-o", "-x"],
        ["s.jsonl", "-qo", "x"],
        ["s.jsonl", "-o=x"],
        ["s.jsonl", "--json=1"],
        ["s.jsonl", "--out", ""],
        ["s\udcff.jsonl"],
    ],
)
def test_what_the_fast_path_leaves_to_typer(args: list[str]) -> None:
    assert fast_condense(args) is None


def test_the_fast_path_parameters() -> None:
    params = fast_condense(
        ["--json", "s.jsonl", "-o", "o.jsonl", "--config=c.json", "-q", "--leaf", "abc"]
    )
    assert params == {
        "session_path": Path("s.jsonl"),
        "example": False,
        "out_file": Path("o.jsonl"),
        "in_place": False,
        "force": False,
        "config_file": Path("c.json"),
        "summarizer_name": None,
        "base_url": None,
        "compat": None,
        "leaf": "abc",
        "as_json": True,
        "quiet": True,
        "strict": False,
    }
    assert fast_condense(["--example", "--out", "a", "--out", "b"]) == {
        **params,
        "session_path": None,
        "example": True,
        "out_file": Path("b"),
        "config_file": None,
        "leaf": None,
        "as_json": False,
        "quiet": False,
    }
