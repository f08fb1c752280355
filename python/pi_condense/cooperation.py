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
from pathlib import Path
from typing import Optional, Union

from .errors import CondenseError
from .runtime import Runtime

__all__ = ["FlushLock", "absorb_other_writers", "try_side_lock"]

_UNGUARDED = -1


def try_side_lock(path: Optional[Path], purpose: str) -> Union[int, None]:
    """``flock`` (never waited on) of ``.<session name>.pi-condense-<purpose>.lock`` beside
    the session: its descriptor, None when another holder has it (another process, or another
    open of it in this one), or -1 when nothing can be guarded (in memory, Windows, a
    directory we cannot write)."""
    if path is None or sys.platform == "win32":
        return _UNGUARDED
    lock_path = path.with_name(f".{path.name}.pi-condense-{purpose}.lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return _UNGUARDED
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


class FlushLock:
    """The session-wide flush lock (held until :meth:`release`)."""

    def __init__(self, fd: Optional[int]) -> None:
        self._fd = fd

    @classmethod
    def try_acquire(cls, rt: Runtime) -> Optional[FlushLock]:
        """The lock, or None when another process holds it. In-memory sessions (and
        Windows, or a directory we cannot write) get a lock that guards nothing."""
        fd = try_side_lock(rt.session.path, "flush")
        if fd is None:
            return None
        return cls(None if fd == _UNGUARDED else fd)

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
