"""Replacing a session file in place without ever losing a line another writer appended.

``condense --in-place`` writes a new file and swaps it in for the session. Pi may append to
the session at any moment, without a lock, so the swap is done as follows:

1. the new content goes to a temporary file beside the session (flock-ed for as long as it
   exists, fsynced, with the session's permission bits);
2. under our append lock on the session, the session is checked to be byte for byte what was
   condensed (size and SHA-256), else nothing is replaced;
3. the backup is a hard link to the session's own inode (no copy: never torn, and a line
   appended up to the swap is in it); where hard links are not available, a fsynced copy
   renamed into place;
4. the temporary file is renamed over the session;
5. if the old inode grew after the check (a line appended between the check and the swap),
   the original is put back (with those lines, and any line that reached the new file in the
   meantime) and the command fails: nothing was replaced, nothing was lost.

A run killed at any point leaves the session intact or replaced, never torn; what it leaves
behind (temporary files, a backup that is still the session's own inode) is recognized and
cleaned up by the next run. Temporary files are named ``.<name>.pi-condense-<hex>.tmp``; one
is stale when no process holds its lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .errors import CondenseError
from .flock import try_lock, wait_for_lock
from .fsio import fsync_dir
from .session.lock import read_from

__all__ = [
    "Fingerprint",
    "InPlaceError",
    "backup_blocker",
    "clean_stale_temps",
    "fingerprint",
    "replace_in_place",
    "write_new",
]

_TAG = ".pi-condense-"
_CHUNK = 1 << 20
_SETTLE_S = 0.05


class InPlaceError(CondenseError):
    """The session was not replaced (it changed, or a write failed); the message says why."""


@dataclass(frozen=True)
class Fingerprint:
    """Size and SHA-256 of a file's bytes."""

    size: int
    sha256: str


def _lock(fd: int, name: str, timeout: float) -> None:
    if not wait_for_lock(fd, timeout):
        raise InPlaceError(
            f"{name}: timed out after {timeout:g} s waiting for the append lock (another "
            "pi-condense process holds it); nothing was replaced"
        )


def _hash_fd(fd: int) -> Fingerprint:
    digest = hashlib.sha256()
    size = 0
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return Fingerprint(size, digest.hexdigest())
        size += len(chunk)
        digest.update(chunk)


def fingerprint(path: Path) -> Fingerprint:
    """The file's size and SHA-256 (streamed)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        return _hash_fd(fd)
    finally:
        os.close(fd)


def _temp_name(target: Path) -> Path:
    return target.with_name(f".{target.name}{_TAG}{secrets.token_hex(6)}.tmp")


def clean_stale_temps(target: Path) -> list[Path]:
    """Remove the temporary files an interrupted run left for ``target`` (those no live
    process holds locked); returns them."""
    prefix = f".{target.name}{_TAG}"
    removed: list[Path] = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        candidate = target.parent / name
        try:
            fd = os.open(candidate, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            if try_lock(fd):
                candidate.unlink()
                removed.append(candidate)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


class _Temp:
    """A locked temporary file beside ``target`` holding ``data`` (fsynced)."""

    def __init__(self, target: Path, data: bytes, mode: Optional[int]) -> None:
        self.path = _temp_name(target)
        self.fd = os.open(
            self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600
        )
        try:
            with contextlib.suppress(OSError):  # the lock only marks it as in use
                try_lock(self.fd)
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
            if mode is not None and hasattr(os, "fchmod"):
                os.fchmod(self.fd, mode)
            elif mode is None and hasattr(os, "fchmod"):
                umask = os.umask(0)
                os.umask(umask)
                os.fchmod(self.fd, 0o666 & ~umask)
            os.fsync(self.fd)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def write_new(target: Path, data: bytes) -> None:
    """Write ``target`` atomically (locked temp file, fsync, rename, directory fsync); stale
    temporary files of earlier interrupted runs are removed first."""
    clean_stale_temps(target)
    mode = None
    with contextlib.suppress(OSError):
        mode = stat.S_IMODE(os.stat(target).st_mode)
    temp = _Temp(target, data, mode)
    try:
        os.replace(temp.path, target)
    except BaseException:
        temp.discard()
        raise
    temp.close()
    fsync_dir(target.parent)


def backup_blocker(path: Path, backup: Path, force: bool) -> Optional[str]:
    """Why ``backup`` may not be (over)written, or None. A backup that is still the session's
    own inode is what a run killed before its swap leaves: it is no backup and is replaced."""
    if force or not os.path.lexists(backup):
        return None
    with contextlib.suppress(OSError):
        if os.path.samefile(backup, path):
            return None
    return (
        f"{backup} exists (the backup of an earlier condense --in-place; "
        "use --force to overwrite it)"
    )


def _backup(path: Path, backup: Path, old_fd: int) -> bool:
    """Make ``backup`` the session's content; True when it is a hard link to its inode."""
    link = _temp_name(backup)
    try:
        os.link(path, link)
        linked = True
    except OSError:
        linked = False
        temp = _Temp(backup, b"", None)
        try:
            os.lseek(old_fd, 0, os.SEEK_SET)
            with (
                os.fdopen(os.dup(old_fd), "rb") as source,
                os.fdopen(os.dup(temp.fd), "wb") as sink,
            ):
                shutil.copyfileobj(source, sink, _CHUNK)
                sink.flush()
                os.fsync(sink.fileno())
        except BaseException:
            temp.discard()
            raise
        link = temp.path
        temp.close()
    try:
        os.replace(link, backup)
    finally:
        # rename() between two links of one inode does nothing: drop the temporary name.
        with contextlib.suppress(OSError):
            link.unlink()
    fsync_dir(backup.parent)
    return linked


