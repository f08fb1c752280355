"""Durable file writes shared by the session, settings, spill and CLI writers."""

from __future__ import annotations

import contextlib
import os
import sys
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
