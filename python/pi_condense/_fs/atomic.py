"""Durable file writes shared by the session, settings, spill and CLI writers, and the bounded
reads of input files."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import zlib
from pathlib import Path
from typing import Optional, Union

StrPath = Union[str, "os.PathLike[str]"]


def fsync_dir(directory: StrPath) -> None:
    """Flush a directory's entries (a rename or a new file) to disk; best effort, POSIX only."""
    if sys.platform == "win32":  # pragma: no cover
        return
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(
    target: StrPath, data: bytes, tmp: StrPath, *, mode_from: Optional[StrPath] = None
) -> None:
    """Write `data` to the temporary file `tmp` (same directory, must not exist), fsync it,
    copy the permission bits of `mode_from` when it exists, rename it over `target` and fsync
    the directory. On any failure the temporary file is removed and `target` is untouched."""
    tmp_path = Path(tmp)
    try:
        with open(tmp_path, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode_from is not None:
            with contextlib.suppress(OSError):
                os.chmod(tmp_path, os.stat(mode_from).st_mode & 0o7777)
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        raise
    fsync_dir(tmp_path.parent)


GZIP_MIN_LIMIT = 64 * 1024 * 1024
"""A gzip input may always decompress to this many bytes..."""
GZIP_MAX_RATIO = 100
"""...or to this many times its compressed size, whichever is more; beyond, it is refused
(a decompression bomb; real session files compress 5-20x)."""


class InputError(OSError):
    """An input file that cannot be used (not a regular file, corrupt or oversized gzip);
    the message says why, without the path (callers name it)."""


def read_regular(path: StrPath) -> bytes:
    """The bytes of a regular file; a FIFO, device, socket or directory is refused at once
    (opened without blocking) instead of hanging or growing without bound."""
    fd = os.open(
        path,
        os.O_RDONLY
        | getattr(os, "O_BINARY", 0)
        | getattr(os, "O_CLOEXEC", 0)
        | getattr(os, "O_NONBLOCK", 0),
    )
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a directory"
                if stat.S_ISDIR(mode)
                else "a device or socket"
            )
            raise InputError(f"not a regular file ({kind})")
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def gunzip_bounded(data: bytes, limit: Optional[int] = None) -> bytes:
    """Decompress a gzip stream (several members allowed) to at most ``limit`` bytes
    (default: :data:`GZIP_MIN_LIMIT` or :data:`GZIP_MAX_RATIO` times the input); a corrupt,
    truncated or oversized stream raises :class:`InputError`."""
    cap = limit if limit is not None else max(GZIP_MIN_LIMIT, GZIP_MAX_RATIO * len(data))
    out: list[bytes] = []
    size = 0
    pending = memoryview(data)
    step = 16 * 1024  # input per call: bounds one call's output (deflate expands <= 1032x)
    while True:
        stream = zlib.decompressobj(wbits=31)
        try:
            while not stream.eof:
                if not pending:
                    raise InputError("truncated gzip stream (it ends before its last block)")
                piece = stream.decompress(pending[:step])
                pending = pending[step:]
                size += len(piece)
                if size > cap:
                    raise InputError(
                        f"the gzip stream decompresses to more than {cap:,} bytes "
                        f"({len(data):,} compressed): refused as a decompression bomb"
                    )
                out.append(piece)
        except zlib.error as exc:
            raise InputError(f"corrupt gzip stream ({exc})") from None
        leftover = stream.unused_data + bytes(pending)
        if not leftover.strip(b"\0"):
            return b"".join(out)
        pending = memoryview(leftover)


def read_input(path: StrPath) -> bytes:
    """:func:`read_regular`, decompressed (bounded) when the name ends in ``.gz``."""
    data = read_regular(path)
    return gunzip_bounded(data) if os.fspath(path).endswith(".gz") else data
