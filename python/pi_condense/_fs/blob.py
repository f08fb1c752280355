"""Writing spill blobs atomically, and removing what a killed writer left behind.

A blob ``<name>`` is written to a temporary file ``.<name>.<12 hex>.tmp`` beside it, which the
writer holds flock-ed from just after creating it until it has been renamed over ``<name>``.
A writer killed in between leaves that file behind, unlocked. A process's first blob write to
a directory (and then at most once a minute) removes every such leftover: a regular file named
so, that no live process holds locked and that is at least :data:`STALE_AFTER` seconds old
(which covers the instant between another writer's create and its lock). Where there is no
``flock`` (Windows), a temporary file counts as stale once it is :data:`STALE_UNLOCKED` old.

Given the permission bits of the session file a blob belongs to, the blob is no more open
than that file and its directory no more open than the file with search (x) added where it
may be read: a 0600 session gets 0600 blobs in a 0700 directory; a directory that is more
open (made before, by a writer that did not know) is narrowed when we own it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import threading
import time
from typing import Optional

from .atomic import fsync_dir
from .lock import HAS_FLOCK, try_lock

__all__ = [
    "STALE_AFTER",
    "STALE_UNLOCKED",
    "clean_stale_temps",
    "dir_mode",
    "plain_session_id",
    "write_blob_bytes",
]

STALE_AFTER = 2.0
"""Seconds since its last change before an unlocked temporary file is removed."""
STALE_UNLOCKED = 3600.0
"""Without ``flock``: seconds since its last change before a temporary file is removed."""
RESCAN_AFTER = 60.0
"""A process lists a blob directory for leftovers at most this often."""

_TEMP_NAME = re.compile(r"\.[A-Za-z0-9_-]*(?:\.[0-9a-f]{16})?\.txt\.[0-9a-f]{12}\.tmp")
_NAME_MAX = 255
_scanned: dict[str, float] = {}
_scanned_lock = threading.Lock()


def plain_session_id(session_id: str) -> bool:
    """Whether ``<session_id>-blobs`` is a plain directory name on every platform: no path
    separator, no drive colon (``C:x`` is drive-relative on Windows), no NUL."""
    return not any(ch in session_id for ch in ("/", "\\", ":", "\0"))


def _temp_for(path: str) -> str:
    directory, name = os.path.split(path)
    # A blob name may itself be 255 bytes (spill.blob_name): shorten its first part so the
    # temporary name fits too. Blob names are ASCII.
    excess = len(name) + len("..123456789abc.tmp") - _NAME_MAX
    if excess > 0:
        stem, dot, rest = name.partition(".")
        name = stem[: max(0, len(stem) - excess)] + dot + rest
    return os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")


def dir_mode(mode: int) -> int:
    """The directory bits that match file bits ``mode``: ``x`` wherever ``r`` is set."""
    bits = mode & 0o777
    return bits | ((bits & 0o444) >> 2)


def _make_dir(directory: str, mode: Optional[int]) -> None:
    if mode is None:
        os.makedirs(directory, exist_ok=True)
        return
    allowed = dir_mode(mode)
    os.makedirs(directory, mode=allowed, exist_ok=True)
    if not hasattr(os, "geteuid"):  # pragma: no cover - Windows has no such bits
        return
    with contextlib.suppress(OSError):
        info = os.stat(directory)
        current = stat.S_IMODE(info.st_mode)
        if current & ~allowed and info.st_uid == os.geteuid():
            os.chmod(directory, current & allowed)


def write_blob_bytes(path: str, data: bytes, *, mode: Optional[int] = None) -> None:
    """Write ``data`` to ``path`` through a locked, fsynced temporary file renamed over it
    (parent directories created; stale leftovers of killed writers removed first). On any
    failure the temporary file is removed and ``path`` is untouched. ``mode``: the
    permission bits of the session file (module docs; None: the umask's)."""
    directory = os.path.dirname(path) or "."
    _make_dir(directory, mode)
    _clean_now_and_then(directory)
    tmp = _temp_for(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666 if mode is None else mode & 0o666)
    open_fd = True
    try:
        with contextlib.suppress(OSError):  # the lock only marks it as in use
            try_lock(fd)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        if not HAS_FLOCK:  # pragma: no cover - Windows cannot rename an open file
            os.close(fd)
            open_fd = False
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        if open_fd:
            os.close(fd)
    fsync_dir(directory)


def _clean_now_and_then(directory: str) -> None:
    now = time.monotonic()
    key = os.path.abspath(directory)
    with _scanned_lock:
        last = _scanned.get(key)
        if last is not None and now - last < RESCAN_AFTER:
            return
        _scanned[key] = now
    clean_stale_temps(directory)


def clean_stale_temps(directory: str, *, now: Optional[float] = None) -> list[str]:
    """Remove the temporary blob files killed writers left in ``directory`` (see the module
    docs for which); returns their paths. Errors (a file gone meanwhile, no permission) leave
    the file where it is."""
    wall = time.time() if now is None else now
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        if not _TEMP_NAME.fullmatch(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        age = wall - info.st_mtime
        if not stat.S_ISREG(info.st_mode) or age < STALE_AFTER:
            continue
        if _remove_if_stale(entry.path, age):
            removed.append(entry.path)
    return removed


def _remove_if_stale(path: str, age: float) -> bool:
    if not HAS_FLOCK:  # pragma: no cover - Windows
        if age < STALE_UNLOCKED:
            return False
        with contextlib.suppress(OSError):
            os.unlink(path)
            return True
        return False
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        if not try_lock(fd):
            return False  # a live writer holds it
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
