"""Advisory whole-file locks between pi-condense processes (``flock`` on POSIX).

Windows has none we can use: its byte-range locks are mandatory and would block Pi's own reads,
so there every lock is granted at once and :data:`HAS_FLOCK` says so.
"""

from __future__ import annotations

import sys
import time

__all__ = ["HAS_FLOCK", "try_lock", "unlock", "wait_for_lock"]

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    HAS_FLOCK = False

    def try_lock(fd: int) -> bool:
        return True

    def unlock(fd: int) -> None:
        return None

else:
    import fcntl

    HAS_FLOCK = True

    def try_lock(fd: int) -> bool:
        """Take the exclusive lock without waiting; False when another holder has it.

        Other failures (``ENOLCK`` on a file system without locks) raise ``OSError``.
        """
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


def wait_for_lock(fd: int, timeout: float) -> bool:
    """Take the exclusive lock, waiting at most ``timeout`` seconds; False on timeout."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while not try_lock(fd):
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return True
