"""Real small disks for the disk-full tests: a tmpfs mounted in the test's tmp dir."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (``"64k"``) at ``where/mnt`` (the tests run as root); it
    is unmounted on exit. A sandbox that cannot mount fails the test loudly: the file size
    limit (RLIMIT_FSIZE) tests cover the same code path, but not the full disk itself."""
    mnt = where / "mnt"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"CANNOT MOUNT A TMPFS HERE: {done.stderr.strip()}"
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def fill(directory: Path) -> Path:
    """Fill the file system until a write fails; returns the filler file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 1024)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler
