"""The :class:`SessionFile`: load (with in-memory migration), index, branch, context, and
durable appends under the lock (see :mod:`pi_condense.session` for the rules)."""

from __future__ import annotations

import math
import os
import re
import threading
import uuid
import warnings
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Optional, TypeVar, Union, cast

from .._fs.atomic import fsync_dir
from .._fs.lock import unlock
from ..collector import collector_paused
from ..errors import CondenseWarning, SessionError
from ..js import json as jsjson
from ..js import time as jstime
from ..js.values import ABSENT, map_key, to_number, trim, truthy
from .context import (
    STATE_ENTRY_TYPES,
    BranchPath,
    SessionContext,
    build_context,
    walk,
)
from .entries import (
    CURRENT_SESSION_VERSION,
    Clock,
    IdSource,
    is_prune_entry,
    ordered_entry,
    put,
    random_entry_id,
)
from .index import EntryIndex
from .jsonl import LoadWarning, Parsed, decode_line, is_blank, parse_line, parse_lines
from .lock import (
    LOCK_TIMEOUT_S,
    O_BINARY,
    O_CLOEXEC,
    AppendFailed,
    append_whole,
    open_regular,
    read_exact,
    read_settled,
    take_lock,
    write_all,
)

__all__ = ["SessionFile"]

_R = TypeVar("_R")

StrPath = Union[str, "os.PathLike[str]"]

_TAIL_BYTES = 256
_LINE_BREAKS = re.compile(r"[\r\n]+")


def _shown(value: Any) -> str:
    """``value`` as JSON for a message, or what it is when it is too deep to write."""
    try:
        text = jsjson.dumps(value)
    except ValueError:
        return f"(a value nested deeper than {jsjson.MAX_DEPTH} levels)"
    return text if len(text) <= 80 else text[:77] + "..."


def _stub_fields(entry: Mapping[str, Any]) -> bool:
    """Whether every field of ``entry`` but ``data`` is a string or null (immutable: a copy
    kept without ``data`` may share them with the entry as built)."""
    return all(value is None or type(value) is str for key, value in entry.items() if key != "data")


def _version_number(version: Any, name: str, line: int) -> float:
    """``Number(version)`` as Pi reads the header's version. ``String([x])`` is
    ``String(x)`` (``""`` for a nullish ``x``), so single-element arrays are unwrapped in a
    loop: an array nested a thousand levels deep reads as its innermost value."""
    while isinstance(version, list) and len(version) == 1:
        version = version[0]
        if version is None:
            return 0.0
    try:
        return to_number(version)
    except RecursionError:
        raise SessionError(
            f"{name}: line {line}: the header field 'version' is an array nested too deep to "
            "read as a number"
        ) from None


