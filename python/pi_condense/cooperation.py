"""Two Condensers on one session cooperate instead of summarizing the same calls twice.

Pi runs one extension per process, so the reference never meets a second writer of its own
entries; two Pi processes (or a Pi and a ``pi-condense compact``) on one session each
summarize everything. In the default mode a flush therefore

1. takes the session's flush lock (``flock`` on ``.<session name>.pi-condense-flush.lock``
   beside the session, never waited on: when another Condenser is flushing, this flush is
   skipped with ``already-flushing`` and its batches stay pending for the next trigger), and
2. re-reads the session and, when another Condenser appended ``context-prune-*`` entries
   since the state was built, rebuilds the pruner state from the session, so the calls it
   summarized are no longer pending.

``compat: "reference"`` does neither (the reference behaviour). Windows has no ``flock``:
there only step 2 applies (see README, Reliability).
"""

from __future__ import annotations

import os
import sys
from typing import Optional

from .errors import CondenseError
from .runtime import Runtime

__all__ = ["FlushLock", "absorb_other_writers"]


class FlushLock:
    """The session-wide flush lock (held until :meth:`release`)."""

    def __init__(self, fd: Optional[int]) -> None:
        self._fd = fd

    @classmethod
    def try_acquire(cls, rt: Runtime) -> Optional[FlushLock]:
        """The lock, or None when another process holds it. In-memory sessions (and
        Windows, or a directory we cannot write) get a lock that guards nothing."""
        path = rt.session.path
        if path is None or sys.platform == "win32":
            return cls(None)
        lock_path = path.with_name(f".{path.name}.pi-condense-flush.lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError:
            return cls(None)
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return cls(fd)

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def absorb_other_writers(rt: Runtime) -> bool:
    """Pick up what other writers appended; rebuild the state when another Condenser's
    entries arrived. Returns whether the state was rebuilt."""
    session = rt.session
    if session.path is None:
        return False
    try:
        session.refresh()
    except CondenseError:
        return False  # rewritten meanwhile: the flush's first append reports it
    if session.foreign_prune_entries == rt.foreign_prune_seen:
        return False
    rt.resync()
    return True
