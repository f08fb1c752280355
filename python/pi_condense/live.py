"""The live driver: a host's whole history in on every model call, the condensed history out.

Agent frameworks hand their model the whole conversation on every call, in the provider's
format, without timestamps. :class:`LiveDriver` turns that into what the pruner needs:

- it finds what is new since the previous call (the common case: the history grew at its
  end), recognises its own output when the framework wrote it back into its history, and
  treats an edited, truncated or forked history as a new branch of the session (Pi's tree)
  from the last message both share, so nothing is ever keyed against the wrong message;
- every message gets a unique, increasing timestamp when it is first seen; it is stored with
  the message in a Pi session file, so occurrence keys (``id@timestamp``) never collide, even
  when the model reuses tool-call ids, and a restarted process finds the same keys again;
- it emits Pi's events in Pi's order (``message_end`` for every message before it is stored,
  ``turn_end`` once a turn's tool results are in, ``agent_end`` after a run's final reply),
  so the flushes happen where the extension would run them; a run's final reply is only seen
  at the next call, or at :meth:`LiveDriver.flush` / :meth:`LiveDriver.close`;
- it renders the history (:meth:`pi_condense.condenser.Condenser.context`) and converts the
  result back with the host format's :class:`~pi_condense.adapters.base.Codec`, handing back
  the caller's very own objects for every message the render did not touch.

The driver runs its pruner work on one event loop in a thread of its own, so the synchronous
entry points work everywhere, also inside a running event loop (Jupyter), and the async ones
do not block the caller's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import inspect
import logging
import os
import threading
import uuid
import warnings
import weakref
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Literal, Optional, TypeVar, Union

from . import _core
from .adapters.base import Codec, Out, Unit, unit_messages
from .branch_facts import pi_context_usage
from .capture import is_final_assistant
from .collector import collector_paused
from .condenser import Condenser
from .config import Config, agent_dir
from .errors import CondenseError, CondenseWarning, SessionError
from .js import json as jsjson
from .js import time as jstime
from .render import RenderResult, render
from .session import SessionFile
from .session.lock import try_side_lock
from .state import PrunerState
from .summarize import make_summarizer
from .summarize.base import Summarizer
from .summarize.deterministic import DeterministicSummarizer
from .tools.base import ToolResult
from .tools.registry import Tool, ToolRegistry, condense_tools
from .triggers import ContextUsage
from .usage import TokenMemo

__all__ = [
    "ENV_SESSION_DIR",
    "JoinMode",
    "LiveDriver",
    "LiveStats",
    "SessionSpec",
    "default_session_path",
    "open_session",
    "stable_session",
]

log = logging.getLogger(__name__)

H = TypeVar("H")
T = TypeVar("T")

JoinMode = Literal["flush", "defer"]
"""What a late join does with the backlog (see :class:`LiveDriver`'s ``join``)."""

SessionSpec = Union[SessionFile, str, "os.PathLike[str]", None]
"""A session: a :class:`SessionFile`, a path (loaded, or created when missing), ``":memory:"``
(kept in memory only), or None (the conversation's own file, found again after a restart:
see :func:`stable_session`)."""

ENV_SESSION_DIR = "PI_CONDENSE_SESSION_DIR"
"""Where the hooks keep the sessions of ``session=None`` (default: Pi's sessions directory
for the working directory)."""

MEMORY = ":memory:"

_HOST_ROLES = ("user", "assistant", "toolResult")
"""The roles of the messages a host's history holds (the others are the pruner's own)."""


def default_session_path(cwd: str, session_id: str, now_ms: int) -> Path:
    """Where Pi would keep a new session for ``cwd``:
    ``<agentDir>/sessions/--<cwd-encoded>--/<timestamp>_<id>.jsonl``."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    encoded = trimmed.replace("/", "-").replace("\\", "-").replace(":", "-")
    stamp = jstime.to_iso_string(now_ms).replace(":", "-").replace(".", "-")
    return agent_dir() / "sessions" / f"--{encoded}--" / f"{stamp}_{session_id}.jsonl"


def _fingerprint_text(item: Any) -> str:
    """What of a host-only item (a system prompt) identifies a conversation: its role and
    content, not ids or timestamps a framework may give it."""
    if isinstance(item, Mapping):
        return jsjson.dumps({k: item[k] for k in ("role", "type", "content") if k in item})
    part = getattr(item, "part", item)
    content = getattr(part, "content", None)
    kind = getattr(part, "part_kind", type(part).__name__)
    return jsjson.dumps([str(kind), content if isinstance(content, str) else repr(content)])


def conversation_fingerprint(items: Sequence[Any], units: Sequence[Unit]) -> Optional[str]:
    """A hash of a history's beginning: its host-only items (system prompts) and messages up to
    and including its first user message; None when it has no user message yet."""
    parts: list[str] = []
    for unit in units:
        messages = unit_messages(unit.message)
        if not messages:
            parts.extend(_fingerprint_text(i) for i in items[unit.start : unit.stop])
            continue
        for message in messages:
            parts.append(jsjson.dumps(_bare(message)))
            if message.get("role") == "user":
                return hashlib.sha256("\n".join(parts).encode("utf-8", "replace")).hexdigest()
    return None


def stable_session(
    fingerprint: Optional[str], *, cwd: str, clock: Optional[Callable[[], int]] = None
) -> SessionFile:
    """The session file of the conversation with this fingerprint: found again by its session
    id (derived from the fingerprint) in ``$PI_CONDENSE_SESSION_DIR``, else in Pi's sessions
    directory for ``cwd``; created there (as Pi names a new session) when there is none.
    Without a fingerprint: a new session with a random id, in the same directory."""
    session_id = str(uuid.UUID(fingerprint[:32], version=4) if fingerprint else uuid.uuid4())
    configured = os.environ.get(ENV_SESSION_DIR)
    now = clock() if clock is not None else jstime.now_ms()
    path = default_session_path(cwd, session_id, now)
    directory = Path(configured).expanduser() if configured else path.parent
    found = sorted(directory.glob(f"*_{session_id}.jsonl")) if directory.is_dir() else []
    if found:
        return SessionFile.load(found[-1], clock=clock)
    target = directory / path.name
    try:
        return SessionFile.create(target, cwd, session_id=session_id, clock=clock)
    except SessionError:
        if target.exists():  # another process of the same conversation made it just now
            return SessionFile.load(target, clock=clock)
        raise


class _Writers:
    """One live driver writes a session file at a time: two (two hooks given the same path)
    would each store every message. Across processes, the first holds an ``flock`` on
    ``.<session name>.pi-condense-live.lock`` beside the session and another process's driver
    is refused when it is made. In one process, a new driver takes the session over (a
    restarted agent, a notebook cell run again) and the one it replaced refuses its next call;
    :meth:`LiveDriver.close` hands it back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # path -> (the flock's descriptor, -1 if none can be taken; the writing driver)
        self._owners: dict[str, tuple[int, weakref.ref[Any]]] = {}

    def claim(self, driver: Any, path: Optional[Path]) -> None:
        if path is None:
            return
        key = os.fspath(path)
        with self._lock:
            held = self._owners.get(key)
            if held is not None:
                fd = held[0]
            else:
                taken = try_side_lock(path, "live")
                if taken is None:
                    raise CondenseError(
                        f"{key}: another process's pi-condense hook (or LiveDriver) is writing "
                        "this session; two would store every message twice: give each "
                        "conversation its own session file"
                    )
                fd = taken
            self._owners[key] = (fd, weakref.ref(driver))

    def try_claim(self, driver: Any, path: Path) -> bool:
        """:meth:`claim` for ``session=None``: False, and nothing taken, while another live
        driver of this process or another process writes the session (two runs of one task
        at once share a beginning, so the later one gets a file of its own)."""
        with self._lock:
            held = self._owners.get(os.fspath(path))
            if held is not None and held[1]() not in (None, driver):
                return False
        try:
            self.claim(driver, path)
        except CondenseError:
            return False
        return True

    def check(self, driver: Any, path: Optional[Path]) -> bool:
        """Raises if another driver took the session over; True if it was taken again."""
        if path is None:
            return False
        key = os.fspath(path)
        with self._lock:
            held = self._owners.get(key)
            owner = held[1]() if held is not None else None
        if held is None:
            self.claim(driver, path)
            return True
        if owner is not driver:
            raise CondenseError(
                f"{key}: a newer pi-condense hook (or LiveDriver) on this session took it "
                "over, so this one no longer writes it (two would store every message "
                "twice): use the newer one, or close() it to use this one again"
            )
        return False

    def release(self, driver: Any, path: Optional[Path]) -> None:
        if path is None:
            return
        key = os.fspath(path)
        with self._lock:
            held = self._owners.get(key)
            if held is None or held[1]() is not driver:
                return
            del self._owners[key]
        if held[0] >= 0:
            os.close(held[0])


_WRITERS = _Writers()


def open_session(
    session: SessionSpec, *, cwd: Optional[str] = None, clock: Optional[Callable[[], int]] = None
) -> SessionFile:
    """The :class:`SessionFile` a driver writes to (see :data:`SessionSpec`)."""
    if isinstance(session, SessionFile):
        return session
    here = cwd if cwd is not None else os.getcwd()
    if session is None:
        session_id = str(uuid.uuid4())
        now = clock() if clock is not None else jstime.now_ms()
        path = default_session_path(here, session_id, now)
        return SessionFile.create(path, here, session_id=session_id, clock=clock)
    if os.fspath(session) == MEMORY:
        return SessionFile.in_memory(here, clock=clock)
    path = Path(os.fspath(session))
    if path.exists():
        return SessionFile.load(path, clock=clock)
    return SessionFile.create(path, here, clock=clock)


def _config(config: Union[Config, Mapping[str, Any], None]) -> Config:
    if isinstance(config, Config):
        return config
    settings = {"enabled": True, **(dict(config) if config is not None else {})}
    return Config.from_settings_dict(settings)


def _summarizers(
    summarizer: Union[Summarizer, str, None],
) -> tuple[Optional[Summarizer], Summarizer]:
    """(explicit summarizer or None, the session model: the offline summarizer by default)."""
    if isinstance(summarizer, str):
        return make_summarizer(summarizer), DeterministicSummarizer()
    return summarizer, DeterministicSummarizer()


def _bare(message: Mapping[str, Any]) -> dict[str, Any]:
    """The message without its timestamp: what a host's history can be compared with."""
    return {k: v for k, v in message.items() if k != "timestamp"}


def _messages_of(units: Sequence[Unit], first: int) -> list[dict[str, Any]]:
    """The Pi messages of ``units[first:]``, in order (``unit_messages`` of each, joined)."""
    messages: list[dict[str, Any]] = []
    append = messages.append
    for unit in units[first:]:
        message = unit.message
        if type(message) is dict:
            append(message)
        elif message is not None:
            messages.extend(unit_messages(message))
    return messages


def _has_tool_calls(message: Mapping[str, Any]) -> bool:
    return not is_final_assistant(message)


def _same_items(a: Sequence[Any], b: Sequence[Any]) -> int:
    """The length of the common prefix of two item lists (identity, else equality).

    Native (``_core.list_prefix``): identity first, then ``==`` from the first item that is
    another object (a host that rebuilds its history hands over equal copies), with no Python
    frame per item; a 10k-item prefix of equal copies costs one deep comparison of the items."""
    if type(a) is list and type(b) is list:
        try:
            return _core.list_prefix(a, b, equal=True)
        except Exception:  # an item whose == raises: compare one at a time, stop there
            pass
    n = min(len(a), len(b))
    i = 0
    while i < n:
        x, y = a[i], b[i]
        if x is not y:
            try:
                if not bool(x == y):
                    break
            except Exception:
                break
        i += 1
    return i


def _identical_items(a: Sequence[Any], b: Sequence[Any]) -> int:
    """The length of the common prefix of two item lists (the very same objects)."""
    if type(a) is list and type(b) is list:
        return _core.list_prefix(a, b)
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] is b[i]:
        i += 1
    return i


