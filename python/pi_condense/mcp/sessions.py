"""Which session file the MCP server's tools read.

Three ways to name it, fixed when the server starts (:class:`SessionChoice`):

- a session file (``pi-condense mcp SESSION``): that file, always;
- a sessions directory and a session id (``--sessions DIR --session-id ID``): the file Pi (and
  the proxy) name ``<time>_<ID>.jsonl`` in ``DIR`` (or ``<ID>.jsonl``), looked up again at
  every call until it exists, so a conversation that starts after the server finds its file;
- a sessions directory alone (``--sessions DIR``): the session file in ``DIR`` written most
  recently, chosen again at every call. The conversation the model calls from is the one
  that was just written (its request is on its way), so this follows the client from
  conversation to conversation; with several conversations running at once in one
  directory, name the session id instead.

Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

__all__ = ["SessionChoice", "SessionNotFound"]

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class SessionNotFound(Exception):
    """No session file answers the choice (yet); the message says which and where."""


@dataclass(frozen=True)
class SessionChoice:
    """A session file, a directory and a session id, or a directory (its newest session)."""

    path: Optional[Path] = None
    directory: Optional[Path] = None
    session_id: Optional[str] = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.directory is None):
            raise ValueError("give a session file or a sessions directory (not both)")
        if self.session_id is not None:
            if self.directory is None:
                raise ValueError("a session id needs a sessions directory")
            if not _SESSION_ID.match(self.session_id):
                raise ValueError(
                    f"session id {self.session_id!r}: only letters, digits, '.', '_' and '-'"
                )

    def describe(self) -> str:
        """What the choice names, for messages."""
        if self.path is not None:
            return str(self.path)
        if self.session_id is not None:
            return f"session {self.session_id} in {self.directory}"
        return f"the newest session in {self.directory}"

    def check(self) -> None:
        """Raise :class:`SessionNotFound` when the choice can never name a file: a session
        file that does not exist, or a sessions directory that is not one."""
        if self.path is not None:
            if not self.path.is_file():
                what = "not a file" if self.path.exists() else "no such file"
                raise SessionNotFound(f"{self.path}: {what}")
        elif self.directory is not None and not self.directory.is_dir():
            what = "not a directory" if self.directory.exists() else "no such directory"
            raise SessionNotFound(f"{self.directory}: {what}")

    def resolve(self) -> Path:
        """The session file the choice names now; :class:`SessionNotFound` if none."""
        self.check()
        if self.path is not None:
            return self.path
        assert self.directory is not None
        if self.session_id is not None:
            return self._by_id(self.directory, self.session_id)
        return self._newest(self.directory)

    @staticmethod
    def _by_id(directory: Path, session_id: str) -> Path:
        named = sorted(directory.glob(f"*_{session_id}.jsonl"))
        if named:
            return named[-1]  # Pi's names start with the creation time: the newest last
        bare = directory / f"{session_id}.jsonl"
        if bare.is_file():
            return bare
        raise SessionNotFound(f"{directory}: no session file for session id {session_id} (yet)")

    @staticmethod
    def _newest(directory: Path) -> Path:
        newest: Optional[tuple[int, str]] = None
        for entry in os.scandir(directory):
            if not entry.name.endswith(".jsonl"):
                continue
            try:
                if not entry.is_file():
                    continue
                stamp = entry.stat().st_mtime_ns
            except OSError:
                continue  # removed meanwhile
            if newest is None or (stamp, entry.name) > newest:
                newest = (stamp, entry.name)
        if newest is None:
            raise SessionNotFound(f"{directory}: no session file (*.jsonl) yet")
        return directory / newest[1]
