"""Replay a raw Pi session through a :class:`~pi_condense.condenser.Condenser`, as Pi would.

The replay walks the branch of a recorded session and re-enacts it: every source entry is
appended again to a new session, and the condenser receives the events Pi 0.83's agent loop
would have emitted around it (conformance/README.md, "How the replay drove the extension"):

- ``user``: a pending tool turn ends (``turn_end`` + ``agent_end``); a run starts if none is
  active (a second consecutive user message stays in the same turn); ``message_end``; append.
- ``assistant``: a pending tool turn ends (``turn_end``; same run) or a run starts; the
  ``context`` event (the LLM call, recorded); ``message_end`` (the condenser sees the message
  before it is persisted); append. Without tool calls, or with stop reason ``error`` /
  ``aborted``, the turn and the run end.
- ``toolResult``: ``message_end``; append; collected for the turn's ``turn_end``. A
  ``context_tree_query`` result whose ``details.oracleExec`` is ``true`` is a placeholder: the
  real tool runs with the matching tool call's arguments and its output replaces it.
- ``bashExecution`` and other roles, ``thinking_level_change``, ``model_change``,
  ``session_info``, ``label``, foreign ``custom`` / ``custom_message``: re-appended, no event.
  Source ``context-prune-*`` entries are skipped (the replay writes its own).
- ``compaction``: the run ends, the compaction is appended, the message list is rebuilt,
  ``session_compact``.
  ``branch_summary``: the run ends, a summary is appended at the leaf, the list is rebuilt,
  ``session_tree``.

Determinism: the clock is frozen per event (the header's time for ``session_start``, the
source entry's time for the events it causes, the assistant message's own ``timestamp`` for
the ``context`` event before it); with ``deterministic`` ids the k-th appended entry gets id
``k`` as 8 hex digits. Context usage for the budget triggers follows Pi's estimate with a
200000-token window. With ``restart_each_prompt`` a fresh condenser starts (``session_start``)
before every prompt, as a new ``pi --continue`` process would.

:func:`replay` returns a :class:`ReplayResult` holding the new session, every ``context`` call
(pool-encoded as the conformance vectors' ``contexts.jsonl``) and every summarizer call.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import os
import threading
from collections import Counter
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union, cast

from . import spill
from .branch_facts import pi_context_usage
from .condenser import Condenser
from .config import Config
from .frozen import frozen_by_someone
from .js import json as jsjson
from .js import time as jstime
from .replay_log import (
    CONTEXT_WINDOW,
    CallSize,
    ContextLog,
    FrozenClock,
    RecordingSummarizer,
    SummarizerCall,
    batch_notice,
    counter_ids,
    iso_ms,
    number,
)
from .session import ABSENT, SessionFile
from .summarize.base import Summarizer
from .tools.spill_access import rerooted
from .triggers import ContextUsage

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    _P = ParamSpec("_P")

_R = TypeVar("_R")

__all__ = [
    "CONTEXT_WINDOW",
    "QUERY_TOOL_NAME",
    "CallSize",
    "ContextLog",
    "FrozenClock",
    "RecordingSummarizer",
    "ReplayOptions",
    "ReplayResult",
    "SummarizerCall",
    "counter_ids",
    "replay",
    "replay_async",
]

QUERY_TOOL_NAME = "context_tree_query"
_PRUNER_PREFIX = "context-prune-"
_SUMMARY_TYPE = "context-prune-summary"

# ------------------------------------------------------------------------------------ driver


@dataclass
class ReplayOptions:
    """How to drive the replay.

    ``session_dir`` is the new session's directory (spill sidecars go to
    ``<session_dir>/<sessionId>-blobs/``); ``recorded_session_dir``, when given, is the
    directory the session names instead (its spill paths, stubs and index records), the files
    still going under ``session_dir`` (a vector recorded in one directory reproduced in
    another); ``deterministic`` numbers entry ids ``00000001``...
    (else Pi's random ids); ``record_contexts`` keeps the pool-encoded call log and the
    summarizer calls' prompts and outputs (call sizes and the calls' kinds are always
    kept); ``raise_errors`` lets a failing condenser event propagate instead of
    being recorded like Pi's extension runner does. ``blob_mode`` is the permission bits of
    the session file the new session becomes: its spill sidecars and their directory are
    no more open (None: the umask's). ``write_through``: an empty binary file (readable and
    writable) the new session's text is written to as it grows, which then keeps its pruner
    entries there rather than in memory (``SessionFile.in_memory``).
    """

    session_dir: str = ""
    recorded_session_dir: Optional[str] = None
    leaf: Optional[str] = None
    restart_each_prompt: bool = False
    deterministic: bool = True
    record_contexts: bool = True
    exec_query_tool: bool = True
    raise_errors: bool = False
    context_window: int = CONTEXT_WINDOW
    blob_mode: Optional[int] = None
    write_through: Optional[IO[bytes]] = None


@dataclass
class ReplayResult:
    """What a replay produced."""

    session: SessionFile
    contexts: ContextLog
    summarizer: RecordingSummarizer
    notifications: list[tuple[str, str]] = field(default_factory=list)
    """The condenser's notifications (message, level): all of them, or without
    ``ReplayOptions.record_contexts`` only the warnings and errors (the ``info`` ones come
    about once a source entry)."""
    batch_notices: dict[str, int] = field(default_factory=dict)
    """How many notifications told each batch outcome (`replay_log.batch_notice`)."""
    handler_errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    condenser: Optional[Condenser] = None

    def session_text(self) -> str:
        """The new session file's text (header and every entry, as Pi writes them)."""
        return "".join(line + "\n" for line in self._session_lines())

    def session_chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The new session file's bytes (:meth:`session_text`, UTF-8) in pieces of about
        ``size`` bytes, each made as it is asked for: what writes them one after another never
        holds the whole file. The header line is in the first piece."""
        if self.session.writes_through:
            yield from self.session.written_chunks(size)
            return
        lines: list[str] = []
        held = 0
        for line in self._session_lines():
            lines.append(line)
            held += len(line) + 1
            if held >= size:
                yield ("\n".join(lines) + "\n").encode("utf-8")
                lines, held = [], 0
        if lines:
            yield ("\n".join(lines) + "\n").encode("utf-8")

    def _session_lines(self) -> Iterator[str]:
        if self.session.writes_through:
            for piece in self.session.written_chunks():
                yield from piece.decode("utf-8")[:-1].split("\n")
            return
        yield jsjson.dumps(self.session.header)
        for entry in self.session.entries:
            yield jsjson.dumps(entry)

    def entry_counts(self) -> dict[str, int]:
        """Entries by type (``custom`` ones by ``type:customType``)."""
        counts: Counter[str] = Counter()
        for entry in self.session.iter_entries():
            kind = str(entry.get("type"))
            if kind in ("custom", "custom_message"):
                kind = f"{kind}:{entry.get('customType')}"
            counts[kind] += 1
        return dict(counts)

    def meta(self) -> dict[str, Any]:
        """Counts, handler errors and warnings (the vectors' ``meta.json`` subset)."""
        return {
            "counts": {
                **self.counts,
                "summarizerCalls": len(self.summarizer.calls),
                "contextRecords": len(self.contexts.sizes),
                "entries": len(self.session),
                "byType": self.entry_counts(),
            },
            "handlerErrors": [{"event": e, "error": m} for e, m in self.handler_errors],
            "warnings": list(dict.fromkeys(self.warnings)),
        }

    def write(self, out_dir: Union[str, os.PathLike[str]]) -> None:
        """Write ``session.jsonl``, ``contexts.jsonl`` and ``summarizer.jsonl`` (if recorded)
        and ``meta.json`` into ``out_dir``."""
        root = Path(out_dir)
        root.mkdir(parents=True, exist_ok=True)
        with (root / "session.jsonl").open("wb") as file:
            for piece in self.session_chunks():
                file.write(piece)
        files: dict[str, str] = {}
        if self.summarizer.keep_text:
            files["summarizer.jsonl"] = self.summarizer.jsonl()
        if self.contexts.keep_pool:
            files["contexts.jsonl"] = self.contexts.jsonl()
        files["meta.json"] = jsjson.dumps(self.meta(), 2) + "\n"
        for name, text in files.items():
            (root / name).write_bytes(text.encode("utf-8"))


def _has_tool_calls(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "toolCall" for b in content
    )


def _get(mapping: Mapping[str, Any], key: str) -> Any:
    return mapping.get(key, ABSENT)


class _Replayer:
    def __init__(
        self,
        source: SessionFile,
        config: Config,
        summarizer: RecordingSummarizer,
        options: ReplayOptions,
        on_progress: Optional[Callable[[int, int], None]],
        factory: Optional[Callable[..., Condenser]],
        session_model: Optional[RecordingSummarizer] = None,
    ) -> None:
        self.factory = factory
        self.options = options
        self.config = config
        self.summarizer = summarizer
        self.session_model = session_model if session_model is not None else summarizer
        self.on_progress = on_progress
        self.path = source.branch(options.leaf)
        header = source.header
        first_ms = iso_ms(self.path[0].get("timestamp")) if self.path else None
        header_ms = iso_ms(header.get("timestamp"))
        self.clock = FrozenClock(header_ms if header_ms is not None else (first_ms or 0))
        cwd = header.get("cwd")
        self.session = SessionFile.in_memory(
            cwd if cwd is not None else "/",
            session_id=str(header["id"]),
            session_dir=options.recorded_session_dir or options.session_dir,
            clock=self.clock,
            id_source=counter_ids() if options.deterministic else None,
            write_through=options.write_through,
        )
        self.contexts = ContextLog(keep_pool=options.record_contexts)
        self.result = ReplayResult(self.session, self.contexts, summarizer)
        self.counts = Counter(
            dict.fromkeys(("runs", "turns", "llmCalls", "restarts", "queryExecs"), 0)
        )
        self.messages: list[Any] = []
        # New ids of the source entries a later entry names (a label's target, a
        # compaction's first kept entry): only those are looked up.
        self.id_map: dict[str, str] = {}
        self._named = _named_ids(self.path)
        self.run_active = False
        self.turn_index = 0
        self.turn_has_assistant = False
        self.pending_assistant: Optional[dict[str, Any]] = None
        self.pending_results: list[Any] = []
        self.first_run = True
        # The texts and lengths of the previous message list, by id() of its messages,
        # while a list that replaced it is measured (None: no list was replaced).
        self._carried: Optional[dict[int, tuple[Any, Optional[str], int]]] = None
        # The context sent so far, kept as the message list grows (reset when it is
        # replaced): JSON texts and lengths, and the copies handed to the condenser.
        self._sent: Optional[list[Any]] = None
        self._texts: list[str] = []
        self._lengths: list[int] = []
        self._chars = 0
        self._copies: list[Any] = []
        self._copy_at: dict[int, int] = {}
        # Our Condenser never changes the messages it is given (render's contract), so one
        # copy of each message serves every later call; another condenser gets a fresh deep
        # copy per call, as Pi's structuredClone.
        self._reuse_copies = factory is None
        # The texts serve the call log's pool and the copies of another condenser; else each
        # is needed only until its message's copy is made.
        self._keep_texts = options.record_contexts or not self._reuse_copies
        self.condenser = self._new_condenser()

    # -- plumbing

    def _new_condenser(self) -> Condenser:
        factory = self.factory
        if factory is None:
            factory = Condenser
        extra: dict[str, Any] = {}
        if self.options.recorded_session_dir or self.options.blob_mode is not None:
            extra["write_blob"] = self._write_blob
        if self._reuse_copies:
            # The copies are ours and never changed (see `_sync_sent`).
            extra["frozen_messages"] = True
        return factory(
            self.session,
            self.config,
            summarizer=self.summarizer,
            session_model=self.session_model,
            clock=self.clock,
            context_usage=self._context_usage,
            notify=self._notify,
            **extra,
        )

    def _write_blob(self, path: str, text: str) -> None:
        recorded = self.options.recorded_session_dir
        path = rerooted(path, self.options.session_dir, recorded)
        spill.write_blob(path, text, mode=self.options.blob_mode)

    def _context_usage(self) -> Optional[ContextUsage]:
        window = self.options.context_window
        tokens, percent = pi_context_usage(self.session, self.messages, window)
        return ContextUsage(tokens, window, percent)

    def _notify(self, message: str, kind: str) -> None:
        notice = batch_notice(message)
        if notice is not None:
            notices = self.result.batch_notices
            notices[notice] = notices.get(notice, 0) + 1
        if self.options.record_contexts or kind in ("warning", "error"):
            self.result.notifications.append((message, kind))

    def _warn(self, text: str) -> None:
        self.result.warnings.append(text)

    async def _event(self, name: str, call: Callable[[], Any]) -> Any:
        try:
            outcome = call()
            if asyncio.iscoroutine(outcome):
                outcome = await outcome
            return outcome
        except Exception as exc:
            if self.options.raise_errors:
                raise
            self.result.handler_errors.append((name, f"{type(exc).__name__}: {exc}"))
            return None

    def _json_of(self, message: Any) -> tuple[str, int]:
        carried = self._carried
        cached = carried.get(id(message)) if carried is not None else None
        if cached is not None and cached[0] is message:
            text = cached[1]
            return (jsjson.dumps(message) if text is None else text), cached[2]
        text = jsjson.dumps(message)
        return text, jsjson.utf16_len(text)

    def _length_of(self, message: Any) -> int:
        """The UTF-16 length of ``message``'s JSON (measured without the text)."""
        carried = self._carried
        cached = carried.get(id(message)) if carried is not None else None
        if cached is not None and cached[0] is message:
            return cached[2]
        return jsjson.length(message)

    def _map_last(self, entry: Mapping[str, Any]) -> None:
        source_id = entry.get("id")
        leaf = self.session.leaf_id
        if isinstance(source_id, str) and leaf is not None and source_id in self._named:
            self.id_map[source_id] = leaf

    def _at(self, entry: Mapping[str, Any]) -> None:
        self.clock.set(iso_ms(entry.get("timestamp")))

    # -- agent loop

    async def _start_run(self) -> None:
        if self.options.restart_each_prompt and not self.first_run:
            self.condenser = self._new_condenser()
            await self._event("session_start", self.condenser.session_start)
            self.messages = list(self.session.build_context().messages)
            self.counts["restarts"] += 1
        self.first_run = False
        self.run_active = True
        self.turn_index = 0
        self.turn_has_assistant = False
        self.counts["runs"] += 1

    async def _turn_end(self) -> None:
        message, results, index = self.pending_assistant, self.pending_results, self.turn_index
        await self._event("turn_end", lambda: self.condenser.turn_end(message, results, index))
        self.turn_index += 1
        self.counts["turns"] += 1
        self.pending_assistant = None
        self.pending_results = []
        self.turn_has_assistant = False

    async def _agent_end(self) -> None:
        await self._event("agent_end", self.condenser.agent_end)
        self.run_active = False

    async def _close_run(self) -> None:
        if self.pending_assistant is not None:
            await self._turn_end()
        if self.run_active:
            await self._agent_end()

    async def _deliver(self, message: dict[str, Any], entry: Mapping[str, Any]) -> None:
        self.messages.append(message)
        await self._event("message_end", lambda: self.condenser.message_end(message))
        self._at(entry)
        if message.get("role") == "custom":
            self.session.append_custom_message(
                cast(str, message.get("customType")),
                _get(message, "content"),
                _get(message, "display"),
                _get(message, "details"),
            )
        else:
            # A message of the source (parsed, never changed) is held once by both sessions.
            self.session.append_message(message, shared=message is entry.get("message"))
        self._map_last(entry)

    def _sync_sent(self) -> None:
        """Bring the texts (and copies) of the context up to the message list."""
        if self._sent is not self.messages:
            if self._sent is not None:
                # A replaced list (a compaction, a tree move, a restart) holds mostly the
                # messages of the previous one: their texts and lengths carry over. Only
                # while the new list is measured: a list that grows needs no lookup.
                texts: Iterable[Optional[str]] = (
                    self._texts if self._keep_texts else itertools.repeat(None)
                )
                # (the old list may hold messages appended after it was last measured)
                measured = zip(self._sent, texts, self._lengths, strict=False)
                self._carried = {id(m): (m, t, n) for m, t, n in measured}
            self._sent = self.messages
            self._texts, self._lengths, self._chars = [], [], 0
            self._copies, self._copy_at = [], {}
        try:
            self._measure_sent()
        finally:
            self._carried = None

    def _measure_sent(self) -> None:
        done = len(self._lengths)
        if done == len(self.messages):
            return
        if self._keep_texts:
            texts: list[str] = []
            for message in self.messages[done:]:
                text, length = self._json_of(message)
                texts.append(text)
                self._lengths.append(length)
                self._chars += length
            self._texts.extend(texts)
        else:  # only the sizes are kept: no text is made
            for message in self.messages[done:]:
                length = self._length_of(message)
                self._lengths.append(length)
                self._chars += length
        if self._reuse_copies:
            fresh = self.messages[done:]
            if self._keep_texts:  # the pool's outputs are found by position
                for offset, copy in enumerate(fresh):
                    self._copy_at[id(copy)] = done + offset
            self._copies.extend(fresh)

    async def _context_event(self, assistant: Mapping[str, Any]) -> None:
        # The render's new messages die with this call's result, which is dropped when
        # `_context_call` returns: with the cyclic collector paused until then they are
        # freed by reference counting instead of surviving a collection into the old
        # generation, whose growth starts full collections of the whole (large) heap.
        running = gc.isenabled()  # collector_paused(), without a generator per call
        gc.disable()
        try:
            await self._context_call(assistant)
        finally:
            if running:
                gc.enable()

    async def _context_call(self, assistant: Mapping[str, Any]) -> None:
        self.counts["llmCalls"] += 1
        self._sync_sent()
        texts, lengths = self._texts, self._lengths
        # Our Condenser changes neither the list nor its messages: the same list serves
        # every call (it grows as the context does); another condenser gets new copies.
        copies = self._copies if self._reuse_copies else jsjson.loads("[" + ",".join(texts) + "]")
        result = await self._event("context", lambda: self.condenser.context(copies))
        changed = bool(result is not None and result.pruned and not getattr(result, "threw", False))
        input_chars = self._chars + max(len(lengths) - 1, 0) + 2
        outputs: Sequence[str] = texts
        out_lengths: Optional[Sequence[int]] = lengths
        output_chars: Optional[int] = None
        if not self.contexts.keep_pool and not changed:
            # Only the size is kept: the input's, the lengths are not summed again.
            out_lengths, output_chars = None, input_chars
        elif changed and not self.contexts.keep_pool and self._reuse_copies:
            # Only the size is kept: render measured the array it returned.
            out_lengths, output_chars = None, result.after_chars
        elif changed:
            position = (
                self._copy_at if self._reuse_copies else {id(m): i for i, m in enumerate(copies)}
            )
            new_texts: list[str] = []
            new_lengths: list[int] = []
            for message in result.messages:
                i = position.get(id(message))
                if i is None:
                    text = jsjson.dumps(message)
                    new_texts.append(text)
                    new_lengths.append(jsjson.utf16_len(text))
                else:
                    new_texts.append(texts[i])
                    new_lengths.append(lengths[i])
            outputs, out_lengths = new_texts, new_lengths
        self.contexts.record(
            entries=len(self.session),
            next_timestamp=assistant.get("timestamp"),
            changed=changed,
            inputs=texts,
            outputs=outputs,
            input_chars=input_chars,
            output_lengths=out_lengths,
            output_chars=output_chars,
        )

    # -- per entry

    async def _user(self, entry: Mapping[str, Any], message: dict[str, Any]) -> None:
        if self.pending_assistant is not None:
            await self._turn_end()
            await self._agent_end()
        elif self.run_active and self.turn_has_assistant:
            await self._agent_end()
        self._at(entry)
        if not self.run_active:
            await self._start_run()
        await self._deliver(message, entry)

    async def _assistant(self, entry: Mapping[str, Any], message: dict[str, Any]) -> None:
        if self.pending_assistant is not None:
            await self._turn_end()
        elif not self.run_active:
            self._at(entry)
            await self._start_run()
        own = number(message.get("timestamp"))
        self.clock.set(own if own is not None else iso_ms(entry.get("timestamp")))
        await self._context_event(message)
        self._at(entry)
        self.turn_has_assistant = True
        await self._deliver(message, entry)
        self.pending_assistant = message
        self.pending_results = []
        if message.get("stopReason") in ("error", "aborted") or not _has_tool_calls(message):
            await self._turn_end()
            await self._agent_end()

    def _run_query(self, message: Mapping[str, Any]) -> Optional[dict[str, Any]]:
        call_id = message.get("toolCallId")
        content = (self.pending_assistant or {}).get("content")
        call = next(
            (
                b
                for b in (content if isinstance(content, list) else ())
                if isinstance(b, dict) and b.get("type") == "toolCall" and b.get("id") == call_id
            ),
            None,
        )
        if call is None:
            self._warn(f"exec-query-tool: no toolCall/tool for {call_id}")
            return None
        from .tools.query import ContextTreeQuery  # deferred: `condense` starts without the tools

        tool = ContextTreeQuery(
            self.condenser.state,
            self.options.session_dir,
            self.session.session_id,
            recorded_session_dir=self.options.recorded_session_dir,
            branch=self.session.branch,
        )
        answer = tool.execute(call.get("arguments") or {})
        self.counts["queryExecs"] += 1
        return {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": message.get("toolName"),
            "content": answer.content,
            "details": answer.details,
            "isError": False,
            "timestamp": message.get("timestamp"),
        }

    async def _tool_result(self, entry: Mapping[str, Any], message: dict[str, Any]) -> None:
        self._at(entry)
        details = message.get("details")
        if (
            self.options.exec_query_tool
            and message.get("toolName") == QUERY_TOOL_NAME
            and isinstance(details, dict)
            and details.get("oracleExec") is True
        ):
            message = self._run_query(message) or message
        if self.pending_assistant is None:
            self._warn(f"toolResult {message.get('toolCallId')} without a pending tool turn")
        await self._deliver(message, entry)
        if self.pending_assistant is not None:
            self.pending_results.append(message)

    async def _message(self, entry: Mapping[str, Any]) -> None:
        message = entry.get("message")
        if not isinstance(message, dict):
            self._warn(f"message entry {entry.get('id')} without a message object skipped")
            return
        role = message.get("role")
        if role == "user":
            await self._user(entry, message)
        elif role == "assistant":
            await self._assistant(entry, message)
        elif role == "toolResult":
            await self._tool_result(entry, message)
        elif role == "custom":
            self._at(entry)
            self.messages.append(_custom_message(message, message.get("timestamp")))
            self.session.append_custom_message(
                cast(str, message.get("customType")),
                _get(message, "content"),
                _get(message, "display"),
                _get(message, "details"),
            )
            self._map_last(entry)
        else:
            self._at(entry)
            self.messages.append(message)
            self.session.append_message(message, shared=True)
            self._map_last(entry)

    async def _entry(self, entry: Mapping[str, Any]) -> None:
        kind = entry.get("type")
        if kind == "message":
            await self._message(entry)
            return
        if kind == "compaction":
            await self._compaction(entry)
            return
        if kind == "branch_summary":
            await self._close_run()
            self._at(entry)
            self.session.branch_with_summary(
                self.session.leaf_id,
                entry.get("summary", ""),
                _get(entry, "details"),
                _get(entry, "fromHook"),
            )
            self._map_last(entry)
            self.messages = list(self.session.build_context().messages)
            await self._event("session_tree", self.condenser.session_tree)
            return
        if not self._append_plain(entry):
            return
        self._map_last(entry)

    async def _compaction(self, entry: Mapping[str, Any]) -> None:
        await self._close_run()
        self._at(entry)
        kept_source = entry.get("firstKeptEntryId")
        kept = self.id_map.get(kept_source) if isinstance(kept_source, str) else None
        if kept is None:
            self._warn(f"compaction {entry.get('id')}: firstKeptEntryId {kept_source} not mapped")
        self.session.append_compaction(
            _get(entry, "summary"),
            kept if kept is not None else _get(entry, "firstKeptEntryId"),
            _get(entry, "tokensBefore"),
            _get(entry, "details"),
            _get(entry, "fromHook"),
        )
        self._map_last(entry)
        self.messages = list(self.session.build_context().messages)
        await self._event("session_compact", self.condenser.session_compact)

    def _append_plain(self, entry: Mapping[str, Any]) -> bool:
        """Re-append an entry that causes no event; False when it is skipped."""
        kind = entry.get("type")
        custom_type = entry.get("customType")
        if kind == "label":
            target = self.id_map.get(str(entry.get("targetId")))
            if target is None:
                self._warn(
                    f"label {entry.get('id')}: target {entry.get('targetId')} "
                    "not on replayed branch, skipped"
                )
                return False
            self._at(entry)
            label = entry.get("label")
            self.session.append_label(target, label if isinstance(label, str) else None)
            return True
        if (
            kind == "custom"
            and isinstance(custom_type, str)
            and custom_type.startswith(_PRUNER_PREFIX)
        ):
            self._warn(
                f"source already contains {custom_type}; skipped "
                "(replay regenerates pruner entries)"
            )
            return False
        if kind == "custom_message" and custom_type == _SUMMARY_TYPE:
            self._warn("source already contains context-prune-summary; skipped")
            return False
        appenders: dict[str, Callable[[], Any]] = {
            "thinking_level_change": lambda: self.session.append_thinking_level_change(
                entry.get("thinkingLevel")  # type: ignore[arg-type]
            ),
            "model_change": lambda: self.session.append_model_change(
                entry.get("provider"),  # type: ignore[arg-type]
                entry.get("modelId"),  # type: ignore[arg-type]
            ),
            "session_info": lambda: self.session.append_session_info(_or_empty(entry.get("name"))),
            "custom": lambda: self.session.append_custom(custom_type, _get(entry, "data")),  # type: ignore[arg-type]
            "custom_message": lambda: self._append_custom_message(entry),
        }
        append = appenders.get(str(kind))
        if append is None:
            self._warn(f"unsupported entry type {kind} skipped")
            return False
        self._at(entry)
        append()
        return True

    def _append_custom_message(self, entry: Mapping[str, Any]) -> None:
        self.session.append_custom_message(
            entry.get("customType"),  # type: ignore[arg-type]
            _get(entry, "content"),
            _get(entry, "display"),
            _get(entry, "details"),
        )
        self.messages.append(_custom_message(entry, jstime.date_value(entry.get("timestamp"))))

    async def run(self) -> ReplayResult:
        await self._event("session_start", self.condenser.session_start)
        self.messages = list(self.session.build_context().messages)
        total = len(self.path)
        # Taken from the end: a source entry is not held after its point (its message is,
        # by the new session; the source's own entries go once its caller lets it go).
        pending = self.path[::-1]
        self.path = []
        for done in range(1, total + 1):
            await self._entry(pending.pop())
            if self.on_progress is not None:
                self.on_progress(done, total)
        await self._close_run()
        self.result.counts = dict(self.counts)
        self.result.condenser = self.condenser
        self._release()
        return self.result

    def _release(self) -> None:
        """Drop what only the replay needed: the source branch, the texts and copies of the
        context, and the condenser (the result holds it; it may still be called, and its
        callbacks hold this replayer, which holding it back would make a cycle: the result
        letting it go then frees it by reference counting, not by a collection)."""
        del self.condenser
        self.path = []
        self._sent = None
        self._texts, self._lengths, self._chars = [], [], 0
        self._copies, self._copy_at = [], {}


def _named_ids(path: Sequence[Mapping[str, Any]]) -> set[str]:
    """The source ids the replay of ``path`` looks up in its id map (see `_Replayer._entry`):
    labels' targets and compactions' first kept entries."""
    named: set[str] = set()
    for entry in path:
        kind = entry.get("type")
        if kind == "label":
            named.add(str(entry.get("targetId")))
        elif kind == "compaction":
            kept = entry.get("firstKeptEntryId")
            if isinstance(kept, str):
                named.add(kept)
    return named


def _or_empty(value: Any) -> Any:
    return "" if value is None else value


def _custom_message(source: Mapping[str, Any], timestamp: Any) -> dict[str, Any]:
    """The ``custom`` AgentMessage Pi builds for a custom message (absent keys omitted)."""
    message: dict[str, Any] = {"role": "custom", "customType": source.get("customType")}
    content = source.get("content")
    message["content"] = [] if content is None else content
    for key in ("display", "details"):
        if key in source:
            message[key] = source[key]
    message["timestamp"] = timestamp
    return message


async def replay_async(
    source: SessionFile,
    config: Config,
    summarizer: Summarizer,
    options: Optional[ReplayOptions] = None,
    *,
    on_progress: Optional[Callable[[int, int], None]] = None,
    condenser_factory: Optional[Callable[..., Condenser]] = None,
    session_model: Optional[Summarizer] = None,
) -> ReplayResult:
    """Replay ``source`` (its current branch, or ``options.leaf``'s) through a new condenser.

    ``summarizer`` answers every summarization call (it is also the session model, as with
    ``summarizerModel: "default"``, unless ``session_model`` is given: then it is the
    configured model and ``session_model`` its outage fallback); both are wrapped to record
    their calls in one log. ``on_progress(done, total)`` is called after each source entry.
    ``condenser_factory`` builds each condenser (default
    :class:`~pi_condense.condenser.Condenser`; called with the session, the config and the
    keyword arguments ``summarizer``, ``session_model``, ``clock``, ``context_usage`` and
    ``notify``, plus ``write_blob`` when ``options.recorded_session_dir`` is set).
    """
    options = options or ReplayOptions()
    # Without the contexts' log no call log is written: the prompts are not kept either.
    keep_text = options.record_contexts
    recorder = summarizer if isinstance(summarizer, RecordingSummarizer) else None
    if recorder is None:
        recorder = RecordingSummarizer(summarizer, keep_text=keep_text)
    fallback: Optional[RecordingSummarizer] = None
    if session_model is not None:
        fallback = RecordingSummarizer(session_model, keep_text=keep_text)
        fallback.calls = recorder.calls  # one log, in call order
    runner = _Replayer(
        source,
        config,
        recorder,
        options,
        on_progress,
        condenser_factory,
        fallback,
    )
    del source  # the runner holds its branch (and drops each entry after its point)
    with _collector_managed():
        return await runner.run()


FULL_COLLECTION_EVERY = 100
"""During a replay, the collector's third threshold (Python's default 10): a full collection
comes at most once every this many collections of the middle generation."""

_collector_lock = threading.Lock()
_collector_users: list[tuple[tuple[int, int, int], bool]] = []


@contextlib.contextmanager
def _collector_managed() -> Iterator[None]:
    """The cyclic collector kept off the objects a replay holds for long, the caller's
    settings given back at the end (by the last of replays running at once in threads).

    What the process holds when the replay starts (the source session, the caller's own
    objects) is frozen (``gc.freeze``) and given back (``gc.unfreeze``) at the end: it lives
    until then or is freed by reference counting (the replay frees each source entry after its
    point), and no collection walks it in between. A process that froze objects itself (the
    command line, which also freezes what it loaded; a corpus worker) is left as it is: what
    this would freeze could not be given back alone. And full collections are made rare: a
    replay makes next to no cyclic garbage (a full collection of a condense at x30 frees none),
    but each walks everything it built (the new session, the pruner's state), which costs more
    the longer the session (the collections themselves grow by a quarter each time).
    """
    with _collector_lock:
        if not _collector_users:
            thresholds = gc.get_threshold()
            freeze = not frozen_by_someone()
            if freeze:
                gc.freeze()
            first, middle, full = thresholds
            if first:  # a first threshold of 0 turns the collector off: left as it is
                gc.set_threshold(first, middle, max(full, FULL_COLLECTION_EVERY))
        else:
            thresholds, freeze = _collector_users[0]
        _collector_users.append((thresholds, freeze))
    try:
        yield
    finally:
        with _collector_lock:
            _collector_users.pop()
            if not _collector_users:
                gc.set_threshold(*thresholds)
                if freeze:
                    gc.unfreeze()


def _synchronous(
    coroutine_function: Callable[_P, Coroutine[Any, Any, _R]], name: str
) -> Callable[_P, _R]:
    """``coroutine_function`` run to completion in its own event loop, as function ``name``
    (same parameters; ``inspect.signature`` follows ``__wrapped__`` to them)."""

    @functools.wraps(coroutine_function)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return asyncio.run(coroutine_function(*args, **kwargs))

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"Synchronous :func:`{coroutine_function.__name__}` (runs its own event loop)."
    return run


replay = _synchronous(replay_async, "replay")