def replace_in_place(
    path: Path,
    data: bytes,
    backup: Path,
    expected: Fingerprint,
    *,
    lock_timeout: float = 10.0,
) -> None:
    """Replace ``path`` by ``data``, keeping the original as ``backup`` (see the module
    docstring). Raises :class:`InPlaceError` when nothing was replaced."""
    name = str(path)
    for target in (path, backup):
        clean_stale_temps(target)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        temp = _Temp(path, data, mode)
    except OSError as exc:
        raise InPlaceError(f"{name}: cannot write the condensed file: {exc}") from exc
    try:
        old_fd = os.open(path, os.O_RDWR | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        temp.discard()
        raise InPlaceError(f"{name}: cannot open: {exc}") from exc
    try:
        _lock(old_fd, name, lock_timeout)
        if _hash_fd(old_fd) != expected:
            temp.discard()
            raise InPlaceError(
                f"{name} changed while it was being condensed (is Pi still writing it?); "
                "nothing was replaced"
            )
        try:
            linked = _backup(path, backup, old_fd)
            os.replace(temp.path, path)
        except OSError as exc:
            temp.discard()
            raise InPlaceError(f"{name}: cannot replace: {exc}; nothing was replaced") from exc
        fsync_dir(path.parent)
        time.sleep(_SETTLE_S)  # an appender that opened the old name just before the swap
        grown = os.fstat(old_fd).st_size
        if grown != expected.size:
            _restore(path, backup, old_fd, temp.fd, len(data), linked)
            raise InPlaceError(
                f"{name}: a line was appended while the file was being replaced (is Pi "
                "still writing it?); the original, with the new lines, is back in place and "
                "nothing was replaced"
            )
        temp.close()
    finally:
        temp.close()
        os.close(old_fd)


def _restore(
    path: Path, backup: Path, old_fd: int, new_fd: int, new_size: int, linked: bool
) -> None:
    """Put the original inode's content back at ``path``, plus what reached the new file."""
    if linked:
        os.replace(backup, path)
    else:
        original = _Temp(path, read_from(old_fd, 0), stat.S_IMODE(os.fstat(old_fd).st_mode))
        os.replace(original.path, path)
        original.close()
        with contextlib.suppress(OSError):
            backup.unlink()
    fsync_dir(path.parent)
    late = read_from(new_fd, new_size)
    if late:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_BINARY", 0))
        try:
            os.write(fd, late)
            os.fsync(fd)
        finally:
            os.close(fd)