def _units_within(units: Sequence[Unit], count: int, limit: int) -> int:
    """How many of the first ``limit`` units lie wholly within the first ``count`` items."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi) // 2
        if units[mid].stop <= count:
            lo = mid + 1
        else:
            hi = mid
    return lo


@dataclass
class _Known:
    """One host message as the session stores it."""

    message: dict[str, Any]  # the Pi message, with its timestamp (what the render gets)
    bare: dict[str, Any]  # the same without the timestamp (what the host's history holds)
    entry_id: str


@dataclass
class _Origin:
    """Where the host items one unit was decoded from lie in the latest history
    (``items[start:stop]``: positions, not objects, so a history handed over again as equal
    copies needs no rebinding), and the stored messages the unit made."""

    start: int
    stop: int
    group: list[dict[str, Any]]


@dataclass
class _Encoded:
    """The previous call's encode, to assemble the next one from when nothing it depends on
    changed: the render's messages and their origins (compared by equality and identity),
    and the output as positions into ``items + made`` (``items``: the history of that call,
    ``made``: the host items the codec made)."""

    layout: tuple[int, int, int, int]
    rendered: list[Any]
    origins: list[Optional[_Origin]]
    made: list[Any]
    at: list[int]


@dataclass
class LiveStats:
    """What the driver did so far (this process). ``last`` is the last render in full; the
    printed form leaves it out (it holds the whole context)."""

    calls: int = 0
    messages_seen: int = 0
    rebuilds: int = 0
    adopted: int = 0
    written_back: int = 0
    chars_in: int = 0
    chars_out: int = 0
    last: Optional[RenderResult] = field(default=None, repr=False)


@dataclass
class _Run:
    """Where the agent loop is: Pi's run and turn bookkeeping."""

    active: bool = False
    turn_index: int = 0
    has_assistant: bool = False
    assistant: Optional[dict[str, Any]] = None
    results: list[Any] = field(default_factory=list)


class _Loop:
    """One event loop in a daemon thread: where all of a driver's pruner work runs."""

    def __init__(self) -> None:
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="pi-condense-live", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._start())

    def in_loop(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()


class LiveDriver(Generic[H]):
    """pi-condense for a host that hands over its whole history on every model call.

    ``codec`` converts the host's format (see :mod:`pi_condense.adapters`). ``session`` is
    where the conversation and the pruner's entries are kept (:data:`SessionSpec`): pass the
    same path again after a restart to continue with the same refs. ``config`` is a
    :class:`~pi_condense.config.Config` or a ``contextPrune`` dict; a dict is enabled unless
    it says ``"enabled": false`` (Pi's settings file is not read). ``summarizer`` is a
    summarizer object or a spec string (``"openai:gpt-4o-mini"``, ...); the default is the
    offline summarizer, which is also the fallback when an API summarizer fails.
    ``context_window`` sizes the budget triggers' usage estimate; ``clock`` gives epoch ms.
    ``spill_paths``: the host's model has a tool that reads local files (a spill stub then
    also names the sidecar's path, as Pi's does); by default it names only its ref.
    ``join``: what the first call on a history holding whole earlier runs the session does
    not have (a driver turned on mid-conversation) does with them: ``"flush"`` (default)
    stores them and summarizes everything pending before rendering, so that first request is
    condensed; ``"defer"`` only stores them and renders (the request condensed only by what
    the session already held), and the next call (or :meth:`flush`) summarizes the backlog
    first: a fast first call, a costly second one.
    """

    def __init__(
        self,
        codec: Codec[H],
        *,
        session: SessionSpec = None,
        config: Union[Config, Mapping[str, Any], None] = None,
        summarizer: Union[Summarizer, str, None] = None,
        cwd: Optional[str] = None,
        context_window: int = 200_000,
        clock: Optional[Callable[[], int]] = None,
        notify: Optional[Callable[[str, str], None]] = None,
        spill_paths: bool = False,
        join: JoinMode = "flush",
    ) -> None:
        if join not in ("flush", "defer"):
            raise ValueError(f"join must be 'flush' or 'defer', not {join!r}")
        self.codec = codec
        self._join: JoinMode = join
        self._owed = False  # a deferred join left the backlog's flush to the next call
        self._clock: Callable[[], int] = clock if clock is not None else jstime.now_ms
        self._session_clock = clock
        self._cwd = cwd if cwd is not None else os.getcwd()
        # session=None: the conversation's own session, known at the first call (its
        # beginning names it); until then an empty stand-in in memory
        self._unsettled = session is None
        self._session = (
            SessionFile.in_memory(self._cwd, clock=clock)
            if session is None
            else open_session(session, cwd=cwd, clock=clock)
        )
        self._window = context_window
        self._notify_sink = notify
        self._claim_session()
        self._summarizer = summarizer
        self._spill_paths = spill_paths
        self._settings = _config(config)
        self._condenser = self._new_condenser()
        self._loop = _Loop()
        self._serial: Optional[asyncio.Lock] = None
        self.stats = LiveStats()
        self._tools: Optional[ToolRegistry] = None
        self._inner_tools: Optional[ToolRegistry] = None
        self._started = False
        self._raw: list[Any] = []
        # each stored message's token estimate (they never change once stored)
        self._tokens: TokenMemo = {}
        self._known: list[_Known] = []
        self._origin: dict[int, _Origin] = {}  # by id() of a stored message in _raw
        self._last_ts = 0
        self._run = _Run()
        self._prev_items: list[Any] = []
        self._prev_units: list[Unit] = []
        self._host_counts: list[int] = [0]  # host messages in the first k previous units
        self._last_out: Optional[list[Any]] = None
        # (a written-back history a call was given, the raw history it stood for)
        self._given: Optional[tuple[list[Any], list[Any]]] = None
        self._epoch = 0  # bumped whenever units, origins or the stored messages change
        self._encoded: Optional[_Encoded] = None

    def _new_condenser(self) -> Condenser:
        explicit, fallback = _summarizers(self._summarizer)
        return Condenser(
            self._session,
            self._settings,
            summarizer=explicit,
            session_model=fallback,
            clock=self._clock,
            context_usage=self._context_usage,
            notify=self._notify,
            spill_paths=self._spill_paths,
            # the driver's messages are its own copies, never changed in place once stored
            frozen_messages=True,
        )

    def _settle(self, items: list[Any]) -> None:
        """``session=None``: open the session the history's beginning names (the same one
        after a restart), or, when it holds no user message yet, a new one with a warning."""
        self._unsettled = False
        fingerprint = conversation_fingerprint(items, self.codec.decode(items, 0))
        if fingerprint is None:
            warnings.warn(
                "pi-condense: session=None but the first history holds no user message, so "
                "this conversation cannot be found again after a restart: it gets a new "
                "session file, and its refs are not those of an earlier process. Pass "
                "session=<path> to keep them.",
                CondenseWarning,
                stacklevel=4,
            )
        session = stable_session(fingerprint, cwd=self._cwd, clock=self._session_clock)
        if session.path is not None and not _WRITERS.try_claim(self, session.path):
            warnings.warn(
                "pi-condense: session=None and another live hook holds this conversation's "
                f"session file ({session.path}), so this one gets a session file of its own. "
                "Pass session=<path> to choose.",
                CondenseWarning,
                stacklevel=4,
            )
            session = stable_session(None, cwd=self._cwd, clock=self._session_clock)
            self._session = session
            self._claim_session()
        self._session = session
        self._condenser = self._new_condenser()
        self._inner_tools = None
        self._started = False  # (a flush before the first call started the stand-in)

    # ------------------------------------------------------------------ public

    @property
    def session(self) -> SessionFile:
        """The session file the conversation and the pruner's entries are written to."""
        return self._session

    @property
    def condenser(self) -> Condenser:
        """The :class:`~pi_condense.condenser.Condenser` behind this driver."""
        return self._condenser

    @property
    def tools(self) -> ToolRegistry:
        """``context_tree_query`` and the session recovery tools over this session."""
        if self._tools is None:
            # each tool runs against the session of the moment (session=None settles it at
            # the first call, after a host may have taken the tools)
            self._tools = ToolRegistry(
                Tool(t.spec, functools.partial(self._run_tool, t.name)) for t in self._inner()
            )
        return self._tools

    def _inner(self) -> ToolRegistry:
        if self._inner_tools is None:
            paging = not self._condenser.config.is_reference
            self._inner_tools = condense_tools(self._session, refresh=False, paging=paging)
        return self._inner_tools

    def _run_tool(
        self, name: str, arguments: Mapping[str, Any], tool_call_id: Optional[str]
    ) -> ToolResult:
        return self._inner()[name].runner(arguments, tool_call_id)

    def execute(
        self,
        name: str,
        arguments: Union[Mapping[str, Any], str, None],
        tool_call_id: Optional[str] = None,
    ) -> str:
        """Run one of :attr:`tools` for the model; returns the tool result's text."""
        return self.tools.execute(name, arguments, tool_call_id=tool_call_id)

    def condense(self, history: Sequence[H]) -> list[H]:
        """The history to send instead of ``history`` (call before every model call)."""
        return self._sync(self._condense(list(history)))

    async def acondense(self, history: Sequence[H]) -> list[H]:
        """:meth:`condense` for async hosts."""
        return await self._async(self._condense(list(history)))

    def flush(self, history: Optional[Sequence[H]] = None) -> None:
        """Take in ``history`` (e.g. with the run's final reply), close the run as Pi does at
        its end, and summarize everything still pending (``/pruner now``)."""
        self._sync(self._flush(None if history is None else list(history)))

    async def aflush(self, history: Optional[Sequence[H]] = None) -> None:
        """:meth:`flush` for async hosts."""
        await self._async(self._flush(None if history is None else list(history)))

    def close(self, history: Optional[Sequence[H]] = None) -> None:
        """:meth:`flush`, then stop the driver's worker thread and let another driver take
        the session (both are taken again if this one is used again)."""
        try:
            self.flush(history)
        finally:
            self._loop.stop()
            self._release_session()

    async def aclose(self, history: Optional[Sequence[H]] = None) -> None:
        """:meth:`close` for async hosts."""
        try:
            await self.aflush(history)
        finally:
            self._loop.stop()
            self._release_session()

    # ------------------------------------------------------------------ one writer

    def _claim_session(self) -> None:
        """Make this driver the one that writes its session file (see :class:`_Writers`)."""
        _WRITERS.claim(self, self._session.path)

    def _release_session(self) -> None:
        _WRITERS.release(self, self._session.path)

    # ------------------------------------------------------------------ plumbing

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.in_loop():
            coro.close()
            raise CondenseError("a LiveDriver was called from inside its own pruner work")
        self._reclaim(coro)
        return self._loop.submit(coro).result()

    async def _async(self, coro: Coroutine[Any, Any, T]) -> T:
        self._reclaim(coro)
        return await asyncio.wrap_future(self._loop.submit(coro))

    def _reclaim(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Still the session's writer (or, used again after :meth:`close`, again)?"""
        try:
            again = _WRITERS.check(self, self._session.path)
            if again and self._session.refresh():
                # another driver wrote meanwhile: continue from the session as after a restart
                self._started = False
                self._prev_items, self._prev_units, self._host_counts = [], [], [0]
                self._last_out = None
                self._given = None
        except CondenseError:
            coro.close()
            raise

    def _lock(self) -> asyncio.Lock:
        """One model call's work at a time (created in the driver's own loop)."""
        if self._serial is None:
            self._serial = asyncio.Lock()
        return self._serial

    def _notify(self, text: str, level: str) -> None:
        if self._notify_sink is not None:
            self._notify_sink(text, level)
        elif level in ("warning", "error"):
            log.warning("%s", text)
        else:
            log.info("%s", text)

    def _context_usage(self) -> Optional[ContextUsage]:
        tokens, percent = pi_context_usage(self._session, self._raw, self._window, self._tokens)
        return ContextUsage(tokens, self._window, percent)

    async def _guard(self, name: str, step: Callable[[], Any]) -> Any:
        """Run one pruner event; a failure is reported and never reaches the host's loop."""
        try:
            outcome = step()
            if inspect.isawaitable(outcome):
                outcome = await outcome
            return outcome
        except Exception as exc:
            log.exception("pi-condense: %s failed", name)
            self._notify(f"pruner: {name} failed: {type(exc).__name__}: {exc}", "error")
            return None

    # ------------------------------------------------------------------ session state

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        self._condenser.session_start()
        self._load_branch()

    def _load_branch(self) -> None:
        """Take the raw context and the host messages from the session's current branch."""
        self._raw = []
        self._tokens = {}
        self._known = []
        self._origin = {}
        self._epoch += 1
        self._last_ts = 0
        messages = self._session.build_context().messages
        # the context holds copies: pair its host messages with the branch's message entries
        # from the end (a compaction only leaves out a prefix)
        ids = [
            e["id"]
            for e in self._session.branch()
            if e.get("type") == "message"
            and isinstance(e.get("message"), dict)
            and e["message"].get("role") in _HOST_ROLES
        ]
        hosts = sum(1 for m in messages if isinstance(m, dict) and m.get("role") in _HOST_ROLES)
        id_at = iter(ids[len(ids) - hosts :] if hosts <= len(ids) else [""] * hosts)
        for message in messages:
            self._raw.append(message)
            ts = message.get("timestamp") if isinstance(message, dict) else None
            if isinstance(ts, (int, float)) and not isinstance(ts, bool):
                self._last_ts = max(self._last_ts, int(ts))
            if isinstance(message, dict) and message.get("role") in _HOST_ROLES:
                self._known.append(_Known(message, _bare(message), next(id_at, "")))
        self._run = self._run_state()

    def _run_state(self) -> _Run:
        """The agent loop's position after the known messages (all their events were sent)."""
        run = _Run()
        known_messages = self._known
        # a user message starts the run afresh: only the messages from the last one count
        start = len(known_messages)
        while start and known_messages[start - 1].message.get("role") != "user":
            start -= 1
        for known in known_messages[max(start - 1, 0) :]:
            message = known.message
            role = message.get("role")
            if role == "user":
                run = _Run(active=True)
            elif role == "assistant":
                run.active = True
                run.has_assistant = True
                stop = message.get("stopReason")
                if stop in ("error", "aborted") or not _has_tool_calls(message):
                    run = _Run()
                else:
                    if run.assistant is not None:
                        run.turn_index += 1
                    run.assistant, run.results = message, []
            elif role == "toolResult" and run.assistant is not None:
                run.results.append(message)
        return run

    def _next_timestamp(self) -> int:
        ts = max(int(self._clock()), self._last_ts + 1)
        self._last_ts = ts
        return ts

    # ------------------------------------------------------------------ the events

    async def _turn_end(self) -> None:
        run = self._run
        message, results, index = run.assistant, list(run.results), run.turn_index
        await self._guard("turn_end", lambda: self._condenser.turn_end(message, results, index))
        run.turn_index += 1
        run.assistant = None
        run.results = []
        run.has_assistant = False

    async def _agent_end(self) -> None:
        await self._guard("agent_end", self._condenser.agent_end)
        self._run = _Run()

    async def _deliver(self, bare: dict[str, Any]) -> None:
        message = dict(bare)
        message["timestamp"] = self._next_timestamp()
        await self._guard("message_end", lambda: self._condenser.message_end(message))
        entry_id = self._session.append_message(message)
        self._raw.append(message)
        self._known.append(_Known(message, bare, entry_id))
        self.stats.messages_seen += 1
        run = self._run
        role = message.get("role")
        if role == "assistant":
            run.has_assistant = True
            run.assistant, run.results = message, []
            if message.get("stopReason") in ("error", "aborted") or not _has_tool_calls(message):
                await self._turn_end()
                await self._agent_end()
        elif role == "toolResult" and run.assistant is not None:
            run.results.append(message)

    async def _take(self, bare: dict[str, Any]) -> None:
        """One new host message, with the events Pi sends around it."""
        run = self._run
        role = bare.get("role")
        if role == "user":
            if run.assistant is not None:
                await self._turn_end()
                await self._agent_end()
            elif run.active and run.has_assistant:
                await self._agent_end()
            if not self._run.active:
                self._run = _Run(active=True)
        elif role == "assistant":
            if run.assistant is not None:
                await self._turn_end()
            elif not run.active:
                self._run = _Run(active=True)
        await self._deliver(bare)

    def _adopt(self, messages: list[dict[str, Any]], reload: bool = True) -> None:
        """Store ``messages`` without replaying their events, then (``reload``) rebuild the
        pruner's state from the session (the extension's reload path: it finds the work left
        to summarize; the messages add no state entries, so a render needs no rebuild)."""
        stamped: list[dict[str, Any]] = []

        def stamp() -> Iterator[dict[str, Any]]:
            # each timestamp read as the session takes its message, as one append at a time
            # (_next_timestamp, inlined: ten thousand of them at a late join)
            clock, keep = self._clock, stamped.append
            for bare in messages:
                ts = self._last_ts = max(int(clock()), self._last_ts + 1)
                message = {**bare, "timestamp": ts}
                keep(message)
                yield message

        ids = self._session.append_messages(stamp())
        self._raw.extend(stamped)
        self._known.extend(map(_Known, stamped, messages, ids))
        self.stats.messages_seen += len(messages)
        self.stats.adopted += len(messages)
        if reload:
            self._condenser.session_tree()
        self._run = self._run_state()

    def _fork_at(self, shared: int) -> None:
        """The history left the session's branch after ``shared`` host messages: continue on a
        new branch of the session from there (Pi's tree), with the state of that branch."""
        if shared < len(self._known):
            entry = self._session.get_entry(self._known[shared].entry_id)
            parent = entry.get("parentId") if entry is not None else None
            self._session.set_leaf(parent if isinstance(parent, str) else None)
            self._condenser.session_tree()
            self._load_branch()
            self.stats.rebuilds += 1

    # ------------------------------------------------------------------ one model call

    def _decode(self, items: list[Any]) -> tuple[list[Unit], int]:
        """Units of ``items`` and how many of them the previous call's decode already had
        (only what differs from the previous call's items is decoded again)."""
        same = _same_items(items, self._prev_items)
        units = self._prev_units
        keep = _units_within(units, same, len(units))
        start = units[keep - 1].stop if keep else 0
        fresh = self.codec.decode(items, start)
        if keep < len(units) or fresh:
            self._epoch += 1
        del units[keep:]
        del self._host_counts[keep + 1 :]
        count = self._host_counts[-1]
        for unit in fresh:
            units.append(unit)
            count += len(unit_messages(unit.message))
            self._host_counts.append(count)
        self._prev_items = items
        return units, keep

    def _unwrite(self, items: list[Any]) -> list[Any]:
        """A history that starts with our last output stands for the raw history behind it;
        so does one that starts with the history a previous call took that way (the same
        written-back history handed over again, e.g. a retried call)."""
        out = self._last_out
        if out is not None and len(items) >= len(out) and _same_items(items, out) == len(out):
            self.stats.written_back += 1
            raw = self._prev_items + items[len(out) :]
            self._given = (items, raw)
            return raw
        if self._given is not None:
            given, raw = self._given
            if len(items) >= len(given) and _same_items(items, given) == len(given):
                self.stats.written_back += 1
                return raw + items[len(given) :]
        self._given = None
        return items

    async def _ingest(self, items: list[Any]) -> list[Unit]:
        if self._unsettled:
            self._settle(items)
        self._start()
        await self._pay_backlog()
        given = items
        items = self._unwrite(items)
        units, keep = self._decode(items)
        # the previous call's host messages are the session's first ones: start after them
        shared = min(self._host_counts[keep], len(self._known))
        fresh = _messages_of(units, keep)
        matched = 0
        known = self._known
        while (
            shared + matched < len(known)
            and matched < len(fresh)
            and fresh[matched] == known[shared + matched].bare
        ):
            matched += 1
        forked = shared + matched < len(known)
        if forked and self.stats.calls == 0 and self._last_out is None:
            # a restarted process handed a history that holds an earlier process's output
            recovered = self._recognise_restart(fresh)
            if recovered is not None:
                self._prev_items, self._prev_units, self._host_counts = [], [], [0]
                self._last_out = None
                self.stats.written_back += 1
                raw_items, cut = recovered
                raw = raw_items + items[cut:]
                units = await self._ingest(raw)
                self._given = (given, raw)
                return units
        if forked:
            self._fork_at(shared + matched)
        new = fresh[matched:]
        last_user = max((i for i, m in enumerate(new) if m.get("role") == "user"), default=-1)
        if any(m.get("role") == "user" for m in new[:last_user]):
            # whole earlier runs at once (a conversation the driver joins late): take them in
            # as Pi does a session it opens, then let the next turn flush what is recoverable
            defer = self._join == "defer"
            with self._session.deferred_sync():  # one fsync for the lot, not one an entry
                with self._session.batched():  # and one open and lock of the file
                    # deferred: the last run too, with no events (its turn ends would flush)
                    self._adopt(new if defer else new[:last_user], reload=not defer)
                new = [] if defer else new[last_user:]
                # (session_tree's probe has rescanned the branch: no second rescan to ask)
                if defer:
                    self._owed = True
                else:
                    await self._flush_backlog()
        for bare in new:
            await self._take(bare)
        # the units kept from the previous call keep their origins: an origin is a position in
        # the latest history, and those positions hold the same (or equal) items
        if forked:
            self._bind(units, 0, 0)
        else:
            self._bind(units, keep, shared)
        return units

    async def _flush_backlog(self) -> None:
        """Summarize what a join took in (when the reload's probe found work)."""
        if not (self._condenser.config.enabled and self._condenser.rearmed):
            return
        # the offline summarizer (the driver's session model) makes no slow call between
        # the flush's appends; a model's would keep other writers waiting
        local = self._summarizer is None and self._condenser.config.summarizer_model == "default"
        batch = self._session.batched() if local else nullcontext()
        with self._session.deferred_sync(), batch:
            await self._guard("flush", self._condenser.flush_now)

    async def _pay_backlog(self) -> None:
        """The backlog flush a deferred join left for this call, before anything else."""
        if self._owed:
            self._owed = False
            self._condenser.session_tree()  # the reload the join left out
            await self._flush_backlog()

    def _recognise_restart(self, fresh: list[dict[str, Any]]) -> Optional[tuple[list[Any], int]]:
        """After a restart: does the history start with what an earlier call sent?

        The candidates are the renders at the last few model-call points of the branch (each
        entry between two host messages near the end). A match gives host items standing for
        the raw messages behind that output, and how many of the given items it covers.
        """
        branch = self._session.branch()
        config = self._condenser.config
        host_at = [
            i
            for i, e in enumerate(branch)
            if e.get("type") == "message"
            and isinstance(e.get("message"), dict)
            and e["message"].get("role") in _HOST_ROLES
        ]
        tried = 0
        for h in range(len(host_at) - 1, -1, -1):
            end = host_at[h + 1] if h + 1 < len(host_at) else len(branch)
            for leaf in range(end - 1, host_at[h] - 1, -1):
                tried += 1
                if tried > 24:
                    return None
                leaf_id = branch[leaf].get("id")
                if not isinstance(leaf_id, str):
                    continue
                raw = self._session.build_context(leaf_id).messages
                state = PrunerState.from_session(self._session, leaf_id)
                out = render(raw, state, config, spill_paths=self._condenser.spill_paths)
                if not out.pruned:
                    continue
                sent = self._sent(out.messages)
                rendered: Sequence[Any] = out.messages
                if len(sent) > len(fresh) or fresh[: len(sent)] != sent:
                    matched = self._live_supersession(raw, leaf_id, out.messages, sent, fresh)
                    if matched is None:
                        continue
                    rendered, sent = matched
                cut = self._items_covering(len(sent))
                if cut is None:
                    continue
                hosts = [m for m in raw if isinstance(m, dict) and m.get("role") in _HOST_ROLES]
                # the host's own items (system prompts) are not in the session: keep those of
                # the covered part, ahead of the raw messages it stands for
                own = [
                    item
                    for u in self._prev_units
                    if u.stop <= cut and not unit_messages(u.message)
                    for item in self._prev_items[u.start : u.stop]
                ]
                kept = self._untouched_items(rendered, len(sent))
                outs = [Out(m, kept.get(id(m), ())) for m in hosts]
                raw_items = own + self.codec.encode(outs)
                return raw_items, cut
        return None

    def _sent(self, messages: Sequence[Any]) -> list[dict[str, Any]]:
        """The messages a render's output reaches the model as (through the host's codec)."""
        encoded = self.codec.encode([Out(m, ()) for m in messages])
        return [_bare(m) for u in self.codec.decode(encoded) for m in unit_messages(u.message)]

    def _live_supersession(
        self,
        raw: list[Any],
        leaf_id: str,
        cold: Sequence[Any],
        cold_sent: list[dict[str, Any]],
        fresh: list[dict[str, Any]],
    ) -> Optional[tuple[Sequence[Any], list[dict[str, Any]]]]:
        """The cold render stubs every earlier read of a protected path that was read again;
        the live one stubbed only those its supersession floor reached, so an earlier call
        may have sent some of them as they are. Does the history start with the cold render
        with some of its superseded reads left as they are? Then the render's messages with
        those reads put back, and what they reach the model as."""
        state = PrunerState.from_session(self._session, leaf_id)
        out = render(
            raw,
            state,
            self._condenser.config,
            spill_paths=self._condenser.spill_paths,
            supersede=_core.SupersedeState(),  # no floor: nothing superseded
        )
        sent = self._sent(out.messages)
        count = len(sent)
        if count != len(cold_sent) or count > len(fresh) or sent == cold_sent:
            return None
        if any(fresh[i] != sent[i] and fresh[i] != cold_sent[i] for i in range(count)):
            return None
        if len(out.messages) != len(cold) or len(cold) != count:
            return cold, fresh[:count]  # matched; no message-for-message map to the items
        mixed = [out.messages[i] if fresh[i] == sent[i] else cold[i] for i in range(count)]
        return mixed, fresh[:count]

    def _untouched_items(self, rendered: Sequence[Any], count: int) -> dict[int, tuple[Any, ...]]:
        """The caller's items of the messages the render left untouched (by ``id`` of the
        message), when the render's first ``count`` messages are the given history's first
        ones one for one: they then stand for those raw messages as they are (the very bytes
        the host sends, e.g. a tool call's argument text), instead of a re-encoding."""
        if len(rendered) != count:
            return {}
        kept: dict[int, tuple[Any, ...]] = {}
        position = 0
        for unit in self._prev_units:
            n = len(unit_messages(unit.message))
            if n == 1 and position < count:
                kept[id(rendered[position])] = tuple(self._prev_items[unit.start : unit.stop])
            position += n
            if position >= count:
                break
        return kept

    def _items_covering(self, messages: int) -> Optional[int]:
        """How many of the latest decoded items hold exactly the first ``messages`` messages."""
        for i, count in enumerate(self._host_counts):
            if count == messages:
                return self._prev_units[i - 1].stop if i else 0
            if count > messages:
                return None
        return None

    def _bind(self, units: list[Unit], first: int, position: int) -> None:
        """Remember which host items each stored message came from (units from ``first`` on,
        whose first message is stored message ``position``)."""
        known = self._known
        origins = self._origin
        bound = 0
        for unit in units[first:]:
            message = unit.message
            if message is None:
                continue
            bound += 1
            if type(message) is dict and position < len(known):  # (the common unit: one)
                stored = known[position].message
                origins[id(stored)] = _Origin(unit.start, unit.stop, [stored])
                position += 1
                continue
            n = len(unit_messages(message))
            if not n:
                bound -= 1
                continue
            group = [k.message for k in known[position : position + n]]
            origin = _Origin(unit.start, unit.stop, group)
            for stored in group:
                origins[id(stored)] = origin
            position += n
        self._epoch += bound

    async def _condense(self, items: list[Any]) -> list[Any]:
        async with self._lock():
            # a deferred driver's first call (a late join: the whole history decoded, stored
            # and encoded, no summarizer run for it) builds tens of thousands of containers
            # that all live on; the cyclic collector, left on, walks them again and again
            # while they are made (over half of that call's time at 10k items)
            first = self._join == "defer" and not self._prev_items
            with collector_paused() if first else nullcontext():
                return await self._condense_locked(items)

    async def _condense_locked(self, items: list[Any]) -> list[Any]:
        units = await self._ingest(items)
        # (a deferred join leaves its last turn's end to the next call, after the backlog)
        if self._run.assistant is not None and self._run.results and not self._owed:
            await self._turn_end()
        self._raw = self._condenser.absorb_live_summaries(self._raw)
        self.stats.calls += 1
        result: Optional[RenderResult] = await self._guard(
            "context", lambda: self._condenser.context(self._raw)
        )
        self.stats.last = result
        if result is None or not result.pruned or result.threw:
            if result is not None:
                self.stats.chars_in += result.before_chars
                self.stats.chars_out += result.before_chars
            self._last_out = None
            if not self._condenser.config.enabled:
                return list(self._prev_items)
            # nothing condensed, but the codec still makes the request valid (a call the
            # host never answered gets its result); untouched items come back as they are
            return self._encode(self._raw, units)
        out = self._encode(result.messages, units)
        self.stats.chars_in += result.before_chars
        self.stats.chars_out += result.after_chars
        self._last_out = out
        return list(out)

    def _encode(self, rendered: Sequence[Any], units: Sequence[Unit]) -> list[Any]:
        """Host items for the render's output: assembled from the previous call's encode
        when the history's layout and the render are the same (equal messages, the same
        origins), else encoded afresh (and remembered)."""
        items = self._prev_items
        layout = (self._epoch, len(items), len(units), len(self._known))
        last = self._encoded
        same = last is not None and last.layout == layout and len(last.rendered) == len(rendered)
        # the same objects (a frozen render hands out its unchanged messages again): their
        # origins are those of the previous call, as none was added or dropped (same epoch)
        if same and last is not None and _identical_items(last.rendered, rendered) == len(rendered):
            return list(map((items + last.made).__getitem__, last.at))
        rendered = list(rendered)
        origins = list(map(self._origin.get, map(id, rendered)))
        if (
            same
            and last is not None
            and _identical_items(last.origins, origins) == len(origins)
            and _same_items(last.rendered, rendered) == len(rendered)
        ):
            return list(map((items + last.made).__getitem__, last.at))
        out = self._encode_afresh(rendered, units)
        made: list[Any] = []
        at: list[int] = []
        if len(out) == len(items) and _identical_items(out, items) == len(items):
            # the history handed back as it came (nothing condensed yet: a deferred join)
            self._encoded = _Encoded(layout, rendered, origins, made, list(range(len(items))))
            return out
        where = dict(zip(map(id, items), range(len(items)), strict=True))
        for item in out:
            index = where.get(id(item))
            if index is None:
                index = len(items) + len(made)
                made.append(item)
            at.append(index)
        self._encoded = _Encoded(layout, rendered, origins, made, at)
        return out

    def _encode_afresh(self, rendered: Sequence[Any], units: Sequence[Unit]) -> list[Any]:
        items = self._prev_items
        # host-only items (system prompts, ...) stay before the host message that followed them
        anchored: list[tuple[int, tuple[Any, ...]]] = []
        host = 0
        for unit in units:
            message = unit.message
            n = 1 if type(message) is dict else len(unit_messages(message))
            if n == 0:
                anchored.append((host, tuple(items[unit.start : unit.stop])))
            host += n
        outs: list[Out] = []
        a = 0
        while a < len(anchored) and anchored[a][0] == 0:
            outs.append(Out(None, anchored[a][1]))
            a += 1
        # (the stored messages' positions matter only while anchored items are left to place)
        position: dict[int, int] = {}
        if a < len(anchored):
            position = {id(k.message): i for i, k in enumerate(self._known)}
        origin_of = self._origin.get
        i = 0
        while i < len(rendered):
            message = rendered[i]
            if a < len(anchored):
                at = position.get(id(message))
                if at is not None:
                    while a < len(anchored) and anchored[a][0] <= at:
                        outs.append(Out(None, anchored[a][1]))
                        a += 1
            origin = origin_of(id(message))
            i += 1
            if origin is None:
                outs.append(Out(message, ()))
            elif len(origin.group) == 1:
                outs.append(Out(message, tuple(items[origin.start : origin.stop])))
            else:
                n = len(origin.group)
                whole = origin.group[0] is message and all(
                    i - 1 + k < len(rendered) and rendered[i - 1 + k] is origin.group[k]
                    for k in range(n)
                )
                if whole:
                    outs.append(Out(list(origin.group), tuple(items[origin.start : origin.stop])))
                    i += n - 1
                else:
                    outs.append(Out(message, ()))
        outs.extend(Out(None, chunk) for _, chunk in anchored[a:])
        return self.codec.encode(outs)

    async def _flush(self, items: Optional[list[Any]]) -> None:
        async with self._lock():
            if items is not None:
                await self._ingest(items)
            else:
                self._start()
                await self._pay_backlog()
            if self._run.assistant is not None:
                await self._turn_end()
            if self._run.active:
                await self._agent_end()
            if self._condenser.config.enabled and self._condenser.capture_pending():
                await self._guard("flush", self._condenser.flush_now)
            self._raw = self._condenser.absorb_live_summaries(self._raw)
