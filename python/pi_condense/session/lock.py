"""Low-level session file I/O: the advisory append lock, opening only regular files, reading
from an offset (waiting for a line still being written) and writing every byte."""

from __future__ import annotations

import os
import stat
import time

from ..errors import SessionError
from ..flock import wait_for_lock

__all__ = [
    "LOCK_TIMEOUT_S",
    "O_BINARY",
    "O_CLOEXEC",
    "open_regular",
    "read_exact",
    "read_from",
    "read_settled",
    "take_lock",
    "write_all",
]

O_BINARY: int = getattr(os, "O_BINARY", 0)
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)

LOCK_TIMEOUT_S = 10.0
"""How long an append waits for another pi-condense writer's lock before it gives up."""


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
    consumed as a torn line and the rest later skipped as glued onto it.
    """
    data = read_from(fd, offset)
    idle = 0
    for wait in _SETTLE_WAITS_S:
        if not data or data.endswith(b"\n"):
            break
        time.sleep(wait)
        more = read_from(fd, offset + len(data))
        if more:
            data += more
            idle = 0
        else:
            idle += 1
            if idle == 2:
                break
    return data


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
