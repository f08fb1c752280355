"""Issue 37, the kill and disk-full campaigns of `flush` and a live Condenser, beside a plain
appender process (the stand-in for Pi) writing the same session throughout.

`flush` is SIGKILLed 30+ times (before its N-th write/fsync, and at random moments), with
turns of our own appended between the runs so that there is always work pending; the live
Condenser loop is killed at random moments with one acknowledgement file per run. Then both
run out of room (a file size limit, a full tmpfs). After every run: the session loads without
a damaged line (nothing half-written, nothing glued), no acknowledged entry of ours and no
acknowledged line of the other writer is lost, every run's acknowledged entries are on one
branch, and the next complete run leaves no temporary file behind. The live Condenser's
SIGKILL count (30) is in reliability/test_reliability_kills.py.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from pi_condense.errors import SessionError
from pi_condense.session import SessionFile
from support import SUPPORT
from support.disks import small_tmpfs
from support.kills import KILL_PRELUDE, Campaign

# The kill points a complete run passes (its writes, fsyncs, links and renames), on stderr.
COUNTED = (
    KILL_PRELUDE
    + "import atexit, sys\n"
    + "atexit.register(lambda: sys.stderr.write(f'KILL_POINTS {_calls[0]}\\n'))\n"
)


class Writers(Campaign):
    """The session and the plain appender beside it (see Campaign), our acknowledged runs,
    and the checks after each run."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.config = directory / "config.json"
        self.config.write_text(json.dumps({"enabled": True, "minBatchChars": 0}))
        self.rounds: list[list[str]] = []  # the entries each run acknowledged, in order
        self.points = 0

    def our_turns(self, turn: int) -> None:
        """Two tool turns of our own (what the next flush summarizes), acknowledged."""
        session = SessionFile.load(self.session)
        ids: list[str] = []
        self.rounds.append(ids)  # filled as each append returns
        for t in (turn, turn + 1):
            call = {"type": "toolCall", "id": f"k{t}", "name": "read", "arguments": {"n": t}}
            message = {"role": "assistant", "content": [call], "stopReason": "toolUse"}
            ids.append(session.append_message({**message, "timestamp": t}))
            result = {"role": "toolResult", "toolCallId": f"k{t}", "toolName": "read",
                      "content": [{"type": "text", "text": f"out {t} " + "z" * 900}],
                      "isError": False, "timestamp": t}  # fmt: skip
            ids.append(session.append_message(result))

    def flush(self, kill_at: int = 0, kill_after: float = 0.0, limit: int = 0) -> int:
        def limited() -> None:
            if limit:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        # Our branch: the other writer's lines fork off it (each continues its own line).
        ours = [ids for ids in self.rounds if ids]
        leaf = ["--leaf", ours[-1][-1]] if ours else []
        proc = subprocess.Popen(
            [sys.executable, "-c", COUNTED + "\nfrom pi_condense.cli import main\nmain()",
             "flush", str(self.session), "--config", str(self.config), "-q", *leaf],
            env={**self.env, "KILL_AT": str(kill_at)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=limited,
        )  # fmt: skip
        if kill_after:
            time.sleep(kill_after)
            proc.send_signal(signal.SIGKILL)
        _, errors = proc.communicate(timeout=120)
        self.kills += proc.returncode == -signal.SIGKILL
        assert b"Traceback" not in errors, errors.decode()
        counted = re.search(rb"KILL_POINTS (\d+)", errors)
        self.points = int(counted.group(1)) if counted else 0
        return proc.returncode

    def verify(self) -> SessionFile:
        acked = int(self.pi_ack.read_text()) if self.pi_ack.exists() else -1
        loaded = SessionFile.load(self.session)
        assert loaded.warnings == []  # no torn or glued line
        seen = {int(n) for n in re.findall(rb'"id":"pi(\d{6})"', self.session.read_bytes())}
        lost = [n for n in range(acked + 1) if n not in seen]
        assert not lost, f"lines {lost[:5]} of the other writer lost"
        for ids in filter(None, self.rounds):
            on = [loaded.get_entry(i) is not None for i in ids]
            assert all(on), f"acknowledged entries {ids} lost"
            branch = [e["id"] for e in loaded.branch(ids[-1])]
            # the run's entries are on one branch, in order (none left on a side branch)
            assert [i for i in branch if i in ids] == ids, "an acknowledged entry is off the branch"
        return loaded


def no_temporary_files(directory: Path, harness: tuple[str, ...] = ("pi.ack.tmp",)) -> list[str]:
    """Temporary files pi-condense left; ``harness`` names the test's own (the simulated Pi
    writer is killed with SIGKILL, possibly between writing its acknowledgement and renaming
    it into place)."""
    return sorted(
        p.name
        for p in directory.rglob("*")
        if p.name.endswith((".tmp", ".partial")) and p.name not in harness
    )


def test_flush_kill_campaign(tmp_path: Path) -> None:
    w = Writers(tmp_path)
    rng = random.Random(37)
    w.start_appender(0.02)
    w.our_turns(0)
    started = time.monotonic()
    assert w.flush() == 0  # a complete run: how long it takes, how many kill points it passes
    took, points = time.monotonic() - started, w.points
    assert points >= 8
    w.verify()
    round_ = 0
    while w.kills < 30 and round_ < 45:
        w.our_turns(100 + 2 * round_)
        if round_ % 4 == 3:
            w.flush(kill_after=took * (0.3 + 0.6 * rng.random()))
        else:
            # before its N-th write or fsync (N within what the last complete run passed)
            w.flush(kill_at=1 + rng.randrange(points))
        points = w.points or points
        w.verify()
        round_ += 1
    w.stop_appender()
    assert w.kills >= 30, w.kills
    # The next complete run summarizes what is left, and leaves nothing temporary.
    assert w.flush() == 0
    loaded = w.verify()
    assert no_temporary_files(tmp_path) == []
    assert loaded.file_leaf_id is not None


def test_flush_disk_full_campaign(tmp_path: Path) -> None:
    (tmp_path / "limit").mkdir()
    w = Writers(tmp_path / "limit")
    w.start_appender(0.02)
    for room in (50, 1500, 6000, 9000):
        w.our_turns(room)
        code = w.flush(limit=w.session.stat().st_size + room)
        assert code in (0, 3), code  # 3: an entry could not be written, and it says so
        w.verify()
    w.stop_appender()
    assert w.flush() == 0
    w.verify()
    # A full disk: our turns and a flush in a 48 KiB tmpfs until it is full.
    with small_tmpfs(tmp_path, "48k") as mnt:
        full = Writers(mnt)
        full.start_appender(0.05)
        failed = 0
        for round_ in range(4):
            with contextlib.suppress(SessionError):  # our own turns may not fit any more
                full.our_turns(10 * round_)
            failed += full.flush() == 3
            full.verify()
        full.stop_appender()
        assert failed >= 1  # the disk did fill up
        full.verify()


def live_script(session: Path, ack: Path, start: int) -> list[str]:
    argv = [str(session), str(ack), str(start)]
    code = (
        f"{KILL_PRELUDE}\nimport runpy, sys\nsys.argv = ['x', *{argv!r}]\n"
        f"runpy.run_path({str(SUPPORT / 'live_loop.py')!r}, run_name='__main__')"
    )
    return [sys.executable, "-c", code]


def test_live_condenser_runs_keep_their_turns_on_one_branch(tmp_path: Path) -> None:
    # Random SIGKILLs, then a file size limit, while the appender writes: every run's
    # acknowledged entries follow one another on one branch (finding 5 under kills).
    w = Writers(tmp_path)
    rng = random.Random(5)
    w.start_appender(0.01)
    for round_ in range(8):
        ack = tmp_path / f"live{round_}.ack"
        limit = 0 if round_ < 6 else w.session.stat().st_size + 3000 * (round_ - 5)

        def limited(limit: int = limit) -> None:
            if limit:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        proc = subprocess.Popen(
            live_script(w.session, ack, round_ * 1000),
            env={**w.env, "KILL_AT": "0"},
            stderr=subprocess.DEVNULL,
            preexec_fn=limited,
        )
        if limit:
            assert proc.wait(timeout=120) == 1  # the append failed: the loop stops with it
        else:
            time.sleep(0.5 + 0.5 * rng.random())
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(timeout=120) == -signal.SIGKILL
        ids = ack.read_text().split() if ack.exists() else []
        if ids:
            w.rounds.append(ids)
        w.verify()
    w.stop_appender()
    loaded = w.verify()
    assert sum(len(ids) for ids in w.rounds) >= 20
    assert all(e.get("id") for e in loaded.entries)
    assert no_temporary_files(tmp_path) == []
