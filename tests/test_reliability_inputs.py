"""Issue 14, finding 6: special files and hostile gzip streams as inputs get a clear error
(exit 2, the path named) instead of a hang, unbounded growth or a traceback."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from _sessions import write_session

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
