"""Issue 14, the kill campaign: SIGKILL at targeted and random points of `condense
--in-place`, `compact --in-place` and a live Condenser loop, with a plain appender process
(the stand-in for Pi) writing the same session throughout.

After every kill: no acknowledged entry of ours is lost, no acknowledged line of the other
writer is lost, the session loads without a damaged line, a backup is never torn (it is the
whole original, or the session's own inode), and the next complete run leaves no temporary
file behind. Targeted points kill the process right before its N-th write, fsync, link or
rename; random points kill it after a random delay.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from pi_condense.session import SessionFile
from support import SUPPORT
from support.kills import CLI, KILL_PRELUDE, Campaign
from support.sessions import write_session


def test_kill_campaign(tmp_path: Path) -> None:
    c = Campaign(tmp_path)

    # 1. A live Condenser loop, killed at random moments and before its N-th write/fsync.
    c.start_appender(0.05)
    for round_ in range(30):
        argv = [str(c.session), str(c.ours), str(round_ * 1000)]
        script = (
            f"{KILL_PRELUDE}\nimport runpy, sys\nsys.argv = ['x', *{argv!r}]\n"
            f"runpy.run_path({str(SUPPORT / 'live_loop.py')!r}, run_name='__main__')"
        )
        loop = [sys.executable, "-c", script]
        kill_at = 0 if round_ % 2 else 5 + 3 * round_
        proc = subprocess.Popen(loop, env={**c.env, "KILL_AT": str(kill_at)})
        if not kill_at:
            time.sleep(0.4 + 0.6 * c.rng.random())
            proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=120) == -signal.SIGKILL
        c.kills += 1
        c.check(by_id=True)
    c.stop_appender()
    c.check(by_id=True)

    # 2. compact --in-place, killed before its N-th write/fsync, and at random moments.
    c.start_appender(0.05)
    for kill_at in (1, 2, 3, 5):
        c.run(["compact", str(c.session), "--in-place", "--summarizer", "none"], kill_at=kill_at)
        c.check(by_id=True)
    # The random moments fall within a complete run's time (a fixed delay outlives a fast one).
    started = time.monotonic()
    assert c.run(["compact", str(c.session), "--in-place", "--summarizer", "none"]) == 0
    took = time.monotonic() - started
    c.check(by_id=True)
    for _ in range(2):
        c.run(["compact", str(c.session), "--in-place", "--summarizer", "none"],
              kill_after=took * (0.3 + 0.6 * c.rng.random()))  # fmt: skip
        c.check(by_id=True)
    c.stop_appender()

    # 3. condense --in-place, killed before its N-th write/fsync/link/rename, and at random.
    c.ours.unlink()  # condense rewrites the file: our earlier ids become the replay's
    c.start_appender(1.0)
    for kill_at in (1, 2, 4, 6):
        c.run(["condense", str(c.session), "--in-place", "--force", "-q"], kill_at=kill_at)
        c.check(by_id=False)
    c.run(["condense", str(c.session), "--in-place", "--force", "-q"], kill_after=1.5)
    c.check(by_id=False)
    c.stop_appender()

    # The next complete run succeeds and leaves no temporary file.
    assert c.run(["condense", str(c.session), "--in-place", "--force", "-q"]) == 0
    c.check(by_id=False)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    assert c.kills >= 30, c.kills  # SIGKILLs actually delivered


class CorpusCampaign:
    """Generations of a few sessions, each written by its own plain appender, condensed in
    place by `corpus condense` runs that are killed at targeted and random points."""

    SESSIONS = 2

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
        self.generation = 0
        self.folder = tmp_path
        self.appenders: list[subprocess.Popen[bytes]] = []
        self.pristine: dict[Path, bytes] = {}
        self.backups: dict[Path, tuple[int, bytes]] = {}
        self.kills = 0
        self.rng = random.Random(37)

    def new_generation(self) -> None:
        self.stop_appenders()
        self.generation += 1
        self.folder = self.dir / f"g{self.generation}"
        self.folder.mkdir()
        for i in range(self.SESSIONS):
            path = write_session(self.folder / f"s{i}.jsonl", prompts=3)
            path.chmod(0o600)
            self.pristine[path] = path.read_bytes()
            argv = [str(SUPPORT / "appender.py"), str(path), f"{path}.ack", "0", "0.5"]
            self.appenders.append(subprocess.Popen([sys.executable, *argv]))

    def stop_appenders(self) -> None:
        for appender in self.appenders:
            appender.kill()
            appender.wait()
        self.appenders = []

    def run(self, kill_at: int = 0, kill_after: float = 0.0, engine: str = "serial") -> int:
        args = ["corpus", "condense", str(self.folder), "--in-place", "--no-cache", "-q",
                "--engine", engine, "-j", "2"]  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI, *args],
            env={**self.env, "KILL_AT": str(kill_at)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if kill_after:
            time.sleep(kill_after)
            proc.send_signal(signal.SIGKILL)
        code = proc.wait(timeout=120)
        self.kills += code == -signal.SIGKILL
        return code

    def sessions(self) -> list[Path]:
        return sorted(self.folder.rglob("s*.jsonl"))

    def done(self) -> bool:
        """Every session condensed in place (its header names its original, the backup)."""
        return all(
            "condensedFrom" in SessionFile.load(p).header and Path(f"{p}.bak").exists()
            for p in self.sessions()
        )

    def check(self) -> None:
        for path in self.sessions():
            ack = Path(f"{path}.ack")
            # The acknowledgement first: the appender may still be writing.
            acked = int(ack.read_text()) if ack.exists() else -1
            data = path.read_bytes()
            backup = Path(f"{path}.bak")
            assert SessionFile.load(path).warnings == []  # nothing glued or torn
            everything = data
            if backup.exists() and not os.path.samefile(backup, path):
                kept = (backup.stat().st_ino, backup.read_bytes())
                # The one pristine copy: the original (with what Pi appended before the swap),
                # never replaced nor changed once it is the backup.
                assert kept[1].startswith(self.pristine[path])
                assert SessionFile.load(backup).warnings == []
                assert self.backups.setdefault(path, kept) == kept, f"{backup} overwritten"
                everything += kept[1]
            seen = {int(n) for n in re.findall(rb'"from pi (\d+)"', everything)}
            lost = [n for n in range(acked + 1) if n not in seen]
            assert not lost, f"{path}: lines {lost[:5]} of the other writer lost"


def test_corpus_kill_campaign(tmp_path: Path) -> None:
    """Issue 37: `corpus condense --in-place` SIGKILLed at >= 30 points beside plain
    appenders; a rerun finishes what was left and skips what was done."""
    c = CorpusCampaign(tmp_path)
    c.new_generation()
    # Before the N-th write, fsync, link or rename: N cycles through one session's steps
    # (temporary file written and synced, backup linked, renamed, directory synced) and the
    # next one's. A generation condensed whole is followed by a new one.
    for attempt in range(60):
        if c.done():
            c.new_generation()
        c.run(kill_at=1 + attempt % 10)
        c.check()
        if c.kills >= 22:
            break
    # Random moments, serial and on the local pool (its workers die with the run).
    started = time.monotonic()
    c.run()
    took = time.monotonic() - started
    c.check()
    for round_ in range(30):
        if c.kills >= 32:
            break
        if c.done():
            c.new_generation()
        engine = "local" if round_ % 2 else "serial"
        c.run(kill_after=took * (0.2 + 0.8 * c.rng.random()), engine=engine)
        c.check()
    c.stop_appenders()
    # The rerun, nobody writing: one run over every generation finishes what was left,
    # skipping what was done; the next one has nothing left to do.
    c.folder = tmp_path
    c.check()
    assert c.run() == 0
    c.check()
    assert c.done()
    assert c.run() == 0
    assert sorted(p.name for p in tmp_path.rglob("*.tmp")) == []
    assert c.kills >= 30, c.kills  # SIGKILLs actually delivered
