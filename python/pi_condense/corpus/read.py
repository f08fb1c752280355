"""Reading one session file on a worker: local path or fsspec URL, ``.gz`` or not."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .._fs.atomic import InputError, gunzip_bounded, read_regular
from ..errors import CondenseError
from ..session import SessionFile
from .discover import is_url
from .models import Problem

__all__ = ["LoadedSession", "SessionReadError", "content_hash", "load_session", "read_bytes"]

_LINE = re.compile(r"\bline (\d+)\b")


class SessionReadError(CondenseError):
    """A session file cannot be read or is not a Pi session; ``line`` when one is to blame."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class LoadedSession:
    """A parsed session with the facts of its file."""

    session: SessionFile
    size: int
    content_hash: str
    problems: list[Problem]


def read_bytes(path: str) -> bytes:
    """The stored bytes of ``path`` (a local path, or an URL through fsspec); a local one
    must be a regular file (a FIFO or device is refused at once)."""
    try:
        if is_url(path):
            import fsspec  # type: ignore[import-untyped]

            with fsspec.open(path, "rb") as handle:
                data: bytes = handle.read()
                return data
        return read_regular(path)
    except (OSError, ImportError) as exc:
        raise SessionReadError(f"cannot read session file: {exc}") from exc


def content_hash(data: bytes) -> str:
    """The cache's key of a file's content."""
    return hashlib.sha256(data).hexdigest()


def parse_session(data: bytes, path: str) -> tuple[SessionFile, list[Problem]]:
    """Parse stored bytes (gunzipped for ``.gz``, bounded as every command's input: see
    :func:`pi_condense._fs.atomic.gunzip_bounded`); load warnings become problems."""
    text = data
    if path.endswith(".gz"):
        try:
            text = gunzip_bounded(data)
        except InputError as exc:
            raise SessionReadError(f"cannot decompress: {exc}") from exc
    try:
        session = SessionFile.parse(text, name=path)
    except CondenseError as exc:
        message = str(exc)
        if message.startswith(f"{path}: "):
            message = message[len(path) + 2 :]
        found = _LINE.search(message)
        raise SessionReadError(message, int(found.group(1)) if found else 1) from exc
    problems = [Problem(path=path, line=w.line, message=w.reason) for w in session.warnings]
    return session, problems


def load_session(path: str) -> LoadedSession:
    """Read, hash and parse ``path``; raises :class:`SessionReadError`."""
    data = read_bytes(path)
    session, problems = parse_session(data, path)
    return LoadedSession(session, len(data), content_hash(data), problems)
