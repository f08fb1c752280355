"""In-place rewrites: a writer appending just before the swap, and the files a run leaves."""

from __future__ import annotations

from pathlib import Path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# Right before the condensed file is renamed over the session, a real appender process (the
# stand-in for Pi) appends one line: the window between the last check and the swap.
APPEND_BEFORE_SWAP = """
import os, subprocess, sys
_real = os.replace
def _replace(src, dst, *a, **k):
    if str(dst) == {session!r} and str(src).endswith(".tmp") and not os.environ.get("DONE"):
        os.environ["DONE"] = "1"
        subprocess.run([sys.executable, {appender!r}, {session!r}, {ack!r}, "1"], check=True)
    return _real(src, dst, *a, **k)
os.replace = _replace
"""
