"""Finding the session files of a corpus: files, directories (recursively) and globs.

A session file ends in ``.jsonl`` or ``.jsonl.gz``. Local paths are plain paths; an URL
(``s3://bucket/prefix``, ``gs://...``, ``file://...``) is listed through fsspec when it is
installed (workers then open the same URL themselves).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..config import agent_dir
from ..errors import CondenseError

__all__ = ["SESSION_SUFFIXES", "CorpusError", "SessionSource", "default_root", "discover"]

SESSION_SUFFIXES = (".jsonl", ".jsonl.gz")
_GLOB_CHARS = frozenset("*?[")


class CorpusError(CondenseError):
    """A corpus input cannot be found or listed."""


@dataclass(frozen=True)
class SessionSource:
    """One session file: where it is, the input root it was found under, its size."""

    path: str
    root: str
    """The directory given (or a glob's fixed prefix, or the file's parent): the output tree
    of ``corpus condense`` mirrors the file's place below it."""
    size: int

    @property
    def relative(self) -> str:
        """The path below ``root`` (``/``-separated)."""
        if is_url(self.path):
            return self.path[len(self.root) :].lstrip("/")
        return Path(os.path.relpath(self.path, self.root)).as_posix()


def default_root() -> Path:
    """Pi's sessions directory: ``<agentDir>/sessions``."""
    return agent_dir() / "sessions"


def is_url(path: str) -> bool:
    """Whether ``path`` is an fsspec URL (``scheme://...``) rather than a local path."""
    head, sep, _ = path.partition("://")
    return bool(sep) and head.isidentifier()


def is_session_name(name: str) -> bool:
    return name.endswith(SESSION_SUFFIXES)


def _local(arg: str) -> list[SessionSource]:
    path = Path(arg).expanduser()
    if _GLOB_CHARS & set(arg):
        root = _glob_root(arg)
        found = sorted(glob.glob(os.fspath(path), recursive=True))
        files = [f for f in found if os.path.isfile(f) and is_session_name(f)]
        dirs = [d for d in found if os.path.isdir(d)]
        sources = [SessionSource(f, root, os.path.getsize(f)) for f in files]
        for folder in dirs:
            sources.extend(_directory(Path(folder), root))
        return sources
    if path.is_dir():
        return _directory(path, os.fspath(path))
    if path.is_file():
        return [SessionSource(os.fspath(path), os.fspath(path.parent), path.stat().st_size)]
    raise CorpusError(f"{arg}: no such file or directory")


def _glob_root(pattern: str) -> str:
    parts: list[str] = []
    for part in Path(pattern).expanduser().parts:
        if _GLOB_CHARS & set(part):
            break
        parts.append(part)
    return os.fspath(Path(*parts)) if parts else "."


def _directory(folder: Path, root: str) -> list[SessionSource]:
    sources = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            if is_session_name(name):
                full = os.path.join(dirpath, name)
                sources.append(SessionSource(full, root, os.path.getsize(full)))
    return sources


def _remote(arg: str) -> list[SessionSource]:
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError as exc:
        raise CorpusError(f"{arg}: reading URLs needs fsspec (pip install fsspec)") from exc
    fs: Any
    fs, _, _ = fsspec.get_fs_token_paths(arg)
    protocol = arg.partition("://")[0]

    def url(p: str) -> str:
        return p if "://" in p else f"{protocol}://{p}"

    if _GLOB_CHARS & set(arg):
        names = fs.glob(arg)
        root = url(_glob_root(arg.partition("://")[2]))
    elif fs.isdir(arg):
        names = fs.find(arg)
        root = arg.rstrip("/")
    elif fs.isfile(arg):
        names = [arg]
        root = arg.rsplit("/", 1)[0]
    else:
        raise CorpusError(f"{arg}: no such file or directory")
    sources = []
    for name in sorted(names):
        if is_session_name(name) and fs.isfile(name):
            sources.append(SessionSource(url(name), root, int(fs.size(name) or 0)))
    return sources


def discover(paths: Optional[Sequence[str]] = None) -> list[SessionSource]:
    """The session files under ``paths`` (default: Pi's sessions directory), each once, in
    the order given (a directory's files sorted). Raises :class:`CorpusError` when a path
    does not exist."""
    args: Iterable[str] = paths if paths else [os.fspath(default_root())]
    seen: set[str] = set()
    sources: list[SessionSource] = []
    for arg in args:
        arg = os.fspath(arg)
        for source in _remote(arg) if is_url(arg) else _local(arg):
            key = source.path if is_url(source.path) else os.path.abspath(source.path)
            if key not in seen:
                seen.add(key)
                sources.append(source)
    return sources