class SessionFile(EntryIndex):
    """A Pi session: loaded from a file (or built in memory), indexed, appendable.

    Use :meth:`load`, :meth:`create`, :meth:`in_memory` or :meth:`parse`; see
    :mod:`pi_condense.session` for the load, append and concurrency rules.
    """

    _path: Optional[str]
    _session_dir: str
    _clock: Clock
    _mutex: threading.RLock
    _file_version: Any
    _leaf: Any
    _size: int
    _lines: int
    _tail: bytes
    _foreign_prune: int
    _failed_appends: list[str]
    _warned_fork: bool
    _defer_sync: int  # > 0: inside deferred_sync(), appends are written but not yet fsynced
    _unsynced: bool
    _batch: int  # > 0: inside batched(), appends share one open and one hold of the lock
    _batch_fd: Optional[int]  # that open (locked), from the block's first append on
    _batch_file: tuple[int, int]  # (st_dev, st_ino) of the file it opened
    _spool: Optional[IO[bytes]]  # write-through: every line is written there as committed
    _spool_size: int  # bytes written to _spool
    # Write-through: id() of each `custom` entry kept without its `data` -> where its line
    # is in _spool (offset << 40 | length); the whole entry is read back when asked for.
    _spooled: dict[int, int]
    _stamp: tuple[float, str]  # the clock's last reading and its ISO string
    _spool_failed: Optional[str]  # why writing through failed: every later use fails so
    lock_timeout: float
    """Seconds an append waits for another pi-condense writer's lock (then SessionError)."""

    def __init__(self) -> None:
        raise TypeError("use SessionFile.load(), create(), in_memory() or parse()")

    # ---------------------------------------------------------------- construction

    @classmethod
    def _blank(
        cls,
        path: Optional[str],
        session_dir: str,
        clock: Optional[Clock],
        id_source: Optional[IdSource],
    ) -> SessionFile:
        session = object.__new__(cls)
        session._path = path
        session._session_dir = session_dir
        session._clock = clock if clock is not None else jstime.now_ms
        session._id_source = id_source if id_source is not None else random_entry_id
        session._explicit_ids = id_source is not None
        session._mutex = threading.RLock()
        session._header = {}
        session._file_version = CURRENT_SESSION_VERSION
        session._migrate_v1 = False
        session._migrate_v3 = False
        session._v1_prev = None
        session._file_objects = []
        session._entries = []
        session._by_id = {}
        session._labels = {}
        session._leaf = None
        session._tip = None
        session._warnings = []
        session._size = 0
        session._lines = 0
        session._tail = b""
        session.lock_timeout = LOCK_TIMEOUT_S
        session._foreign_prune = 0
        session._branch_path = None
        session._linear_count = 0
        session._linear_context = None
        session._failed_appends = []
        session._warned_fork = False
        session._defer_sync = 0
        session._unsynced = False
        session._batch = 0
        session._batch_fd = None
        session._batch_file = (0, 0)
        session._spool = None
        session._spool_size = 0
        session._spooled = {}
        session._stamp = (math.nan, "")
        session._spool_failed = None
        return session

    @classmethod
    def load(
        cls,
        path: StrPath,
        *,
        clock: Optional[Clock] = None,
        id_source: Optional[IdSource] = None,
    ) -> SessionFile:
        """Load a session file (read-only; the file is never rewritten).

        Raises :class:`SessionError` if the file cannot be read or is not a Pi session.
        """
        name = os.path.abspath(os.fspath(path))
        # No lock: appends are whole lines (ours and Pi's), and a torn last line is reported.
        fd = open_regular(name, os.O_RDONLY, "session file")
        try:
            data = read_settled(fd, 0)
        except OSError as exc:
            raise SessionError(f"{name}: cannot read session file: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)
        session = cls._blank(name, os.path.dirname(name), clock, id_source)
        with collector_paused():
            session._load_bytes(data, name)
        return session

    @classmethod
    def parse(
        cls,
        text: Union[str, bytes],
        *,
        name: str = "<memory>",
        session_dir: str = "",
        clock: Optional[Clock] = None,
        id_source: Optional[IdSource] = None,
        share_strings: bool = False,
    ) -> SessionFile:
        """Load a session from its text into an in-memory session (appends stay in memory).

        ``share_strings``: the parsed lines' equal strings made one object each as they are
        parsed (see :func:`.jsonl.parse_lines`), for a caller that keeps the entries long.
        """
        data = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
        session = cls._blank(None, session_dir, clock, id_source)
        with collector_paused():
            session._load_bytes(data, name, share_strings)
        return session

    @classmethod
    def create(
        cls,
        path: StrPath,
        cwd: str,
        *,
        session_id: Optional[str] = None,
        parent_session: Any = ABSENT,
        clock: Optional[Clock] = None,
        id_source: Optional[IdSource] = None,
    ) -> SessionFile:
        """Create a new v3 session file and write its header line immediately (fsync'd).

        The parent directory is created if needed; an existing file is never overwritten
        (:class:`SessionError`). ``session_id`` defaults to a random UUID.
        """
        name = os.path.abspath(os.fspath(path))
        session = cls._blank(name, os.path.dirname(name), clock, id_source)
        header = session._new_header(cwd, session_id, parent_session)
        line = jsjson.dumps(header).encode("utf-8") + b"\n"
        try:
            os.makedirs(os.path.dirname(name), exist_ok=True)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_BINARY | O_CLOEXEC, 0o644)
        except FileExistsError as exc:
            raise SessionError(f"{name}: cannot create session file: it already exists") from exc
        except OSError as exc:
            raise SessionError(
                f"{name}: cannot create session file: {exc.strerror or exc}"
            ) from exc
        try:
            write_all(fd, line)
            os.fsync(fd)
        except OSError as exc:
            raise SessionError(
                f"{name}: cannot write session header: {exc.strerror or exc}"
            ) from exc
        finally:
            os.close(fd)
        fsync_dir(os.path.dirname(name))
        session._header = header
        session._file_objects.append(header)
        session._consumed(line)
        return session

    @classmethod
    def in_memory(
        cls,
        cwd: str = "",
        *,
        session_id: Optional[str] = None,
        parent_session: Any = ABSENT,
        session_dir: str = "",
        clock: Optional[Clock] = None,
        id_source: Optional[IdSource] = None,
        write_through: Optional[IO[bytes]] = None,
    ) -> SessionFile:
        """A new v3 session without a file (Pi's ``SessionManager.inMemory``).

        ``write_through``: a binary file (empty, readable and writable, e.g.
        :func:`tempfile.TemporaryFile`) the session's text is written to as it grows: the
        header now, each entry's line when it is appended. The session then keeps its
        ``custom`` entries without their ``data`` (the bulk of a pruned session: the pruner's
        index, metrics and chains) and reads each one back from the file when it is asked for
        (:attr:`entries`, :meth:`branch`, :meth:`custom_entries`, :meth:`get_entry`,
        :meth:`iter_entries`; :meth:`branch_path` hands out what is kept). For a writer
        whose text is copied to its destination at the end (:meth:`written_chunks`); the file
        is neither locked nor synced (the destination's write is what must be durable).
        """
        session = cls._blank(None, session_dir, clock, id_source)
        session._header = session._new_header(cwd, session_id, parent_session)
        session._file_objects.append(session._header)
        line = jsjson.dumps(session._header).encode("utf-8") + b"\n"
        if write_through is not None:
            session._spool = write_through
            session._spool_write(line)
        session._consumed(line)
        return session

    def _new_header(
        self, cwd: str, session_id: Optional[str], parent_session: Any
    ) -> dict[str, Any]:
        header: dict[str, Any] = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": session_id if session_id is not None else str(uuid.uuid4()),
            "timestamp": jstime.to_iso_string(self._clock()),
            "cwd": cwd,
        }
        put(header, "parentSession", parent_session)
        return header

    def _load_bytes(self, data: bytes, name: str, share_strings: bool = False) -> None:
        parsed = parse_lines(data, name, share_strings=share_strings)
        if parsed.first_value is ABSENT:
            detail = f" ({parsed.warnings[0]})" if parsed.warnings else ""
            raise SessionError(f"{name}: not a Pi session file: no valid JSON line{detail}")
        header = parsed.first_value
        if not (
            isinstance(header, dict)
            and header.get("type") == "session"
            and isinstance(header.get("id"), str)
        ):
            raise SessionError(
                f"{name}: not a Pi session file: line {parsed.first_line}: the first entry is "
                'not a session header ({"type":"session","id":"..."})'
            )
        self._header = header
        version = header.get("version")
        self._file_version = 1 if version is None else version
        if version is not None and not (
            isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= 3
        ):
            number = _version_number(version, name, parsed.first_line)
            reason = (
                f"header version {_shown(version)} is not one Pi writes (1, 2 or 3); "
                f"read as Pi reads it (Number(version) = {number:g})"
            )
            self._warnings.append(LoadWarning(parsed.first_line, "odd-version", reason))
        else:
            number = to_number(self._file_version)
        self._migrate_v1 = number < 2
        self._migrate_v3 = number < 3
        if self._migrate_v3:
            header["version"] = CURRENT_SESSION_VERSION
        self._file_objects.append(header)
        self._warnings.extend(parsed.warnings)
        self._absorb(parsed.objects[1:])
        self._warnings.sort(key=lambda w: w.line)
        self._leaf = self._tip
        self._consumed(data, parsed.newlines)

    def _consumed(self, data: bytes, newlines: Optional[int] = None) -> None:
        self._size += len(data)
        self._lines += data.count(b"\n") if newlines is None else newlines
        if len(data) >= _TAIL_BYTES:
            self._tail = data[-_TAIL_BYTES:]
        else:
            self._tail = (self._tail + data)[-_TAIL_BYTES:]

    # ---------------------------------------------------------------- properties

    @property
    def path(self) -> Optional[Path]:
        """Absolute path of the session file (None for an in-memory session)."""
        return Path(self._path) if self._path is not None else None

    @property
    def session_dir(self) -> str:
        """Directory holding the session file (Pi's ``sessionDir``); ``""`` in memory by default."""
        return self._session_dir

    @property
    def session_id(self) -> str:
        """The header ``id``."""
        return str(self._header["id"])

    @property
    def header(self) -> dict[str, Any]:
        """The header as Pi holds it in memory (``version`` migrated to 3)."""
        return self._header

    @property
    def version(self) -> Any:
        """The header ``version`` as written in the file (1 when absent)."""
        return self._file_version

    @property
    def cwd(self) -> Any:
        """The header ``cwd``."""
        return self._header.get("cwd")

    @property
    def entries(self) -> list[dict[str, Any]]:
        """All non-header entries in file order (migrated in memory); a new list each call."""
        with self._mutex:
            if self._spooled:
                return list(map(self._whole, self._entries))
            return list(self._entries)

    def iter_entries(self) -> Iterable[dict[str, Any]]:
        """:attr:`entries` one at a time: with ``write_through``, each entry kept without its
        data is read back only when the iteration reaches it (the others are the kept ones)."""
        with self._mutex:
            if not self._spooled:
                return list(self._entries)
            entries = list(self._entries)
        return map(self._whole, entries)

    def written_chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The session's text as written to its ``write_through`` file (UTF-8, the header
        first), read back in pieces of at least ``size`` bytes that end at a line's end.

        Raises :class:`SessionError` for a session without ``write_through``.
        """
        if self._spool is None:
            raise SessionError(f"{self._name()}: the session is not written through to a file")
        with self._mutex, self._spool_io() as spool:
            spool.flush()
            end = self._spool_size
            if spool.seek(0, os.SEEK_END) != end:
                raise OSError(f"it holds {spool.tell()} bytes, not the {end} written")
        at = 0
        while at < end:
            with self._mutex, self._spool_io() as spool:
                spool.seek(at)
                piece = spool.read(min(size, end - at))
                if not piece.endswith(b"\n") and at + len(piece) < end:
                    piece += spool.readline()
                spool.seek(self._spool_size)
                if not piece:
                    raise OSError("it was cut short")
            at += len(piece)
            yield piece

    @property
    def warnings(self) -> list[LoadWarning]:
        """Skipped or suspicious lines, by line number (appended to on refresh)."""
        with self._mutex:
            return list(self._warnings)

    @property
    def leaf_id(self) -> Optional[str]:
        """The current leaf: where the next entry attaches (None = before the first entry)."""
        leaf = self._leaf
        return None if leaf is ABSENT else cast(Optional[str], leaf)

    @property
    def file_leaf_id(self) -> Optional[str]:
        """Id of the last entry in file order (the leaf Pi picks when it loads the file)."""
        tip = self._tip
        return None if tip is ABSENT else cast(Optional[str], tip)

    @property
    def foreign_prune_entries(self) -> int:
        """How many pi-condense entries (``context-prune-*``) another writer (a second
        Condenser) appended that this object has picked up so far."""
        return self._foreign_prune

    @property
    def writes_through(self) -> bool:
        """Whether the session is written through to a file (``in_memory(write_through=)``)."""
        return self._spool is not None

    def __len__(self) -> int:
        return len(self._entries)

    def get_entry(self, entry_id: str) -> Optional[dict[str, Any]]:
        """The entry with this id (the last one in file order if ids repeat), or None."""
        entry = self._by_id.get(map_key(entry_id)) if truthy(entry_id) else None
        return self._whole(entry) if self._spooled and entry is not None else entry

    def get_label(self, entry_id: str) -> Optional[str]:
        """The current label of an entry (latest ``label`` entry wins), or None."""
        return self._labels.get(map_key(entry_id))

    # ---------------------------------------------------------------- navigation

    def _require(self, entry_id: str) -> dict[str, Any]:
        entry = self.get_entry(entry_id)
        if entry is None:
            raise SessionError(f"{self._name()}: entry {entry_id!r} not found")
        return entry

    def set_leaf(self, entry_id: Optional[str]) -> None:
        """Move the leaf (Pi's ``branch(id)``); None resets it before the first entry."""
        with self._mutex:
            if entry_id is None:
                self._leaf = None
            else:
                self._require(entry_id)
                self._leaf = entry_id

    def branch(self, leaf: Optional[str] = None) -> list[dict[str, Any]]:
        """Root-first entries from ``leaf`` (default: the current leaf) up to the root.

        Raises :class:`SessionError` for an unknown id (Pi's ``getBranch`` returns ``[]``).
        """
        with self._mutex:
            if leaf is not None:
                path = walk(self._require(leaf), self._by_id)
            else:
                path = list(self._current_path().path)
            return list(map(self._whole, path)) if self._spooled else path

    def branch_path(self) -> tuple[int, Sequence[dict[str, Any]]]:
        """``(epoch, entries)``: the current leaf's branch, root first, kept incrementally.

        The list is shared with the session and must not be changed (with ``write_through``
        its ``custom`` entries are kept without ``data``: see :meth:`in_memory`). While the
        epoch stays
        the same, every later call returns the same list grown at its end (the leaf moved
        along the branch); a new epoch means a new list (the leaf moved elsewhere, or entries
        read from the file changed how ids resolve). Lets a caller keep facts about the
        branch and update them from the entries added since it last looked.
        """
        with self._mutex:
            cached = self._current_path()
            return cached.epoch, cached.path

    def _current_path(self) -> BranchPath:
        start = self._leaf
        entry = self._by_id.get(map_key(start)) if truthy(start) else None
        cached = self._branch_path
        if cached is not None and (
            cached.leaf is entry or (entry is not None and cached.extend(entry, self._by_id))
        ):
            return cached
        entries = self._entries
        if entry is not None and self._linear_count == len(entries) and entry is entries[-1]:
            cached = BranchPath.of_path(list(entries), self._linear_context)
            self._linear_context = None
        else:
            cached = BranchPath(entry, self._by_id)
        self._branch_path = cached
        return cached

    def custom_entries(self, leaf: Optional[str] = None) -> list[dict[str, Any]]:
        """The ``custom`` and ``custom_message`` entries of the branch ending at ``leaf``
        (default: the current leaf), root first: what the pruner's state is rebuilt from.

        Raises :class:`SessionError` for an unknown id.
        """
        with self._mutex:
            customs = self._custom_entries(leaf)
            return list(map(self._whole, customs)) if self._spooled else customs

    def _custom_entries(self, leaf: Optional[str]) -> list[dict[str, Any]]:
        if leaf is not None:
            path = walk(self._require(leaf), self._by_id)
            return [e for e in path if e.get("type") in STATE_ENTRY_TYPES]
        return self._current_path().custom_entries()

    def iter_custom_entries(self, leaf: Optional[str] = None) -> Iterable[dict[str, Any]]:
        """:meth:`custom_entries` one at a time (read back from the ``write_through`` file
        only when the iteration reaches each one): a state rebuilt from them
        (``PrunerState.from_branch``) never holds them all at once."""
        with self._mutex:
            customs = self._custom_entries(leaf)
        return map(self._whole, customs) if self._spooled else customs

    def build_context(self, leaf: Optional[str] = None) -> SessionContext:
        """Pi's ``buildSessionContext`` from ``leaf`` (default: the current leaf).

        Raises :class:`SessionError` for an unknown id.
        """
        with self._mutex:
            if leaf is not None:
                self._require(leaf)
                return build_context(self._entries, leaf, self._by_id)
            start = self._leaf
            if truthy(start) and map_key(start) in self._by_id:
                # The current leaf's branch is kept: no second walk (build_context falls
                # back to the last entry for a leaf that does not resolve).
                return self._current_path().context()
            return build_context(self._entries, start, self._by_id)

    # ---------------------------------------------------------------- appending

    def append_entry(self, entry: Mapping[str, Any]) -> str:
        """Append an entry of any type; returns its id.

        ``entry`` holds ``type`` and the type's fields (``ABSENT`` values are omitted); the
        ``id``, ``parentId`` (current leaf) and ``timestamp`` are assigned here, in Pi's key order.
        """
        kind = entry.get("type")
        if not isinstance(kind, str) or kind == "session":
            raise SessionError(f"{self._name()}: cannot append an entry of type {kind!r}")
        reserved = [key for key in ("id", "parentId", "timestamp") if key in entry]
        if reserved:
            raise SessionError(
                f"{self._name()}: entry keys {reserved} are assigned by the session, not the caller"
            )
        return self._append(dict(entry))

    def append_message(self, message: Mapping[str, Any], *, shared: bool = False) -> str:
        """Append a ``message`` entry holding an AgentMessage; returns its id.

        The session keeps what its line reads back as (a copy), or with ``shared`` the
        ``message`` object itself: for a message that is already a parsed JSON value (one of
        another loaded session's) and that nobody changes afterwards, so two sessions holding
        it hold it once.
        """
        return self._append({"type": "message", "message": message}, shared=shared)

    def append_messages(self, messages: Iterable[Mapping[str, Any]]) -> list[str]:
        """Append a ``message`` entry for each of ``messages``, each the child of the one
        before: the entries :meth:`append_message` would make of them one after the other
        (``messages`` is consumed one at a time, between the clock readings of the entries
        around it), in one write of all their lines, indexed together; returns their ids.
        One append: all of them reach the file or none does (a failed write's bytes are
        blanked), under the lock, after what another writer appended is read in."""
        return self._write(lambda fd: self._commit_many(messages, fd))

    def append_custom(self, custom_type: str, data: Any = ABSENT) -> str:
        """Append a ``custom`` entry (extension state, never in the context); returns its id."""
        return self._append({"type": "custom", "customType": custom_type, "data": data})

    def append_custom_message(
        self, custom_type: str, content: Any, display: bool, details: Any = ABSENT
    ) -> str:
        """Append a ``custom_message`` entry (in the context after reload); returns its id."""
        return self._append(
            {
                "type": "custom_message",
                "customType": custom_type,
                "content": content,
                "display": display,
                "details": details,
            }
        )

    def append_thinking_level_change(self, thinking_level: str) -> str:
        """Append a ``thinking_level_change`` entry; returns its id."""
        return self._append({"type": "thinking_level_change", "thinkingLevel": thinking_level})

    def append_model_change(self, provider: str, model_id: str) -> str:
        """Append a ``model_change`` entry; returns its id."""
        return self._append({"type": "model_change", "provider": provider, "modelId": model_id})

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: float,
        details: Any = ABSENT,
        from_hook: Any = ABSENT,
    ) -> str:
        """Append a ``compaction`` entry; returns its id."""
        return self._append(
            {
                "type": "compaction",
                "summary": summary,
                "firstKeptEntryId": first_kept_entry_id,
                "tokensBefore": tokens_before,
                "details": details,
                "fromHook": from_hook,
            }
        )

    def branch_with_summary(
        self,
        from_id: Optional[str],
        summary: str,
        details: Any = ABSENT,
        from_hook: Any = ABSENT,
    ) -> str:
        """Move the leaf to ``from_id`` (None = root) and append a ``branch_summary`` there."""
        with self._mutex:
            if from_id is not None:
                self._require(from_id)
            self._leaf = from_id
            return self._append(
                {
                    "type": "branch_summary",
                    "fromId": from_id if from_id is not None else "root",
                    "summary": summary,
                    "details": details,
                    "fromHook": from_hook,
                },
                follow_tip=False,
            )

    def append_label(self, target_id: str, label: Optional[str] = None) -> str:
        """Set (or with None / ``""`` clear) the label of an entry; returns the label entry id."""
        with self._mutex:
            self._require(target_id)
            return self._append(
                {
                    "type": "label",
                    "targetId": target_id,
                    "label": ABSENT if label is None else label,
                }
            )

    def append_session_info(self, name: str) -> str:
        """Append a ``session_info`` entry with the display name on one line (each run of
        line breaks one space, then trimmed, as Pi writes it); returns its id."""
        return self._append({"type": "session_info", "name": trim(_LINE_BREAKS.sub(" ", name))})

    def refresh(self) -> int:
        """Pick up entries another writer appended since our last read; returns how many.

        Raises :class:`SessionError` if the file was rewritten or truncated meanwhile.
        """
        if self._path is None:
            return 0
        with self._mutex:
            fd = self._open(os.O_RDONLY)
            try:
                return self._sync(fd)
            finally:
                os.close(fd)

    # ---------------------------------------------------------------- internals

    def _name(self) -> str:
        return self._path if self._path is not None else "<memory>"

    def _open(self, flags: int) -> int:
        assert self._path is not None
        return open_regular(self._path, flags, "session file")

    def _generate_id(self, taken: Container[Any] = ()) -> str:
        for _ in range(100):
            candidate = self._id_source()
            key = map_key(candidate)
            if key not in self._by_id and key not in taken:
                return candidate
        return str(uuid.uuid4())

    def _sync(self, fd: int) -> int:
        """Under the lock: index what was appended since our last read (see module docs)."""
        size = os.fstat(fd).st_size
        changed = size < self._size
        if not changed and self._tail:
            start = self._size - len(self._tail)
            changed = read_exact(fd, start, len(self._tail)) != self._tail
        if changed:
            raise SessionError(
                f"{self._path}: the file was rewritten or truncated since it was loaded "
                "(Pi rewrites v1/v2 files when it opens them); load it again before appending"
            )
        if size == self._size:
            return 0
        data = read_settled(fd, self._size)
        return self._absorb_bytes(data)

    def _absorb_bytes(self, data: bytes) -> int:
        parsed = Parsed([], [])
        segments = data.split(b"\n")
        glued = not self._tail.endswith(b"\n")
        for offset, raw in enumerate(segments):
            number = self._lines + 1 + offset
            if offset == 0 and glued:
                if raw.strip():
                    reason = (
                        "text was appended to a line without a trailing newline; "
                        "the joined line is invalid and skipped"
                    )
                    parsed.warnings.append(LoadWarning(number, "glued", reason))
                continue
            text, valid = decode_line(raw)
            if is_blank(text):
                continue
            if not valid:
                reason = "invalid UTF-8 bytes read as U+FFFD"
                parsed.warnings.append(LoadWarning(number, "invalid-utf8", reason))
            torn = offset == len(segments) - 1
            parse_line(text, number, torn, parsed, self._name())
        previous_tip = self._tip
        self._warnings.extend(parsed.warnings)
        self._foreign_prune += sum(1 for _, obj in parsed.objects if is_prune_entry(obj))
        count = self._absorb(parsed.objects)
        self._warnings.sort(key=lambda w: w.line)
        if count and map_key(self._leaf) == map_key(previous_tip):
            self._follow_tip(count)
        self._consumed(data)
        return count

    def _follow_tip(self, count: int) -> None:
        """Our leaf was the file's last entry and ``count`` entries were appended after it:
        the leaf follows the new last entry only if that entry continues from our leaf (its
        parent chain through the new entries reaches it). Another writer's line based on an
        older entry would otherwise take our next entry off the branch it belongs to."""
        leaf = self._leaf
        if not truthy(leaf):
            # Before the first entry: an entry another writer starts the tree with is ours.
            self._leaf = self._tip
            return
        fresh = {id(entry) for entry in self._entries[-count:]}
        entry = self._by_id.get(map_key(self._tip))
        target = map_key(leaf)
        for _ in range(count + 1):
            if entry is None:
                break
            if map_key(entry.get("id")) == target:
                self._leaf = self._tip
                return
            if id(entry) not in fresh:
                break
            parent = entry.get("parentId")
            entry = self._by_id.get(map_key(parent)) if truthy(parent) else None
        if not self._warned_fork:
            self._warned_fork = True
            warnings.warn(
                f"{self._name()}: another writer appended entries that do not continue from "
                f"this session's leaf {leaf!r} (they branch off an earlier entry); the next "
                "entries stay on this leaf's branch instead of following them",
                CondenseWarning,
                stacklevel=4,
            )

    @property
    def failed_appends(self) -> list[str]:
        """The error of every append that failed, oldest first (each says what became of the
        bytes that reached the file): a command that appends checks it to exit non-zero."""
        return list(self._failed_appends)

    @contextmanager
    def deferred_sync(self) -> Iterator[None]:
        """Appends inside the block are written at once (whole lines, under the lock, as
        always) but made durable with one ``fsync`` when the block ends, not one each: for
        taking in many entries at a time (a live hook joining a long conversation late).
        A process killed inside the block loses nothing it wrote; a power cut may lose the
        block's lines."""
        with self._mutex:
            self._defer_sync += 1
        try:
            yield
        finally:
            with self._mutex:
                self._defer_sync -= 1
                if not self._defer_sync and self._unsynced and self._path is not None:
                    self._unsynced = False
                    try:
                        fd = self._open(os.O_RDONLY)
                        try:
                            os.fsync(fd)
                        finally:
                            os.close(fd)
                    except OSError as exc:
                        raise SessionError(
                            f"{self._path}: cannot sync the appended entries: {exc.strerror or exc}"
                        ) from exc

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Appends inside the block share one open of the file and one hold of the append
        lock (taken at the block's first append, released when it ends), and are made
        durable with one ``fsync`` at its end (:meth:`deferred_sync`): for the thousands of
        entries of a late join. Each line is still written whole by one write, and before
        each one the file is checked: what a writer that takes no lock (Pi) appended
        meanwhile is read in first; a file replaced, or cut or rewritten to another size,
        meanwhile fails the append. Other pi-condense writers wait for the block to end (at
        most their :attr:`lock_timeout`), so keep slow work (a model call) out of it."""
        with self.deferred_sync():
            with self._mutex:
                self._batch += 1
            try:
                yield
            finally:
                with self._mutex:
                    self._batch -= 1
                    fd = self._batch_fd
                    if not self._batch and fd is not None:
                        self._batch_fd = None
                        try:
                            unlock(fd)
                        finally:
                            os.close(fd)

    def _append(
        self, fields: dict[str, Any], *, follow_tip: bool = True, shared: bool = False
    ) -> str:
        return self._write(lambda fd: self._commit(fields, fd, shared), follow_tip)

    def _write(self, commit: Callable[[Optional[int]], _R], follow_tip: bool = True) -> _R:
        """Run ``commit`` with the file open and locked (and what others appended read in),
        or with None for a session in memory; a failure is kept in :attr:`failed_appends`."""
        with self._mutex:
            if self._path is None:
                return commit(None)
            try:
                return self._append_locked(commit, follow_tip)
            except SessionError as exc:
                self._failed_appends.append(str(exc))
                raise

    def _append_locked(self, commit: Callable[[Optional[int]], _R], follow_tip: bool) -> _R:
        with self._mutex:
            if self._batch:
                return self._append_batched(commit, follow_tip)
            fd = self._open(os.O_RDWR | os.O_APPEND)
            try:
                take_lock(fd, self._name(), self.lock_timeout)
                try:
                    self._sync_before_append(fd, follow_tip)
                    return commit(fd)
                finally:
                    unlock(fd)
            finally:
                os.close(fd)

    def _sync_before_append(self, fd: int, follow_tip: bool) -> None:
        if follow_tip:
            self._sync(fd)
        else:
            leaf = self._leaf
            self._sync(fd)
            self._leaf = leaf

    def _append_batched(self, commit: Callable[[Optional[int]], _R], follow_tip: bool) -> _R:
        """An append inside :meth:`batched`: to the block's open, locked file, once it is
        known to be the file at the session's path still; read again (its tail checked, what
        was appended meanwhile read in) when its size is not the one this session left."""
        assert self._path is not None
        fd = self._batch_fd
        if fd is None:
            fd = self._open(os.O_RDWR | os.O_APPEND)
            try:
                take_lock(fd, self._name(), self.lock_timeout)
                opened = os.fstat(fd)
            except BaseException:
                os.close(fd)
                raise
            self._batch_fd = fd
            self._batch_file = (opened.st_dev, opened.st_ino)
        else:
            try:
                now = os.stat(self._path)
            except OSError as exc:
                raise SessionError(
                    f"{self._path}: cannot append entry: {exc.strerror or exc}"
                ) from exc
            if (now.st_dev, now.st_ino) != self._batch_file:
                raise SessionError(
                    f"{self._path}: the file was replaced since it was opened for appending; "
                    "load it again before appending"
                )
            if now.st_size == self._size:
                return commit(fd)
        self._sync_before_append(fd, follow_tip)
        return commit(fd)

    @contextmanager
    def _spool_io(self) -> Iterator[IO[bytes]]:
        """The write-through file for one use; a failure (a full disk) fails every later
        use too: the file no longer holds the session's text."""
        spool = self._spool
        assert spool is not None
        if self._spool_failed is not None:
            raise SessionError(self._spool_failed)
        try:
            yield spool
        except OSError as exc:
            self._spool_failed = (
                f"{self._name()}: cannot write the session through to its file: "
                f"{exc.strerror or exc}"
            )
            raise SessionError(self._spool_failed) from exc

    def _spool_write(self, payload: bytes) -> None:
        with self._spool_io() as spool:
            spool.write(payload)
        self._spool_size += len(payload)

    def _whole(self, entry: dict[str, Any]) -> dict[str, Any]:
        """``entry``, or when it is kept without its data, the whole entry read back from
        the ``write_through`` file (a new dict each time)."""
        where = self._spooled.get(id(entry))
        if where is None:
            return entry
        with self._mutex, self._spool_io() as spool:
            spool.flush()
            spool.seek(where >> 40)
            line = spool.read(where & ((1 << 40) - 1))
            spool.seek(self._spool_size)
        return cast(dict[str, Any], jsjson.loads(line))

    def _commit(self, fields: dict[str, Any], fd: Optional[int], shared: bool = False) -> str:
        entry_id = self._generate_id()
        now = self._clock()
        stamp = self._stamp
        if stamp[0] != now:  # entries appended in the same millisecond share one string
            stamp = self._stamp = (now, jstime.to_iso_string(now))
        timestamp = stamp[1]
        entry = ordered_entry(fields, entry_id, self._leaf, timestamp)
        line = jsjson.dumps(entry)
        payload = line.encode("utf-8") + b"\n"
        if self._tail and not self._tail.endswith(b"\n"):
            payload = b"\n" + payload
        if self._spool is None:
            stored = entry if shared else jsjson.reloaded([entry])[0]
        else:
            where = self._spool_size << 40 | len(payload)
            self._spool_write(payload)
            if entry.get("type") == "custom" and _stub_fields(entry):
                # The bulk of a pruner's session: kept without `data`, read back on request.
                stored = {key: value for key, value in entry.items() if key != "data"}
                self._spooled[id(stored)] = where
            else:
                stored = entry if shared else jsjson.reloaded([entry])[0]
        self._put(fd, payload, "entry")
        if self._migrate_v1:
            self._file_objects.append(stored)
        self._index(stored, self._lines)
        self._v1_prev = entry_id
        self._leaf = entry_id
        return entry_id

    def _commit_many(self, messages: Iterable[Mapping[str, Any]], fd: Optional[int]) -> list[str]:
        """:meth:`_commit` of a ``message`` entry for each of ``messages`` in turn (the same
        ids, parents, timestamps and lines), written by one write and indexed once.
        ``messages`` is consumed one at a time, between the id and clock readings of the
        entries around it. The entries kept are what their lines read back as, copied
        without parsing the lines where the copy is the same (``jsjson.reloaded``)."""
        leaf = self._leaf
        ids: list[str] = []
        taken: set[Any] = set()
        entries: list[dict[str, Any]] = []
        reading: Any = None
        timestamp = ""
        generate_id, clock = self._generate_id, self._clock
        for message in messages:
            entry_id = generate_id(taken)
            taken.add(map_key(entry_id))
            ms = clock()
            if type(ms) is not int or ms != reading:  # (many entries share a millisecond)
                timestamp = jstime.to_iso_string(ms)
                reading = ms
            if message is ABSENT or leaf is ABSENT:
                fields = {"type": "message", "message": message}
                entries.append(ordered_entry(fields, entry_id, leaf, timestamp))
            else:  # ordered_entry's layout of a message entry
                entries.append(
                    {
                        "type": "message",
                        "id": entry_id,
                        "parentId": leaf,
                        "timestamp": timestamp,
                        "message": message,
                    }
                )
            ids.append(entry_id)
            leaf = entry_id
        if not entries:
            return ids
        payload = body = jsjson.dumps_lines(entries)
        stored = jsjson.reloaded(entries)
        if self._tail and not self._tail.endswith(b"\n"):
            payload = b"\n" + payload
        if self._spool is not None:
            self._spool_write(payload)
        # (JSON text holds no raw newline: one line an entry, and the separator before them)
        newlines = len(entries) + (len(payload) > len(body))
        self._put(fd, payload, f"{len(entries)} entries", newlines)
        if self._migrate_v1:
            self._file_objects.extend(stored)
        last = self._lines - len(stored)
        self._index_all([(last + n, entry) for n, entry in enumerate(stored, 1)])
        self._v1_prev = leaf
        self._leaf = leaf
        return ids

    def _put(
        self, fd: Optional[int], payload: bytes, what: str, newlines: Optional[int] = None
    ) -> None:
        """Write ``payload`` (whole lines) to the locked file ``fd`` (None: in memory) as one
        append, all or nothing, and read in what another writer appended before it."""
        if fd is not None:
            assert self._path is not None
            try:
                deferred = self._defer_sync > 0
                start = append_whole(fd, payload, self._path, sync=not deferred)
                self._unsynced = self._unsynced or deferred
            except AppendFailed as failed:
                undo = f" ({failed.undo})" if failed.undo else " (nothing was written)"
                raise SessionError(
                    f"{self._path}: cannot append {what}: {failed}{undo}"
                ) from failed.cause
            try:
                # Pi appends without a lock: what it wrote between our re-read and our write
                # (O_APPEND put our line after it) is read back and indexed before our line.
                if start > self._size:
                    self._absorb_bytes(read_exact(fd, self._size, start - self._size))
            except OSError as exc:
                raise SessionError(
                    f"{self._path}: cannot read back the lines appended before ours: "
                    f"{exc.strerror or exc}"
                ) from exc
        self._consumed(payload, newlines)
