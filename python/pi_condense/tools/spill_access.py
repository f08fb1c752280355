"""Reading a spill sidecar named by a session record, without leaving the session's blob dir.

A record's ``spillPath`` comes from the session file, which is input we do not control: a
crafted session could name ``/etc/passwd``, a ``..`` path or a symlink to a secret. The
reference reads whatever the record names. We read a spill file only when its real path
(every symlink followed) lies inside ``<session_dir>/<session_id>-blobs/`` (itself resolved),
is absolute as recorded, and is a regular file; anything else is refused with a reason.

Moved sessions. Spill paths are absolute, so a session directory that was moved or copied
(a backup, another machine, an extracted test vector) still names the old location. Pass
the directory the session was written in as ``recorded_session_dir``: a recorded path that
lies lexically under it (after collapsing ``.``/``..``) is re-rooted onto ``session_dir``
before the containment check, so the old location itself is never read. The check then
applies to the re-rooted path exactly as to any other.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["SpillRead", "blob_dir", "read_spill", "rerooted"]

_O_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


@dataclass(frozen=True)
class SpillRead:
    """Outcome of :func:`read_spill`.

    ``text`` is the file's UTF-8 content (invalid bytes as U+FFFD, as Node reads it), or
    None. ``refused`` is the reason the path was not even tried (outside the blob dir, not a
    regular file, ...); ``error`` the reason an allowed read failed (e.g. the file is gone).
    """

    text: Optional[str] = None
    refused: Optional[str] = None
    error: Optional[str] = None


def blob_dir(session_dir: str, session_id: str) -> str:
    """``<session_dir>/<session_id>-blobs`` (where the reference writes spill sidecars)."""
    return os.path.join(session_dir, f"{session_id}-blobs")


def _is_within(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root and path != root
    except ValueError:  # different drives on Windows, or mixed absolute/relative
        return False


def rerooted(path: str, session_dir: str, recorded_session_dir: Optional[str]) -> str:
    """``path`` moved from ``recorded_session_dir`` onto ``session_dir`` when it lies under it."""
    if not recorded_session_dir:
        return path
    recorded = os.path.normpath(recorded_session_dir)
    if not os.path.isabs(recorded) or not _is_within(path, recorded):
        return path
    return os.path.join(session_dir, os.path.relpath(path, recorded))


def read_spill(
    spill_path: Any,
    session_dir: str,
    session_id: str,
    recorded_session_dir: Optional[str] = None,
) -> SpillRead:
    """Read the spill file a record names, if it resolves inside the session's blob dir."""
    if not isinstance(spill_path, str) or not spill_path or "\0" in spill_path:
        return SpillRead(refused="the recorded spill path is not a usable path string")
    if not os.path.isabs(spill_path):
        return SpillRead(refused="the recorded spill path is not absolute")
    if not session_dir or "\0" in session_dir or "\0" in session_id:
        return SpillRead(refused="the session has no directory to hold spill files")
    root = os.path.realpath(blob_dir(os.path.abspath(session_dir), session_id))
    candidate = rerooted(os.path.normpath(spill_path), session_dir, recorded_session_dir)
    real = os.path.realpath(candidate)
    if not _is_within(real, root):
        return SpillRead(refused="the path resolves outside this session's blob directory")
    try:
        fd = os.open(real, _O_FLAGS)
    except OSError as exc:
        return SpillRead(error=f"cannot open {real}: {exc.strerror or exc}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return SpillRead(refused="the path is not a regular file")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as exc:
        return SpillRead(error=f"cannot read {real}: {exc.strerror or exc}")
    finally:
        os.close(fd)
    return SpillRead(text=b"".join(chunks).decode("utf-8", errors="replace"))
