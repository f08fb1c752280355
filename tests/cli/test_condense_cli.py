"""`pi-condense condense` (and the `replay` command's plumbing), run as real subprocesses.

The two real Pi sessions are condensed once with the embedded default summarizer (offline);
small synthetic sessions cover the file handling (new file, in-place with backup, refusals),
config files and spill sidecars.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pty
import re
import resource
import select
import signal
import struct
import subprocess
import termios
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import shared_root
from pi_condense.cli._common import EXAMPLE_SESSION
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import render
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from support.cli import CLI, env, run
from support.sessions import small_session

FIXTURES = shared_root() / "fixtures" / "pi-sessions"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cold_chars(path: Path, config: Config) -> tuple[int, int]:
    """(context chars, rendered chars) of a session file as a fresh load sees it."""
    session = SessionFile.load(path)
    messages = session.build_context().messages
    result = render(messages, PrunerState.from_session(session), config)
    before = jsjson.length(messages)
    return before, result.after_chars if result.pruned else before


def messages_of(path: Path) -> list[Any]:
    session = SessionFile.load(path)
    return [e["message"] for e in session.branch() if e.get("type") == "message"]


# -------------------------------------------------------------------------- real sessions


@dataclass
class Condensed:
    source: Path
    output: Path
    original_sha: str
    proc: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def condensed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Condensed]:
    """Both fixtures condensed with the default summarizer, concurrently: large-session as the
    bundled example (``--example``, from a scratch working directory), before-compaction as a
    copy of the file."""
    root = tmp_path_factory.mktemp("real")
    agent = root / "agent"
    copy = root / "before-compaction.jsonl"
    copy.write_bytes((FIXTURES / "before-compaction.jsonl").read_bytes())
    jobs: dict[str, tuple[Path, subprocess.Popen[str], str]] = {}
    for name, source, args in (
        ("large-session", EXAMPLE_SESSION, ["--example"]),
        ("before-compaction", copy, [str(copy), "--json"]),
    ):
        proc = subprocess.Popen(
            [*CLI, "condense", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=env(agent),
            cwd=root,
        )
        jobs[name] = (source, proc, sha(source))
    results: dict[str, Condensed] = {}
    for name, (source, proc, digest) in jobs.items():
        out, err = proc.communicate(timeout=600)
        completed = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        stem = "example-session" if name == "large-session" else name
        results[name] = Condensed(source, root / f"{stem}.condensed.jsonl", digest, completed)
    return results


DEFAULTS = Config.from_settings_dict({"enabled": True})


@pytest.mark.parametrize("name", ["large-session", "before-compaction"])
def test_real_session_condenses_offline(condensed: dict[str, Condensed], name: str) -> None:
    job = condensed[name]
    assert job.proc.returncode == 0, job.proc.stderr[-3000:]
    assert job.output.is_file()
    assert sha(job.source) == job.original_sha  # the input is never touched
    # every message of the source is kept, in order; pruning lives in added entries
    assert messages_of(job.output) == messages_of(job.source)
    raw, _ = cold_chars(job.source, DEFAULTS)
    before, after = cold_chars(job.output, DEFAULTS)
    assert before > raw  # the summaries are in the condensed session's context...
    assert after * 2 < raw  # ...and its render is less than half the raw context


def test_example_report_table_without_progress_when_piped(
    condensed: dict[str, Condensed],
) -> None:
    job = condensed["large-session"]
    assert job.proc.stderr == ""  # stdout is not a terminal: no progress bar
    # the bundled example is the large-session fixture; the output went to the working
    # directory, nothing was written beside the example in the package
    assert sha(EXAMPLE_SESSION) == sha(FIXTURES / "large-session.jsonl")
    written = [p.name for p in EXAMPLE_SESSION.parent.iterdir() if p.suffix != ".md"]
    assert written == ["example-session.jsonl"]
    out = job.proc.stdout
    assert "Condensed -> example-session.condensed.jsonl" in out
    for row in (
        "LLM calls replayed",
        "batches summarized",
        "batches deduped / trivial / oversized",
        "outputs spilled",
        "chains compressed",
        "chars per call (avg)",
        "context on reload",
        "summarizer tokens (in / out)",
        "summarizer cost",
    ):
        assert row in out
    assert "453" in out  # one LLM call per assistant message of the fixture
    assert "$0.0000" in out


def test_before_compaction_json_report(condensed: dict[str, Condensed]) -> None:
    job = condensed["before-compaction"]
    report = json.loads(job.proc.stdout)
    entries = SessionFile.load(job.output).entries
    kinds = [e.get("customType") for e in entries]
    assert report["output"] == str(job.output)
    assert report["llmCalls"] == 484  # assistant messages in the fixture
    assert report["batches"]["summarized"] == kinds.count("context-prune-summary") > 0
    assert report["chains"] == kinds.count("context-prune-chain") > 0
    assert report["dedupedToolCalls"] == kinds.count("context-prune-dedup-alias")
    assert report["summarizerCalls"] >= report["batches"]["summarized"]
    assert report["batches"]["oversized"] == 0
    raw, _ = cold_chars(job.source, DEFAULTS)
    _, after = cold_chars(job.output, DEFAULTS)
    assert report["context"] == {"rawChars": raw, "condensedChars": after}
    per_call = report["perCall"]
    assert per_call["afterChars"] < per_call["beforeChars"]
    assert report["summarizer"] == {"inputTokens": 0, "outputTokens": 0, "cost": 0}
    assert report["handlerErrors"] == []
    # both compactions were re-applied to the condensed session
    assert [e["type"] for e in entries].count("compaction") == 2
    assert "condensing" not in job.proc.stderr  # --json: no progress bar


# ------------------------------------------------------------------------ small sessions


def test_in_place_keeps_a_backup(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl")
    original = source.read_bytes()
    proc = run(["condense", str(source), "--in-place", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    backup = tmp_path / "s.jsonl.bak"
    assert backup.read_bytes() == original
    report = json.loads(proc.stdout)
    assert report["output"] == str(source)
    assert report["backup"] == str(backup)
    assert report["batches"]["summarized"] == 6
    assert messages_of(source) == messages_of(backup)
    assert source.read_bytes() != original
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # a second in-place run finds it done: skipped, the backup never overwritten
    for extra in ([], ["--force"]):
        again = run(["condense", str(source), "--in-place", *extra], tmp_path)
        assert again.returncode == 0, again.stderr
        assert "already condensed in place" in again.stderr
        assert backup.read_bytes() == original


def test_refusals(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl", prompts=1)
    both = run(["condense", str(source), "--in-place", "--out", str(tmp_path / "x")], tmp_path)
    assert both.returncode == 2
    assert "exclusive" in both.stderr
    (tmp_path / "s.condensed.jsonl").write_text("keep me", encoding="utf-8")
    exists = run(["condense", str(source)], tmp_path)
    assert exists.returncode == 2
    assert (tmp_path / "s.condensed.jsonl").read_text(encoding="utf-8") == "keep me"
    unknown = run(
        ["condense", str(source), "--out", str(tmp_path / "o.jsonl"), "--summarizer", "nope"],
        tmp_path,
    )
    assert unknown.returncode == 2
    assert "nope" in unknown.stderr
    assert not (tmp_path / "o.jsonl").exists()
    missing = run(["condense", str(tmp_path / "absent.jsonl")], tmp_path)
    assert missing.returncode == 2
    bad_leaf = run(["condense", str(source), "--leaf", "zzz", "--force"], tmp_path)
    assert bad_leaf.returncode == 2
    assert "zzz" in bad_leaf.stderr


def test_config_file_and_spill_sidecars_beside_the_output(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl")
    settings = tmp_path / "settings.json"
    block = {"spillThreshold": 2000, "chainCompression": {"enabled": False}}
    settings.write_text(json.dumps({"contextPrune": block}), encoding="utf-8")
    out_dir = tmp_path / "out"
    target = out_dir / "condensed.jsonl"
    proc = run(
        ["condense", str(source), "--out", str(target), "--config", str(settings), "--json"],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["chains"] == 0
    assert report["spilled"] == 6
    blobs = sorted((out_dir / "small-1-blobs").iterdir())
    assert [b.name for b in blobs] == [
        f"call{p}_{1735689600000 + (4 * p + 3) * 1000}.txt" for p in range(6)
    ]
    first = messages_of(source)[2]["content"][0]["text"]
    assert blobs[0].read_text(encoding="utf-8") == first


def test_settings_of_the_agent_dir_apply_without_config(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl")
    (tmp_path / "settings.json").write_text(
        json.dumps({"contextPrune": {"enabled": False, "minBatchChars": 100000}}), encoding="utf-8"
    )
    proc = run(["condense", str(source), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    # condense always prunes (enabled is forced on); the other settings are the user's
    assert report["batches"]["summarized"] == 0
    assert report["batches"]["trivial"] == 6


def test_replay_command_writes_the_vector_files(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl", prompts=2)
    out = tmp_path / "vec"
    proc = run(["replay", str(source), "--out", str(out), "--deterministic", "--quiet"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "contexts.jsonl",
        "meta.json",
        "session.jsonl",
        "summarizer.jsonl",
    ]
    session = SessionFile.load(out / "session.jsonl")
    assert [e["id"] for e in session.entries][:3] == ["00000001", "00000002", "00000003"]
    calls = [
        json.loads(line) for line in (out / "summarizer.jsonl").read_text("utf-8").splitlines()
    ]
    assert [c["kind"] for c in calls] == ["batch", "batch"]
    assert calls[0]["output"].startswith("- [[1:read]] read OK: line 0 of file 0: ")
    meta = json.loads((out / "meta.json").read_text("utf-8"))
    assert meta["counts"]["llmCalls"] == 4
    assert "replayed 4 LLM calls" in proc.stderr


# --------------------------------------------------------------------- terminal, arguments

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def run_on_terminal(args: list[str], agent_dir: Path) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal; (exit code, text without ANSI)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    environ = env(agent_dir)
    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS"):
        environ.pop(name, None)
    environ["TERM"] = "xterm-256color"
    proc = subprocess.Popen(
        [*CLI, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=environ
    )
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    code = proc.wait(timeout=600)
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def test_progress_bar_on_a_terminal_and_quiet(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl")
    entries = len(source.read_text("utf-8").splitlines()) - 1  # all but the header
    code, text = run_on_terminal(["condense", str(source)], tmp_path)
    assert code == 0, text
    assert "condensing" in text
    assert f"{entries}/{entries} entries" in text
    assert "Condensed -> " in text
    quiet, text = run_on_terminal(
        ["condense", str(source), "-q", "--out", str(tmp_path / "q.jsonl")], tmp_path
    )
    assert quiet == 0, text
    assert "condensing" not in text
    assert "entries" not in text.split("Condensed -> ")[0]
    assert "Condensed -> " in text
    assert (tmp_path / "q.jsonl").is_file()


def test_example_argument_refusals(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl", prompts=1)
    both = run(["condense", str(source), "--example"], tmp_path)
    assert both.returncode == 2
    assert "not both" in both.stderr
    in_place = run(["condense", "--example", "--in-place"], tmp_path)
    assert in_place.returncode == 2
    assert "--in-place" in in_place.stderr
    neither = run(["condense"], tmp_path)
    assert neither.returncode == 2
    assert "--example" in neither.stderr


def test_load_warnings_are_reported_and_strict_exits_1(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl", prompts=2)
    lines = source.read_text("utf-8").splitlines()
    lines.insert(3, "{not json")  # becomes line 4 of the file
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run(["condense", str(source), "--json", "--strict"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert f"{source}:4: warning" in proc.stderr
    report = json.loads(proc.stdout)  # the output is written all the same
    assert Path(report["output"]).is_file()
    assert messages_of(Path(report["output"])) == messages_of(source)
    lax = run(["condense", str(source), "--json", "--force"], tmp_path)
    assert lax.returncode == 0
    assert f"{source}:4: warning" in lax.stderr


def test_compact_that_fails_part_way_exits_3(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl", prompts=2)
    original = source.read_bytes()
    # a free run on a copy: an index entry, then the chain entry, per chain
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(original)
    free = run(["compact", str(copy), "--in-place", "--json"], tmp_path)
    assert free.returncode == 0, free.stderr
    assert json.loads(free.stdout)["compacted"] == ["b1", "b2"]
    added = copy.read_bytes()[len(original) :].splitlines(keepends=True)
    assert json.loads(added[0])["customType"] == "context-prune-index"
    assert json.loads(added[1])["customType"] == "context-prune-chain"
    limit = len(original) + len(added[0])

    def no_room_for_the_chain() -> None:  # in the child: the file stops after the index
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [*CLI, "compact", str(source), "--in-place", "--json"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**env(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=no_room_for_the_chain,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "compact failed" in proc.stderr
    report = json.loads(proc.stdout)
    assert report["compacted"] == []
    assert report["error"]
    data = source.read_bytes()
    assert len(data) == limit  # the index entry was written, the chain entry not at all
    assert data.startswith(original)
    assert json.loads(data[len(original) :])["customType"] == "context-prune-index"


@pytest.mark.parametrize("command", ["condense", "replay"])
def test_a_disk_too_full_for_the_new_session_fails_in_one_line(
    tmp_path: Path, command: str
) -> None:
    # The new session is written through to a file as the replay goes: a write that fails
    # there (here a file size limit) ends the command with one line, and no output.
    source = small_session(tmp_path / "s.jsonl", prompts=4)
    limit = source.stat().st_size // 2  # the source is read whole; the new session is larger
    out = tmp_path / "out"
    out.mkdir()
    target = out / "c.jsonl" if command == "condense" else out / "vector"

    def small_files() -> None:  # in the child
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [*CLI, command, str(source), "-o", str(target), "--quiet"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**env(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=small_files,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    written = out / "c.jsonl" if command == "condense" else out / "vector" / "session.jsonl"
    assert proc.stderr == f"pi-condense: {written}: cannot write: File too large\n"
    assert list(out.iterdir()) == []  # no output, no temporary file left
