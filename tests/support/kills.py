"""Kill campaigns: a CLI run killed at random points, and what must hold after."""

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
from support.sessions import write_session

KILL_PRELUDE = """
import os, signal
_calls = [0]
_at = int(os.environ.get("KILL_AT", "0"))
def _wrap(f):
    def g(*a, **k):
        _calls[0] += 1
        if _calls[0] == _at:
            os.kill(os.getpid(), signal.SIGKILL)
        return f(*a, **k)
    return g
for _name in ("write", "fsync", "link", "replace", "rename"):
    setattr(os, _name, _wrap(getattr(os, _name)))
"""


CLI = KILL_PRELUDE + "\nfrom pi_condense.cli import main\nmain()"


class Campaign:
    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.session = write_session(tmp_path / "s.jsonl", prompts=6)
        self.ours = tmp_path / "ours.ack"
        self.pi_ack = tmp_path / "pi.ack"
        self.env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
        self.kills = 0
        self.rng = random.Random(14)
        self.pi_seen = -1
        self.appender: subprocess.Popen[bytes] | None = None

    def start_appender(self, pause: float) -> None:
        self.appender = subprocess.Popen(
            [sys.executable, str(SUPPORT / "appender.py"), str(self.session), str(self.pi_ack),
             "0", str(pause)]
        )  # fmt: skip

    def stop_appender(self) -> None:
        assert self.appender is not None
        self.appender.kill()
        self.appender.wait()
        self.pi_seen = int(self.pi_ack.read_text()) if self.pi_ack.exists() else -1

    def run(self, args: list[str], kill_at: int = 0, kill_after: float = 0.0) -> int:
        env = {**self.env, "KILL_AT": str(kill_at)}
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI, *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if kill_after:
            time.sleep(kill_after)
            proc.send_signal(signal.SIGKILL)
        code = proc.wait(timeout=120)
        self.kills += code == -signal.SIGKILL
        return code

    def check(self, *, by_id: bool) -> None:
        # The acknowledgement first: the appender may still be writing.
        acked = int(self.pi_ack.read_text()) if self.pi_ack.exists() else -1
        data = self.session.read_bytes()
        backup = self.session.with_name("s.jsonl.bak")
        assert SessionFile.load(self.session).warnings == []
        if backup.exists():
            assert SessionFile.load(backup).warnings == []  # never torn
        everything = data + (backup.read_bytes() if backup.exists() else b"")
        # One pass over the bytes per check (the session grows to megabytes): the numbers
        # of the other writer's lines and the entry ids present, then set membership.
        pattern = rb'"id":"pi(\d{6})"' if by_id else rb'"from pi (\d+)"'
        seen = {int(n) for n in re.findall(pattern, everything)}
        lost = [n for n in range(acked + 1) if n not in seen]
        assert not lost, f"lines {lost[:5]} of the other writer lost"
        if self.ours.exists():
            present = set(re.findall(rb'"id":"([^"]+)"', data))
            for entry_id in self.ours.read_text().split():
                assert entry_id.encode() in present, f"acknowledged {entry_id} lost"
