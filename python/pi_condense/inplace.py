"""Replacing a session file in place without ever losing a line another writer appended.

``condense --in-place`` writes a new file and swaps it in for the session. Pi may append to
the session at any moment, without a lock, so the swap is done as follows:

1. the new content goes to a temporary file beside the session (flock-ed for as long as it
   exists, fsynced, with the session's permission bits);
2. under our append lock on the session, the session is checked to be byte for byte what was
   condensed (size and SHA-256), else nothing is replaced;
3. the backup is a hard link to the session's own inode (no copy: never torn, and a line
   appended up to the swap is in it), made with ``link()``, which never replaces an existing
   file; where hard links are not available, a fsynced copy renamed into place after checking
   that no backup exists;
4. the temporary file is renamed over the session;
5. if the old inode grew after the check (a line appended between the check and the swap),
   the original is put back (with those lines, and any line that reached the new file in the
   meantime) and the command fails: nothing was replaced, nothing was lost.

A run killed at any point leaves the session intact or replaced, never torn; what it leaves
behind (temporary files, a backup that is still the session's own inode) is recognized and
cleaned up by the next run. Temporary files are named ``.<name>.pi-condense-<hex>.tmp``; one
is stale when no process holds its lock.

The backup is the one pristine copy of the original (every branch the condensed file does
not carry), so it is never overwritten, whatever the options. The condensed file's header
names what it was condensed from (``"condensedFrom": {"size": N, "sha256": "..."}``): a
session whose header names the first N bytes of its backup is *already condensed in place*
(:func:`prior_run`), and a rerun skips it. A symbolic link to a session is resolved: the real
file is replaced (the link keeps naming it) and its backup sits beside it. The new file keeps
the session's permission bits and, where the process may set them, its owner and group.
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

from ._fs.atomic import fsync_dir
from ._fs.lock import try_lock, wait_for_lock
from .errors import CondenseError, JsonError
from .js import json as jsjson
from .session.lock import read_from

__all__ = [
    "MARK",
    "Fingerprint",
    "InPlaceError",
    "Prior",
    "check_output",
    "clean_stale_temps",
    "condensed_from",
    "fingerprint",
    "in_place_paths",
    "mark_condensed",
    "prior_run",
    "replace_in_place",
    "write_new",
]

MARK = "condensedFrom"
"""The header key of an in-place result: the size and SHA-256 of the file it replaced."""

_TAG = ".pi-condense-"
_CHUNK = 1 << 20
_SETTLE_S = 0.05
_HEADER_MAX = 1 << 20
_Owner = tuple[int, int]


class InPlaceError(CondenseError):
    """The session was not replaced (it changed, or a write failed); the message says why."""


@dataclass(frozen=True)
class Fingerprint:
    """Size and SHA-256 of a file's bytes."""

    size: int
    sha256: str


@dataclass(frozen=True)
class Prior:
    """What an earlier ``--in-place`` run left: ``done`` (skip the session, the message says
    so) or not (refuse: the backup exists and is not the session's original)."""

    done: bool
    message: str


def _lock(fd: int, name: str, timeout: float) -> None:
    if not wait_for_lock(fd, timeout):
        raise InPlaceError(
            f"{name}: timed out after {timeout:g} s waiting for the append lock (another "
            "pi-condense process holds it); nothing was replaced"
        )


def _hash_fd(fd: int, limit: Optional[int] = None) -> Fingerprint:
    digest = hashlib.sha256()
    size = 0
    os.lseek(fd, 0, os.SEEK_SET)
    while limit is None or size < limit:
        want = _CHUNK if limit is None else min(_CHUNK, limit - size)
        chunk = os.read(fd, want)
        if not chunk:
            break
        size += len(chunk)
        digest.update(chunk)
    return Fingerprint(size, digest.hexdigest())


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


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


class _Temp:
    """A locked temporary file beside ``target`` holding ``data`` (fsynced), with permission
    bits ``mode`` (None: the umask's) and, where this process may set it, ``owner``."""

    def __init__(
        self, target: Path, data: bytes, mode: Optional[int], owner: Optional[_Owner] = None
    ) -> None:
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
            if owner is not None and hasattr(os, "fchown"):
                uid, gid = owner
                if (uid, gid) != (os.geteuid(), os.getegid()):
                    # Only root may give a file away; others keep what they may (EPERM).
                    with contextlib.suppress(OSError):
                        os.fchown(self.fd, uid, gid)
                    with contextlib.suppress(OSError):
                        os.fchown(self.fd, -1, gid)
            if hasattr(os, "fchmod"):
                os.fchmod(self.fd, _default_mode() if mode is None else mode)
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


