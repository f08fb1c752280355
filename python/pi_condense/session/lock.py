"""Low-level session file I/O: the advisory append lock, the side locks beside a session (one
flush, one live hook at a time), opening only regular files, reading from an offset (waiting
for a line still being written) and writing every byte."""

from __future__ import annotations

import errno
import os
import stat
import sys
import time
from pathlib import Path
from typing import Optional

if sys.platform != "win32":
    import fcntl

from .._core import blank_lines
from .._fs.lock import HAS_FLOCK, try_lock, wait_for_lock
from ..errors import SessionError

__all__ = [
    "LOCK_TIMEOUT_S",
    "O_BINARY",
    "O_CLOEXEC",
    "UNGUARDED",
    "AppendFailed",
    "append_whole",
    "open_regular",
    "read_exact",
    "read_from",
    "read_settled",
    "take_lock",
    "try_side_lock",
    "write_all",
]

O_BINARY: int = getattr(os, "O_BINARY", 0)
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)

LOCK_TIMEOUT_S = 10.0
"""How long an append waits for another pi-condense writer's lock before it gives up."""


UNGUARDED = -1
"""What :func:`try_side_lock` returns when nothing can be guarded."""


def try_side_lock(path: Optional[Path], purpose: str) -> Optional[int]:
    """``flock`` (never waited on) of ``.<session name>.pi-condense-<purpose>.lock`` beside
    the session: its descriptor, None when another holder has it (another process, or another
    open of it in this one), or :data:`UNGUARDED` when nothing can be guarded (in memory,
    Windows, a directory we cannot write)."""
    if path is None or not HAS_FLOCK:
        return UNGUARDED
    lock_path = path.with_name(f".{path.name}.pi-condense-{purpose}.lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | O_CLOEXEC, 0o600)
    except OSError:
        return UNGUARDED
    try:
        held = try_lock(fd)
    except OSError:
        held = False
    if not held:
        os.close(fd)
        return None
    return fd


def take_lock(fd: int, name: str, timeout: float) -> None:
    """Take the exclusive append lock, waiting at most ``timeout`` seconds."""
    if not wait_for_lock(fd, timeout):
        raise SessionError(
            f"{name}: timed out after {timeout:g} s waiting for the append lock (another "
            "pi-condense process holds it: is it stuck?); nothing was written"
        )


def open_regular(name: str, flags: int, what: str) -> int:
    """Open ``name`` without blocking on a FIFO or device and check that it is a regular
    file; raises :class:`SessionError` naming it otherwise."""
    try:
        fd = os.open(name, flags | O_BINARY | O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise SessionError(f"{name}: cannot open {what}: {exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise SessionError(f"{name}: cannot read {what}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise SessionError(f"{name}: cannot read {what}: not a regular file ({_kind(mode)})")
    return fd


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def read_from(fd: int, offset: int) -> bytes:
    """All bytes from ``offset`` to the end of the file."""
    os.lseek(fd, offset, os.SEEK_SET)
    # One read of the size the file has now (plus a little for a line being appended), so
    # the usual whole-file read is not copied again by a join.
    want = max(os.fstat(fd).st_size - offset, 0) + (1 << 16)
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, want)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        want = 1 << 20


# A line another writer is appending right now can be read half-written: the kernel grows the
# file page by page, so a line that crosses a page boundary shows its first part first.
_SETTLE_WAITS_S = (0.0005, 0.001, 0.002, 0.004, 0.008)


def read_settled(fd: int, offset: int) -> bytes:
    """:func:`read_from`, but a read that ends inside a line waits briefly for the rest.

    Every writer appends whole lines with one ``write``; a last line without its newline is
    either such a write still in flight (it completes within microseconds) or a remnant of a
    crash (it never does). Without the wait, the in-flight line's first part would be
    consumed as a torn line and the rest later skipped as glued onto it. Our own appends
    first reserve their lines as whitespace and then write them in place
    (:func:`append_whole`): whitespace-only lines at the end are left unread, and a last line
    that ends in spaces (no JSON line does) is such a write in flight, waited for the same way.
    """
    data = read_from(fd, offset)
    idle = 0
    for wait in _SETTLE_WAITS_S:
        if not data or (data.endswith(b"\n") and not _kept(data).endswith(b" \n")):
            break
        time.sleep(wait)
        if data.endswith(b"\n"):
            again = read_from(fd, offset)  # a reserved line written in place
            changed = again != data
            data = again
        else:
            more = read_from(fd, offset + len(data))
            changed = bool(more)
            data += more
        idle = 0 if changed else idle + 1
        if idle == 2:
            break
    return _kept(data)


def _kept(data: bytes) -> bytes:
    """``data`` without the whitespace-only lines it ends with: an append in flight reserves
    its bytes as whitespace before it writes them in place (see :func:`append_whole`), so a
    reader that consumed them now would miss the line they become. They are read once
    something follows them (a blank line stays blank: nothing is lost by waiting)."""
    end = len(data.rstrip(b" \n"))
    if end == len(data):
        return data
    if end == 0:
        return b""
    newline = data.find(b"\n", end)
    return data if newline < 0 else data[: newline + 1]


def read_exact(fd: int, offset: int, size: int) -> bytes:
    os.lseek(fd, offset, os.SEEK_SET)
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = os.read(fd, remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class AppendFailed(Exception):
    """An append that did not complete: ``cause`` is the write's (or fsync's) error and
    ``undo`` says what became of the bytes that reached the file (empty if none did)."""

    def __init__(self, cause: OSError, undo: str) -> None:
        super().__init__(cause.strerror or str(cause))
        self.cause = cause
        self.undo = undo


# Every byte but the newline becomes a space: a newline already written stays one (it ends
# a line that was torn before our append, or our own line), everything else reads as blank.
_BLANK = bytes(0x0A if b == 0x0A else 0x20 for b in range(256))


def append_whole(fd: int, data: bytes, name: str, *, sync: bool = True) -> int:
    """Append ``data`` (whole lines) to ``fd`` (opened with ``O_APPEND``) and fsync it
    (``sync=False``: the caller fsyncs later); returns the offset it starts at. All or
    nothing: if a write or the fsync fails (ENOSPC, EFBIG, EIO, ...), the bytes of ``data``
    that reached the file are overwritten in place with spaces before :class:`AppendFailed`
    is raised.

    Blanking in place, and not truncating back, because the other writer (Pi) appends without
    our lock: a line it appended after our fragment, or in the moment between checking the
    size and truncating, would be cut off by a truncate, while an overwrite of our own bytes
    never touches its bytes and never grows the file (so it works on a full disk). What is
    left is whitespace, which every JSON Lines reader (Pi's ``JSON.parse`` of each line, ours)
    reads as a blank line or as leading space of the next writer's line: nothing is glued.

    Killed in the middle (SIGKILL, which no process can catch), a write is cut where the kernel
    noticed the signal: Linux checks for it between the pages a write covers. So the lines are
    first appended as their own shape in whitespace (spaces, the newlines in place), then
    written over in place: a kill during the first write leaves whitespace without a newline,
    which the next writer's line reads as leading space; a kill during the second leaves our
    unacknowledged line cut short but still ended by its newline, skipped on load with a
    warning. Either way no other writer's line is glued to ours.
    """
    pieces: list[tuple[int, int, int]] = []  # (file offset, offset in data, length)
    done = 0
    # (native: ten times a translate's speed on a late join's megabytes of lines)
    shape = blank_lines(data) if _FILL_IN_PLACE else data
    try:
        while done < len(data):
            written = os.write(fd, memoryview(shape)[done:])
            if written <= 0:
                raise OSError(errno.EIO, "the write made no progress")
            end = os.lseek(fd, 0, os.SEEK_CUR)
            pieces.append((end - written, done, written))
            done += written
        first, last = pieces[0], pieces[-1]
        if last[0] + last[2] - first[0] != len(data):
            # Another writer appended between two parts of ours: the line is split.
            raise OSError(errno.EIO, "another writer's line landed inside ours")
        if _FILL_IN_PLACE:
            _fill(fd, first[0], data)
        if sync:
            os.fsync(fd)
        return first[0]
    except OSError as exc:
        raise AppendFailed(exc, _undo(fd, name, data, pieces)) from exc


_FILL_IN_PLACE = hasattr(os, "pwrite") and sys.platform != "win32"
"""Whether appends reserve their bytes as whitespace first (see :func:`append_whole`)."""


def _fill(fd: int, offset: int, data: bytes) -> None:
    """Write ``data`` at ``offset`` of ``fd``, an ``O_APPEND`` descriptor: with the flag set,
    Linux's ``pwrite`` appends whatever the offset, so it is cleared for the write (the
    descriptor is our own, opened for this session) and set again after it."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_APPEND)
    try:
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            if written <= 0:
                raise OSError(errno.EIO, "the write made no progress")
            view = view[written:]
            offset += written
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def _undo(fd: int, name: str, data: bytes, pieces: list[tuple[int, int, int]]) -> str:
    if not pieces:
        return ""
    count = sum(length for _, _, length in pieces)
    try:
        # A descriptor of our own without O_APPEND (with it, a positioned write appends).
        other = os.open(name, os.O_WRONLY | O_BINARY | O_CLOEXEC)
        try:
            ours, theirs = os.fstat(fd), os.fstat(other)
            if (ours.st_dev, ours.st_ino) != (theirs.st_dev, theirs.st_ino):
                raise OSError(errno.ESTALE, "the session file was replaced")
            for offset, start, length in pieces:
                os.lseek(other, offset, os.SEEK_SET)
                write_all(other, data[start : start + length].translate(_BLANK))
            os.fsync(other)
        finally:
            os.close(other)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        start, end = pieces[0][0], pieces[-1][0] + pieces[-1][2]
        try:
            # The last resort: nothing follows our fragment, so cutting it off loses no line.
            if os.fstat(fd).st_size == end:
                os.ftruncate(fd, start)
                return f"the {count} bytes that reached the file were cut off again"
        except OSError:
            pass
        return (
            f"{count} bytes of the entry reached the file at offset {start} and could not be "
            f"blanked ({reason}): that line is skipped on load"
        )
    return f"the {count} bytes that reached the file were blanked, so the file reads as before"
