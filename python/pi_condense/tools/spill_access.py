"""Reading a spill sidecar named by a session record, without leaving the session's blob dir.

A record's ``spillPath`` comes from the session file, which is input we do not control: a
crafted session (or a shared tarball) could name ``/etc/passwd``, a ``..`` path, a symlink or
a hard link to a secret, or carry a header ``id`` such as ``../victim``. The reference reads
whatever the record names. We read a spill file only when all of these hold:

- the session id is a plain file name (no ``/``, ``\\``, ``:`` or NUL), so
  ``<session_dir>/<session_id>-blobs`` is a child of the session directory;
- that blob directory is a real directory, not a symlink;
- the recorded path is absolute and its real path (every symlink followed) lies inside the
  blob directory;
- the file is a regular file with a single link (a hard link would let an outside file in).

Anything else is refused with a reason. The read itself is bounded: with ``max_bytes`` only
the head that a truncation to ``max_bytes`` can show is held in memory, the rest is streamed
to count its lines. When the record carries ``contentHash`` (and ``spillBytes``), a file of
another size or another content (a sidecar written for a different call) is refused too; the
hash is checked for files up to :data:`HASH_CHECK_MAX_BYTES`.

Moved sessions. Spill paths are absolute, so a session directory that was moved or copied
(a backup, another machine, an extracted test vector) still names the old location. Pass
the directory the session was written in as ``recorded_session_dir``: a recorded path that
lies lexically under it (after collapsing ``.``/``..``) is re-rooted onto ``session_dir``
before the containment check, so the old location itself is never read. The check then
applies to the re-rooted path exactly as to any other.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from dataclasses import dataclass
from typing import Any, Optional

from .._fs.blob import plain_session_id
from ..keys import hash_tool_result

__all__ = [
    "HASH_CHECK_MAX_BYTES",
    "SpillRead",
    "blob_dir",
    "plain_session_id",
    "read_spill",
    "rerooted",
]

HASH_CHECK_MAX_BYTES = 16 * 1024 * 1024
"""Largest sidecar whose content hash is checked on read (larger ones: size check only)."""

_O_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_CHUNK = 1 << 20


@dataclass(frozen=True)
class SpillRead:
    """Outcome of :func:`read_spill`.

    ``text`` is the file's UTF-8 content (invalid bytes as U+FFFD, as Node reads it), or
    None; with ``max_bytes`` and a larger file it is only the head (``complete`` False) and
    ``total_lines`` counts the lines of the whole file as Pi does (see :func:`_lines`).
    ``refused`` is the reason the path was not even tried (outside the blob dir, not a regular
    file, ...); ``error`` the reason an allowed read failed (e.g. the file is gone).
    """

    text: Optional[str] = None
    refused: Optional[str] = None
    error: Optional[str] = None
    complete: bool = True
    total_lines: int = 0


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


def _root(session_dir: str, session_id: str) -> tuple[Optional[str], Optional[str]]:
    """(the blob directory's real path, None) or (None, why it cannot hold spill files)."""
    if not session_dir or "\0" in session_dir:
        return None, "the session has no directory to hold spill files"
    if not plain_session_id(session_id):
        return None, "the session id is not a plain file name (separator, colon or NUL)"
    root = blob_dir(os.path.realpath(os.path.abspath(session_dir)), session_id)
    try:
        info = os.lstat(root)
    except OSError:
        return root, None  # no blob dir: every path under it is simply missing
    if stat.S_ISLNK(info.st_mode):
        return None, "the blob directory is a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return None, "the blob directory is not a directory"
    return root, None


def read_spill(
    spill_path: Any,
    session_dir: str,
    session_id: str,
    recorded_session_dir: Optional[str] = None,
    *,
    max_bytes: Optional[int] = None,
    record: Optional[dict[str, Any]] = None,
) -> SpillRead:
    """Read the spill file a record names, if it resolves inside the session's blob dir.

    ``max_bytes`` bounds what is held (see :class:`SpillRead`); ``record`` (the
    ``ToolCallRecord``) enables the ``spillBytes`` / ``contentHash`` checks.
    """
    if not isinstance(spill_path, str) or not spill_path or "\0" in spill_path:
        return SpillRead(refused="the recorded spill path is not a usable path string")
    if not os.path.isabs(spill_path):
        return SpillRead(refused="the recorded spill path is not absolute")
    root, why = _root(session_dir, session_id)
    if root is None:
        return SpillRead(refused=why)
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
        if info.st_nlink > 1:
            return SpillRead(refused="the file has other hard links (it may live outside)")
        mismatch = _size_mismatch(record, info.st_size)
        if mismatch is not None:
            return SpillRead(refused=mismatch)
        hashed = record is not None and _wants_hash(record, info.st_size)
        limit = None if hashed or max_bytes is None else max(0, max_bytes) + 8
        read = _read(fd, limit)
    except OSError as exc:
        return SpillRead(error=f"cannot read {real}: {exc.strerror or exc}")
    finally:
        os.close(fd)
    if hashed and record is not None and read.text is not None:
        name = record.get("toolName")
        if hash_tool_result(name if isinstance(name, str) else str(name), read.text) != (
            record.get("contentHash")
        ):
            return SpillRead(refused="the file holds another output (content hash mismatch)")
    return read


def _size_mismatch(record: Optional[dict[str, Any]], size: int) -> Optional[str]:
    if record is None or not isinstance(record.get("contentHash"), str):
        return None
    expected = record.get("spillBytes")
    if isinstance(expected, int) and not isinstance(expected, bool) and expected != size:
        return f"the file holds another output ({size} bytes, the record says {expected})"
    return None


def _wants_hash(record: dict[str, Any], size: int) -> bool:
    return isinstance(record.get("contentHash"), str) and size <= HASH_CHECK_MAX_BYTES


def _read(fd: int, limit: Optional[int]) -> SpillRead:
    """The whole file, or (``limit``) its first ``limit`` bytes decoded plus a line count."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parts: list[str] = []
    held = 0
    newlines = 0
    complete = True
    while True:
        want = _CHUNK if limit is None else min(_CHUNK, limit - held)
        if want <= 0:
            break
        chunk = os.read(fd, want)
        if not chunk:
            parts.append(decoder.decode(b"", final=True))
            break
        held += len(chunk)
        newlines += chunk.count(b"\n")
        parts.append(decoder.decode(chunk))
    if limit is not None and held >= limit:
        rest, more = _count_newlines(fd, held)
        newlines += rest
        complete = not more
        if complete:
            parts.append(decoder.decode(b"", final=True))
    return SpillRead(text="".join(parts), complete=complete, total_lines=_lines(fd, newlines))


def _lines(fd: int, newlines: int) -> int:
    """The file's line count as Pi 0.83 counts a text: ``""`` has none, and a last ``"\n"``
    ends the last line rather than starting an empty one (spec 06 A.3)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0
    os.lseek(fd, size - 1, os.SEEK_SET)
    return newlines if os.read(fd, 1) == b"\n" else newlines + 1


def _count_newlines(fd: int, offset: int) -> tuple[int, bool]:
    """("\n" count from ``offset`` to the end, whether there was anything), streamed without
    holding it ("\n" is never part of a UTF-8 sequence). Holes of a sparse file read as
    zeros, so they are skipped where the platform can find them (``SEEK_DATA``)."""
    seek_data: Optional[int] = getattr(os, "SEEK_DATA", None)
    seek_hole: Optional[int] = getattr(os, "SEEK_HOLE", None)
    size = os.fstat(fd).st_size
    count = 0
    position = offset
    while position < size:
        end = size
        if seek_data is not None and seek_hole is not None:
            try:
                position = os.lseek(fd, position, seek_data)
                end = os.lseek(fd, position, seek_hole)
            except OSError:  # ENXIO: only a hole is left; EINVAL: not supported here
                if _only_hole_left(fd, position, seek_data):
                    break
                end = size
            os.lseek(fd, position, os.SEEK_SET)
        while position < end:
            chunk = os.read(fd, min(_CHUNK, end - position))
            if not chunk:
                return count, size > offset
            count += chunk.count(b"\n")
            position += len(chunk)
    return count, size > offset


def _only_hole_left(fd: int, position: int, seek_data: int) -> bool:
    try:
        os.lseek(fd, position, seek_data)
    except OSError as exc:
        return exc.errno == errno.ENXIO
    return False
