"""Pi session files: tolerant load, in-memory migration, branch walk, context, durable appends.

A :class:`SessionFile` reads a Pi session (JSON Lines, spec 01) exactly as Pi's
``SessionManager`` does and adds what a Python host needs on top:

Loading
    The whole file is read and handled as Pi does (JS-``trim()``, split on ``"\\n"``, blank
    lines skipped, every line parsed with :func:`pi_condense.js.json.loads`), one line at a
    time so that only the file's bytes and the parsed entries are held. Lines Pi would skip
    are skipped here too, but each one is reported in :attr:`SessionFile.warnings` (1-based
    line number and reason); a last line cut short by a crash (no trailing newline) is
    reported as truncated. The first parsed line must be a session header (``type ==
    "session"`` with a string ``id``), else :class:`~pi_condense.errors.SessionError` is
    raised. v1 and v2 files are migrated in memory the way Pi migrates them (fresh 8-hex
    ids from the id source for v1 entries, ``hookMessage`` -> ``custom`` for v2). The file
    itself is never rewritten.

Appending
    Entries are built with Pi's key order, an id unique in the session (Pi's ``generateId``
    rule), ``parentId`` = the current leaf and an ISO timestamp from the injectable clock. Each
    append takes an advisory lock against other pi-condense writers (``fcntl.flock`` on POSIX,
    waiting at most :attr:`SessionFile.lock_timeout` seconds, then
    :class:`~pi_condense.errors.SessionError`; no lock on Windows, where byte-range locks would
    block Pi's own reads), first picks up entries another writer appended since our last read
    (see below), terminates a torn last line with ``"\\n"`` so nothing is glued onto it, then
    writes the line with ``O_APPEND``, flushes and ``fsync``-s it. An append is all or nothing:
    when a write or the fsync fails (a full disk, a file size limit, EIO), the bytes of the line
    that reached the file are overwritten in place with spaces (never truncated: Pi may have
    appended after them) and :class:`~pi_condense.errors.SessionError` is raised; the error is
    also kept in :attr:`SessionFile.failed_appends`. Unlike Pi, which holds a new
    session in memory until the first assistant message, every append is written immediately
    and :meth:`SessionFile.create` writes the header at once. Loading and :meth:`refresh` take
    no lock (every writer appends whole lines), so a stuck lock holder never blocks a reader.
    Inside :meth:`SessionFile.batched` (thousands of entries at once: a live hook joining a
    conversation late) the appends share one open of the file and one hold of the lock (taken
    at the first, released when the block ends) and one ``fsync`` at its end; each line is
    still one whole write, checked first as below (re-read when the file's size moved, refused
    when the path now names another file).

Concurrent writers
    Pi appends without any lock (``appendFileSync``). Before every append (and on
    :meth:`SessionFile.refresh`) the bytes appended since our last read are parsed and indexed
    (migrated like the rest of the file, with warnings for bad lines); bytes another writer
    slipped in between that re-read and our write (``O_APPEND`` puts our line after them) are
    read back right after the write and indexed before our entry, so our view of the file
    stays exact. A read that ends inside a line waits a few milliseconds for the rest of it (a
    line being appended right now can be seen half-written); a remnant that never completes is
    reported as torn. If our leaf was the file's last entry and the new last entry continues
    from it (its parent chain reaches our leaf), the leaf follows it, so our next entry
    continues the conversation instead of forking it off; a new last entry based on an older
    entry (another writer that did not see ours) is not followed, so none of our entries falls
    off our branch (a :class:`~pi_condense.errors.CondenseWarning` names the session, once); a
    leaf moved explicitly with :meth:`SessionFile.set_leaf` stays put. If the file shrank or
    the bytes we already read changed (Pi rewrites a v1/v2 file when it opens it), appending raises
    :class:`~pi_condense.errors.SessionError`: load the file again. Only regular files are
    opened: a FIFO or a device is refused at once instead of blocking.

In-memory sessions (:meth:`SessionFile.in_memory`, :meth:`SessionFile.parse`) behave the same
without a file. One made with ``in_memory(write_through=file)`` (the writer of ``condense`` and
``replay``) also writes its text to ``file`` as it grows and keeps its ``custom`` entries there,
without their data in memory, reading each back when asked for.

Where this differs from Pi (only on input Pi mishandles, or by design):
- a missing, empty or header-less file raises instead of silently starting a new session;
- lines holding valid JSON that is not an object (``[1]``, ``42``, ``null``) are skipped with a
  warning; Pi keeps arrays as id-less pseudo-entries (a trailing one empties its context) and
  crashes on the others in v1 files;
- ``message`` entries without an object ``message`` are left out of the context (Pi throws);
- a ``parentId`` cycle ends the branch walk (Pi loops forever);
- :meth:`SessionFile.branch` / :meth:`SessionFile.build_context` raise for an unknown leaf id
  (Pi returns ``[]`` / falls back to the last entry; :func:`build_session_context` keeps Pi's
  fallback).

The package, by job: :mod:`.jsonl` (reading lines, :class:`LoadWarning`), :mod:`.context`
(``buildSessionContext``, the branch walk), :mod:`.entries` (building entries in Pi's key
order), :mod:`.lock` (the append lock, the side locks and low-level reads and writes),
:mod:`.index` (the entry index and the in-memory migration), :mod:`.file` (:class:`SessionFile`).
"""

from __future__ import annotations

from ..js.values import ABSENT
from .context import SessionContext, build_session_context
from .entries import CURRENT_SESSION_VERSION, Clock, IdSource, random_entry_id
from .file import SessionFile
from .jsonl import LoadWarning
from .lock import LOCK_TIMEOUT_S

__all__ = [
    "ABSENT",
    "CURRENT_SESSION_VERSION",
    "LOCK_TIMEOUT_S",
    "Clock",
    "IdSource",
    "LoadWarning",
    "SessionContext",
    "SessionFile",
    "build_session_context",
    "random_entry_id",
]