def check_output(target: Path, source: Optional[Path] = None) -> Path:
    """The file an output option ``target`` names, ready to be written: ``target`` itself,
    or the file a symbolic link names (the link is kept). Raises :class:`InPlaceError` when
    it is ``source`` itself (by any path, hard or symbolic link: that is ``--in-place``),
    not a regular file (a FIFO, device, socket or directory is never replaced), a link to
    nothing, or the backup of a session condensed in place."""
    real = Path(os.path.realpath(target)) if os.path.islink(target) else target
    try:
        info = os.stat(real)
    except FileNotFoundError:
        if os.path.islink(target):
            raise InPlaceError(f"{target}: a symbolic link to nothing ({real})") from None
        return real
    except OSError as exc:
        raise InPlaceError(f"{target}: cannot use as the output: {exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise InPlaceError(f"{target}: not a regular file; only a regular file is replaced")
    if real.name.endswith(".bak"):
        session = real.with_name(real.name[: -len(".bak")])
        prior = prior_run(session, real) if session.exists() else None
        if prior is not None and prior.done:
            raise InPlaceError(
                f"{target} is the original {session} was condensed in place from; it is "
                "never overwritten"
            )
    if source is not None:
        with contextlib.suppress(OSError):
            if os.path.samefile(real, source):
                raise InPlaceError(
                    f"{target} is the session itself; use --in-place to replace it (its "
                    "original is kept as a backup)"
                )
    return real


def write_new(target: Path, data: bytes, mode: Optional[int] = None) -> None:
    """Write ``target`` atomically (locked temp file, fsync, rename, directory fsync); stale
    temporary files of earlier interrupted runs are removed first. The file's permission
    bits are ``mode`` (None: the umask's), and never more open than those of the file it
    replaces."""
    clean_stale_temps(target)
    bits = _default_mode() if mode is None else mode & 0o777
    with contextlib.suppress(OSError):
        bits &= stat.S_IMODE(os.stat(target).st_mode)
    temp = _Temp(target, data, bits)
    try:
        os.replace(temp.path, target)
    except BaseException:
        temp.discard()
        raise
    temp.close()
    fsync_dir(target.parent)


def in_place_paths(path: Path) -> tuple[Path, Path]:
    """(the real session file, its backup): a symbolic link is resolved, so the file it
    names is replaced and the link kept; the backup sits beside the real file."""
    real = Path(os.path.realpath(path))
    return real, real.with_name(real.name + ".bak")


def mark_condensed(data: bytes, source: Fingerprint) -> bytes:
    """``data`` (a session file) with its header naming ``source`` as what it replaced."""
    end = data.find(b"\n")
    end = len(data) if end < 0 else end
    header = jsjson.loads(data[:end])
    if not isinstance(header, dict):
        raise InPlaceError("the condensed session has no header to mark")
    header[MARK] = {"size": source.size, "sha256": source.sha256}
    return jsjson.dumps(header).encode("utf-8") + data[end:]


def condensed_from(path: Path) -> Optional[Fingerprint]:
    """What the session at ``path`` was condensed in place from (its header's mark), or
    None when it holds no mark (or cannot be read)."""
    try:
        fd = _open_regular(path)
        with os.fdopen(fd, "rb") as handle:
            first = handle.readline(_HEADER_MAX)
        header = jsjson.loads(first)
    except (OSError, JsonError, ValueError, InPlaceError):
        return None
    mark = header.get(MARK) if isinstance(header, dict) else None
    if not isinstance(mark, dict):
        return None
    size, sha256 = mark.get("size"), mark.get("sha256")
    if type(size) is not int or size < 0 or not isinstance(sha256, str):
        return None
    return Fingerprint(size, sha256)


def _open_regular(path: Path, follow: bool = True) -> int:
    """A read descriptor of the regular file ``path`` (a FIFO is not waited for)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags if follow else flags | getattr(os, "O_NOFOLLOW", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InPlaceError(f"{path}: not a regular file")
    return fd


def _starts_with(backup: Path, source: Fingerprint) -> bool:
    try:
        fd = _open_regular(backup, follow=False)
    except (OSError, InPlaceError):
        return False
    try:
        return _hash_fd(fd, source.size) == source
    finally:
        os.close(fd)


def prior_run(path: Path, backup: Path) -> Optional[Prior]:
    """What an earlier ``--in-place`` run of the real session ``path`` left at ``backup``:
    None when the session may be condensed in place (no backup, or one that is still the
    session's own inode: a run killed before its swap); done when the session's header names
    the first bytes of the backup (a line appended to the old file while it was swapped may
    follow them); else a refusal: the backup is never overwritten."""
    if not os.path.lexists(backup):
        return None
    with contextlib.suppress(OSError):
        if os.path.samefile(backup, path):
            return None
    source = condensed_from(path)
    if source is not None and _starts_with(backup, source):
        return Prior(
            True, f"{path}: already condensed in place (its original is {backup}); skipped"
        )
    return Prior(
        False,
        f"{backup} exists and is not the original of what {path} holds now; it is never "
        f"overwritten (move it away to condense {path} in place again)",
    )


def _backup(path: Path, backup: Path, old_fd: int) -> bool:
    """Make ``backup`` the session's content; True when it is a hard link to its inode.
    An existing backup is never replaced (one that is already the session's inode is
    kept as it is)."""
    with contextlib.suppress(OSError):
        if os.path.samefile(backup, path):
            return True
    try:
        os.link(path, backup)
    except FileExistsError:
        raise InPlaceError(f"{backup} exists; it is never overwritten") from None
    except OSError:
        _copy_backup(backup, old_fd)
        return False
    fsync_dir(backup.parent)
    return True


def _copy_backup(backup: Path, old_fd: int) -> None:
    info = os.fstat(old_fd)
    temp = _Temp(backup, b"", stat.S_IMODE(info.st_mode), (info.st_uid, info.st_gid))
    try:
        os.lseek(old_fd, 0, os.SEEK_SET)
        with (
            os.fdopen(os.dup(old_fd), "rb") as source,
            os.fdopen(os.dup(temp.fd), "wb") as sink,
        ):
            shutil.copyfileobj(source, sink, _CHUNK)
            sink.flush()
            os.fsync(sink.fileno())
        if os.path.lexists(backup):  # no hard links, so no rename that refuses: check
            raise InPlaceError(f"{backup} exists; it is never overwritten")
        os.replace(temp.path, backup)
    except BaseException:
        temp.discard()
        raise
    temp.close()
    fsync_dir(backup.parent)


def _same_inode(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def replace_in_place(
    path: Path,
    data: bytes,
    backup: Path,
    expected: Fingerprint,
    *,
    lock_timeout: float = 10.0,
) -> None:
    """Replace the real session file ``path`` (see :func:`in_place_paths`) by ``data``,
    marked as condensed from ``expected``, keeping the original as ``backup`` (see the
    module docstring). Raises :class:`InPlaceError` when nothing was replaced."""
    name = str(path)
    for target in (path, backup):
        clean_stale_temps(target)
    data = mark_condensed(data, expected)
    try:
        info = os.stat(path)
        temp = _Temp(path, data, stat.S_IMODE(info.st_mode), (info.st_uid, info.st_gid))
    except OSError as exc:
        raise InPlaceError(f"{name}: cannot write the condensed file: {exc}") from exc
    try:
        old_fd = os.open(path, os.O_RDWR | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        temp.discard()
        raise InPlaceError(f"{name}: cannot open: {exc}") from exc
    try:
        _lock(old_fd, name, lock_timeout)
        # Under the lock: the name still holds the inode we locked (another run may have
        # swapped it meanwhile), with the bytes that were condensed, and no backup appeared.
        try:
            current: Optional[os.stat_result] = os.stat(path)
        except OSError:
            current = None
        if current is None or not _same_inode(current, os.fstat(old_fd)):
            temp.discard()
            raise InPlaceError(
                f"{name} was replaced while it was being condensed; nothing was replaced"
            )
        if _hash_fd(old_fd) != expected:
            temp.discard()
            raise InPlaceError(
                f"{name} changed while it was being condensed (is Pi still writing it?); "
                "nothing was replaced"
            )
        prior = prior_run(path, backup)
        if prior is not None:
            temp.discard()
            raise InPlaceError(f"{prior.message}; nothing was replaced")
        try:
            linked = _backup(path, backup, old_fd)
            os.replace(temp.path, path)
        except OSError as exc:
            temp.discard()
            raise InPlaceError(f"{name}: cannot replace: {exc}; nothing was replaced") from exc
        except InPlaceError:
            temp.discard()
            raise
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
        info = os.fstat(old_fd)
        original = _Temp(
            path, read_from(old_fd, 0), stat.S_IMODE(info.st_mode), (info.st_uid, info.st_gid)
        )
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
