"""Issue 37, finding 6: `corpus scan` decompresses within the bound every command applies,
reads a flood of empty lines in time proportional to its bytes, and its local workers end
when it is killed."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.corpus_runs import cli
from support.sessions import write_session

LIMIT_AS = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
"""


def test_scan_refuses_gzip_bombs_and_reads_a_flood_of_newlines_fast(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    write_session(folder / "good.jsonl", prompts=2)
    header = b'{"type":"session","version":3,"id":"b","timestamp":"2026-01-01T00:00:00.000Z"}\n'
    with gzip.open(folder / "newlines.jsonl.gz", "wb", compresslevel=9) as handle:
        handle.write(header)
        for _ in range(200):
            handle.write(b"\n" * (1 << 20))
    with gzip.open(folder / "oneline.jsonl.gz", "wb", compresslevel=9) as handle:
        handle.write(header + b'{"type":"message","x":"')
        for _ in range(200):
            handle.write(b"a" * (1 << 20))
        handle.write(b'"}\n')
    (folder / "flood.jsonl").write_bytes(header + b"\n" * (20 << 20))
    started = time.monotonic()
    scan = ["corpus", "scan", str(folder), "--no-cache", "--engine", "serial", "--json"]
    proc = cli(scan, tmp_path, LIMIT_AS, timeout=120)
    took = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr
    result = json.loads(proc.stdout)
    failed = {Path(f["path"]).name: f["error"] for f in result["failures"]}
    assert set(failed) == {"newlines.jsonl.gz", "oneline.jsonl.gz"}
    assert all("refused as a decompression bomb" in e for e in failed.values()), failed
    assert sorted(Path(r["path"]).name for r in result["rows"]) == ["flood.jsonl", "good.jsonl"]
    assert took < 60, took


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def test_killing_scan_kills_its_workers(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    header = b'{"type":"session","version":3,"id":"b","timestamp":"2026-01-01T00:00:00.000Z"}\n'
    for i in range(4):  # lines that are not JSON: each costs its parse error (seconds a file)
        (folder / f"slow{i}.jsonl").write_bytes(header + b"x\n" * 400_000)
    code = "from pi_condense.cli import main\nmain()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "corpus", "scan", str(folder), "--no-cache", "-j", "2",
         "--json"],
        env={**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    workers: set[int] = set()
    deadline = time.monotonic() + 30
    while len(workers) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        workers = _descendants(proc.pid)
    assert len(workers) >= 2, workers
    time.sleep(0.5)  # the workers are busy with their first sessions
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(map(_running, workers)):
        time.sleep(0.1)
    alive = [w for w in workers if _running(w)]
    for pid in alive:  # leave nothing behind, then fail
        os.kill(pid, signal.SIGKILL)
    assert alive == [], "workers outlived the killed parent"


def test_a_worker_started_after_its_parent_died_ends_at_once(tmp_path: Path) -> None:
    # The worker's set-up itself: a parent that is already gone ends it.
    code = (
        "import os\nfrom pi_condense.corpus.engines import die_with_parent\n"
        "parent = os.getpid()\npid = os.fork()\n"
        "if pid == 0:\n"
        "    import time; time.sleep(0.3); die_with_parent(parent); time.sleep(30)\n"
        "    os._exit(0)\n"
        "print(pid, flush=True)\nos._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    child = int(out.stdout)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _running(child):
        time.sleep(0.1)
    assert not _running(child)


def test_compact_refuses_a_gzip_bomb(tmp_path: Path) -> None:
    bomb = tmp_path / "b.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as handle:
        handle.write(b'{"type":"session","version":3,"id":"b"}\n')
        for _ in range(200):
            handle.write(b"\n" * (1 << 20))
    proc = cli(["compact", str(bomb)], tmp_path, timeout=60)
    assert proc.returncode == 2
    assert "refused as a decompression bomb" in proc.stderr
    assert "Traceback" not in proc.stderr
