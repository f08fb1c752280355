"""Issue 14, finding 6: special files and hostile gzip streams as inputs get a clear error
(exit 2, the path named) instead of a hang, unbounded growth or a traceback."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Optional

import pytest

from support.sessions import write_session

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]


def cli(args: list[str], tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    agent = tmp_path / "agent"
    agent.mkdir(exist_ok=True)
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PI_CODING_AGENT_DIR": str(agent)},
        timeout=timeout,
        check=False,
    )


def assert_clear_error(proc: subprocess.CompletedProcess[str], path: Path, why: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(path) in proc.stderr
    assert why in proc.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["session", "info", "{fifo}"],
        ["render", "{fifo}"],
        ["condense", "{fifo}", "-q"],
        ["compact", "{fifo}"],
        ["render", "{session}", "--config", "{fifo}"],
        ["render", "{session}", "--messages", "{fifo}"],
    ],
)
def test_a_fifo_input_is_refused_at_once(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "input.jsonl"
    os.mkfifo(fifo)
    session = write_session(tmp_path / "s.jsonl")
    args = [a.format(fifo=fifo, session=session) for a in command]
    proc = cli(args, tmp_path, timeout=60)  # a hang fails here with TimeoutExpired
    assert_clear_error(proc, fifo, "not a regular file (a FIFO)")


def test_a_fifo_settings_file_is_reported_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "settings.json")
    script = (
        "from pi_condense.config import load_config\n"
        f"print([str(w) for w in load_config({str(tmp_path / 'settings.json')!r}).warnings])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "not a regular file (a FIFO)" in done.stdout


def test_dev_zero_as_config_is_refused(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl")
    proc = cli(["render", str(session), "--config", "/dev/zero"], tmp_path, timeout=60)
    assert_clear_error(proc, Path("/dev/zero"), "not a regular file (a device or socket)")


def test_a_gzip_bomb_is_refused(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.jsonl.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(bomb, "wb") as handle:
        handle.write(packer.compress(b'{"type":"session","id":"x"}\n'))
        for _ in range(80):  # 80 MiB of spaces, about 80 KB compressed
            handle.write(packer.compress(b" " * (1 << 20)))
        handle.write(packer.flush())
    for command in (["session", "info", str(bomb)], ["condense", str(bomb), "-q"]):
        proc = cli(command, tmp_path)
        assert_clear_error(proc, bomb, "refused as a decompression bomb")


def test_a_corrupt_deflate_stream_is_a_clear_error(tmp_path: Path) -> None:
    data = gzip.compress(write_session(tmp_path / "s.jsonl").read_bytes())
    corrupt = tmp_path / "corrupt.jsonl.gz"
    corrupt.write_bytes(data[:40] + bytes(b ^ 0x5A for b in data[40:90]) + data[90:])
    truncated = tmp_path / "truncated.jsonl.gz"
    truncated.write_bytes(data[: len(data) // 2])
    for path, why in ((corrupt, "corrupt gzip stream"), (truncated, "truncated gzip stream")):
        for command in (["session", "info", str(path)], ["render", str(path)]):
            assert_clear_error(cli(command, tmp_path), path, why)


# ----------------------------------------------------------- nesting deeper than 1024 levels


def _with_deep_line(tmp_path: Path, depth: int) -> tuple[Path, int]:
    """A session whose last line is a user message holding ``depth`` nested arrays."""
    import json

    session = write_session(tmp_path / "deep.jsonl", prompts=2)
    lines = session.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    entry = {
        "type": "message",
        "id": "deep0001",
        "parentId": last["id"],
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}],
            "timestamp": 1767225600000,
            "x": "@",
        },
    }
    line = json.dumps(entry, separators=(",", ":")).replace('"@"', "[" * depth + "]" * depth)
    session.write_text("\n".join([*lines, line]) + "\n", encoding="utf-8")
    return session, len(lines) + 1


def test_a_line_nested_deeper_than_1024_loads_as_json_parse_reads_it(tmp_path: Path) -> None:
    from pi_condense.session import SessionFile

    session, line = _with_deep_line(tmp_path, 3000)
    loaded = SessionFile.load(session)
    entry = loaded.get_entry("deep0001")
    assert entry is not None
    value, depth = entry["message"]["x"], 1
    while value:
        value, depth = value[0], depth + 1
    assert depth == 3000
    [warning] = [w for w in loaded.warnings if w.kind == "deep"]
    assert warning.line == line
    assert "nested 3002 levels deep" in warning.reason


@pytest.mark.parametrize(
    "command",
    [["session", "info"], ["render"], ["condense", "-q", "-o", "{out}"], ["status"]],
)
def test_serializing_a_too_deep_line_is_a_clear_error_naming_it(
    command: list[str], tmp_path: Path
) -> None:
    session, line = _with_deep_line(tmp_path, 3000)
    args = [a.replace("{out}", str(tmp_path / "out.jsonl")) for a in command]
    proc = cli([*args, str(session)], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.endswith(
        f"pi-condense: {session}:{line}: nested 3002 levels deep: kept (JSON.parse reads it), "
        "but a render or a write of it fails (JSON.stringify here stops at 1024 levels)\n"
        "pi-condense: cannot serialize a value nested deeper than 1024 levels "
        "(or a circular one)\n"
    )


def test_a_deep_line_within_the_limit_is_rendered(tmp_path: Path) -> None:
    session, _ = _with_deep_line(tmp_path, 1015)
    proc = cli(["session", "info", "--json", str(session)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


# ------------------------------------------------ out of memory while parsing (issue 37, #7)

# The command runs with RLIMIT_AS set to the address space it has once imported plus a margin:
# orjson does not check every allocation, so a parse that runs out there wrote through a null
# pointer (SIGSEGV) instead of raising MemoryError.
LIMITED = (
    "import resource, sys\n"
    "from pi_condense.cli import main\n"
    "margin = int(sys.argv.pop(1)) << 20\n"
    "status = open('/proc/self/status').read().split('VmSize:')[1]\n"
    "limit = int(status.split()[0]) * 1024 + margin\n"
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "main()\n"
)


def limited_python(margin_mb: int, code: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (instead of the CLI's ``main()``) under the limit; ``sys.argv[1:]`` is
    ``args``."""
    return subprocess.run(
        [sys.executable, "-c", LIMITED.replace("main()\n", code), str(margin_mb), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def limited_cli(margin_mb: int, args: list[str]) -> subprocess.CompletedProcess[str]:
    return limited_python(margin_mb, "main()\n", args)


HEADER = (
    '{"type":"session","version":3,"id":"mem","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}'
)


def _dense_entry(entry_id: str, parent: Optional[str], strings: int) -> str:
    """An entry with ``strings`` two-letter strings: many small objects per byte of JSON."""
    parent_json = "null" if parent is None else f'"{parent}"'
    return (
        f'{{"type":"message","id":"{entry_id}","parentId":{parent_json},'
        '"timestamp":"2025-01-01T00:00:00.000Z",'
        '"message":{"role":"user","content":"hi","pad":[' + '"ab",' * strings + '""]}}'
    )


TOO_BIG = "not enough memory to parse it (8.0 MB of JSON may take up to 513 MB)"
"""What an 8 MB dense line gives with a 150 MB margin (it needs about 26 x 8 MB)."""


def long_line_session(tmp_path: Path) -> Path:
    """A header and an 8 MB dense line (line 2)."""
    session = tmp_path / "long-line.jsonl"
    session.write_text(HEADER + "\n" + _dense_entry("a1", None, (8 << 20) // 5) + "\n")
    return session


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_line_too_big_for_the_memory_left_is_a_clear_error(tmp_path: Path) -> None:
    session = long_line_session(tmp_path)
    proc = limited_cli(150, ["session", "info", str(session)])
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr == f"pi-condense: {session}: line 2: {TOO_BIG}\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_session_too_big_for_the_memory_left_is_a_clear_error(tmp_path: Path) -> None:
    session = tmp_path / "many-lines.jsonl"
    lines, parent = [HEADER], None
    for i in range(64):  # 16 MB of 256 KB lines
        lines.append(_dense_entry(f"e{i}", parent, 52_000))
        parent = f"e{i}"
    session.write_text("\n".join(lines) + "\n")
    proc = limited_cli(100, ["session", "info", str(session)])
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"pi-condense: {session}: lines ")
    assert ": not enough memory to parse them (" in line


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_session_loads_in_chunks_when_all_of_it_may_not_fit(tmp_path: Path) -> None:
    # 6 MB of lines: 64 x 6 MB is more than the 200 MB margin, so the native loop gets them
    # 1 MB at a time, each chunk checked on its own; the load is the same
    session = write_session(tmp_path / "chunked.jsonl", prompts=500, result_chars=9000)
    assert 5 << 20 < session.stat().st_size < 7 << 20
    proc = limited_cli(200, ["session", "info", "--json", str(session)])
    assert proc.returncode == 0, proc.stderr
    assert '"entries": 2000' in proc.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_small_session_loads_under_the_same_limit(tmp_path: Path) -> None:
    session = write_session(tmp_path / "small.jsonl")
    proc = limited_cli(100, ["session", "info", "--json", str(session)])
    assert proc.returncode == 0, proc.stderr
    assert '"entries": 16' in proc.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_session_file_load_raises_a_session_error_that_is_a_memory_error(tmp_path: Path) -> None:
    session = long_line_session(tmp_path)
    code = (
        "from pi_condense.errors import SessionError\n"
        "from pi_condense.session import SessionFile\n"
        "try:\n"
        "    SessionFile.load(sys.argv[1])\n"
        "except SessionError as exc:\n"
        "    print(isinstance(exc, MemoryError), exc)\n"
    )
    proc = limited_python(150, code, [str(session)])
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout == f"True {session}: line 2: {TOO_BIG}\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_line_another_writer_appends_is_checked_too(tmp_path: Path) -> None:
    session = write_session(tmp_path / "live.jsonl")
    code = (
        "from pi_condense.session import SessionFile\n"
        "from pi_condense.errors import SessionError\n"
        "session = SessionFile.load(sys.argv[1])\n"
        "with open(sys.argv[1], 'a') as other:  # Pi appends a line meanwhile\n"
        "    other.write(open(sys.argv[2]).read())\n"
        "try:\n"
        "    session.refresh()\n"
        "except SessionError as exc:\n"
        "    print(exc)\n"
    )
    lines = session.read_text().splitlines()
    entry = tmp_path / "entry.json"
    entry.write_text(_dense_entry("big1", json.loads(lines[-1])["id"], (8 << 20) // 5) + "\n")
    proc = limited_python(150, code, [str(session), str(entry)])
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout == f"{session}: line {len(lines) + 1}: {TOO_BIG}\n"


# -------------------------------------- expected errors are one line (issue 37, #12, inputs)


def assert_one_line(proc: subprocess.CompletedProcess[str], line: str) -> None:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr == f"pi-condense: {line}\n"


def test_an_over_long_path_in_corpus_scan_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / ("a" * 300)  # one name longer than NAME_MAX: ENAMETOOLONG
    proc = cli(["corpus", "scan", str(path)], tmp_path)
    assert_one_line(proc, f"{path}: File name too long")


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("command", [["render"], ["condense", "-q", "-o", "{out}"]])
def test_a_5000_deep_config_file_is_one_line_naming_it(tmp_path: Path, command: list[str]) -> None:
    session = write_session(tmp_path / "s.jsonl")
    config = tmp_path / "deep.json"
    config.write_text('{"contextPrune":{"enabled":true,"x":' + _deep(5000) + "}}")
    args = [a.replace("{out}", str(tmp_path / "out.jsonl")) for a in command]
    proc = cli([*args, str(session), "--config", str(config)], tmp_path)
    assert_one_line(proc, f"{config}: contextPrune.x is nested deeper than 64 levels")


@pytest.mark.parametrize("command", [["render", "{session}"], ["config", "show"]])
def test_a_5000_deep_settings_file_is_one_line_naming_it(
    tmp_path: Path, command: list[str]
) -> None:
    session = write_session(tmp_path / "s.jsonl")
    settings = tmp_path / "agent" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"contextPrune":{"a":' + '{"a":' * 5000 + "1" + "}" * 5000 + "}}")
    proc = cli([a.replace("{session}", str(session)) for a in command], tmp_path)
    assert_one_line(proc, f"{settings}: contextPrune.a is nested deeper than 64 levels")


def test_a_config_within_the_depth_limit_is_taken(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl")
    config = tmp_path / "deep.json"
    config.write_text('{"contextPrune":{"enabled":true,"x":' + _deep(63) + "}}")
    proc = cli(["render", str(session), "--config", str(config)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "pi-condense: warning: contextPrune.x: unknown setting, ignored (kept in the file)\n"
    )


def test_a_deep_other_setting_is_kept_and_the_file_not_overwritten(tmp_path: Path) -> None:
    settings = tmp_path / "agent" / "settings.json"
    settings.parent.mkdir()
    text = '{"theme":' + _deep(5000) + ',"contextPrune":{"enabled":false}}'
    settings.write_text(text)
    proc = cli(["config", "on"], tmp_path)
    assert_one_line(
        proc,
        f"{settings}: a value in it is nested deeper than 1024 levels, more than pi-condense "
        "writes; not overwriting it",
    )
    assert settings.read_text() == text
