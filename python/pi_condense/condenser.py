"""The live facade: feed it an agent's events, get the condensed context back.

A :class:`Condenser` plays the part of the pi-condense extension inside any agent loop. The
host keeps the conversation in a :class:`~pi_condense.session.SessionFile` (appending its own
messages) and calls, in Pi's order:

- :meth:`Condenser.session_start` when the session is opened (or reopened);
- :meth:`Condenser.context` before every model call, with the message list it is about to
  send; the returned :class:`~pi_condense.render.RenderResult` holds the list to send instead;
- :meth:`Condenser.message_end` for every message, before appending it to the session;
- :meth:`Condenser.turn_end` after each assistant turn with the turn's tool results;
- :meth:`Condenser.agent_end` when the agent's run ends; :meth:`Condenser.session_tree`
  after moving the session's leaf; :meth:`Condenser.session_compact`,
  :meth:`Condenser.model_select`, :meth:`Condenser.thinking_level_select` when the prompt
  cache goes cold (pi-condense 2.10.3 supersedes protected re-reads then).

Summaries are written to the session by flushes that these events trigger (spec 08 section
1). See COMPAT.md for where the default behaviour differs from the TypeScript reference and
``compat: "reference"`` for the exact reference behaviour.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
import weakref
from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from .capture import capture_batch, is_final_assistant, trim_batch
from .chains import (
    ChainCompressionError,
    ChainDeps,
    ChainRunResult,
    ScanMemo,
    compact_all,
    compress_chains_in_flush,
)
from .config import Config, load_config
from .errors import CondenseWarning, warn_once
from .flush import FlushOptions, FlushResult, ProgressCallback, flush_pending
from .image_cap import cap_images, image_limit
from .js import json as jsjson
from .js import time as jstime
from .live_state import Runtime, Ui
from .render import RenderResult, render, sized_without_images
from .session import SessionFile
from .spill import (
    SpillSettings,
    give_spilled_refs,
    safe_session_id,
    session_blob_writer,
    spill_batch,
)
from .state import PrunerState, Stats
from .status import DiagnosticSink, StatsAccumulator
from .summarize.base import Completion, CompletionRequest, Summarizer
from .summarize.resolve import resolve_summarizers
from .summarize.runner import SummarizerRunner
from .supersede import lower_floor_by_chains
from .triggers import ContextUsage, evaluate_gate, queued_notice

__all__ = ["Condenser"]

log = logging.getLogger(__name__)

Notify = Callable[[str, str], None]
"""``notify(message, level)`` with level ``info``, ``warning`` or ``error``."""


class _Summarizing:
    """The runtime's ``summarize``: the condenser's summarizer calls, through a runner made
    from the runtime's config at the first call (again after ``reset``).

    It refers to the runtime weakly and to the condenser not at all: the runtime holds it,
    and a reference back would make a cycle, which only the cyclic collector frees (a full
    collection at the end of a long ``condense`` walks the whole new session to find it).
    """

    __slots__ = ("_clock", "_notes", "_runner", "_runtime", "_session_model", "_summarizer", "_ui")

    def __init__(
        self,
        summarizer: Optional[Summarizer],
        session_model: Optional[Summarizer],
        clock: Callable[[], int],
        ui: Ui,
    ) -> None:
        self._summarizer = summarizer
        self._session_model = session_model
        self._clock = clock
        self._ui = ui
        self._runner: Any = None
        self._notes: list[tuple[str, str]] = []
        self._runtime: Optional[weakref.ReferenceType[Runtime]] = None

    def attach(self, rt: Runtime) -> None:
        """Read the config from ``rt`` (which holds this object as its ``summarize``)."""
        self._runtime = weakref.ref(rt)

    def reset(self) -> None:
        """Resolve the summarizer again at the next call (the config changed)."""
        self._runner = None

    def _config(self) -> Config:
        rt = self._runtime() if self._runtime is not None else None
        if rt is None:  # only a caller that kept `runtime.summarize` past the runtime
            raise RuntimeError("pi-condense: the condenser's runtime is gone")
        return rt.config

    def _make_runner(self, config: Config) -> Any:
        notes: list[tuple[str, str]] = []
        ui = self._ui  # not `self`: what resolves the model may keep `note`

        def note(level: str, text: str) -> None:
            notes.append((level, text))
            ui.notify(text, level)

        primary, session_model = resolve_summarizers(
            config, session_model=self._session_model, explicit=self._summarizer, notify=note
        )
        self._notes = notes
        if primary is None:
            return _NoSummarizer(self._ui.notify)
        return SummarizerRunner(
            primary,
            session_model,
            config,
            clock=self._clock,
            notify=_level_first(self._ui),
        )

    async def __call__(self, request: CompletionRequest) -> Optional[Completion]:
        config = self._config()
        if self._runner is None:
            self._runner = self._make_runner(config)
        elif config.is_reference:
            # The reference resolves the model (and warns) on every call; ours once.
            for level, text in self._notes:
                self._ui.notify(text, level)
        result: Optional[Completion] = await self._runner.run(request)
        return result


def _level_first(ui: Ui) -> Callable[[str, str], None]:
    """``ui.notify`` (looked up at each call) taking ``(level, text)``, as the runner calls it."""

    def notify(level: str, text: str) -> None:
        ui.notify(text, level)

    return notify


class _NoSummarizer:
    """Stands in when no model was given: every call fails with a clear message."""

    def __init__(self, notify: Notify) -> None:
        self._notify = notify

    async def run(self, request: CompletionRequest) -> Optional[Completion]:
        self._notify("pruner: summarization failed: no summarizer model configured", "error")
        return None

    def reset(self) -> None:
        """Nothing to reset."""


class Condenser:
    """pi-condense for one session (see the module docstring for the event order).

    ``config`` fixes the configuration; without it :meth:`session_start` loads the
    ``contextPrune`` block of Pi's settings file, as the extension does. ``summarizer`` is the
    summarizer model and ``session_model`` the session's own model (its outage fallback); when
    ``summarizer`` is None, the config's ``summarizerModel`` is resolved instead (``"default"``:
    the session model; ``"provider/model-id"``: that model, with the session model as its
    fallback; see :func:`~pi_condense.summarize.resolve.resolve_summarizers`), again after each
    config change. ``clock`` gives epoch ms for the pipeline (the session's entry timestamps
    come from the session's own clock). ``context_usage`` reports the context size for the
    budget triggers; ``notify(message, level)``, ``status(text)`` and ``emit(channel,
    payload)`` receive the user-visible output. ``write_blob(path, text)`` writes a spill
    sidecar (default :func:`pi_condense.spill.write_blob`; a replay into a directory other
    than the one the session names re-roots the path there). ``frozen_messages`` promises
    that a message object handed to :meth:`context` is never changed in place afterwards,
    nor one that :meth:`context` returned (the replay hands the same copies on every call):
    each render then reuses what the previous ones learnt of those objects without walking
    them again, and hands out its own unchanged new messages again (``render``'s
    ``frozen``). ``spill_paths=False`` is for a host whose model cannot read local files:
    spill stubs then name only their ref (see :func:`~pi_condense.render.render`).
    ``model_api`` is the wire API of the model the context goes to (Pi's ``model.api``, e.g.
    ``"anthropic-messages"``): it decides the default image cap (``maxImagesPerRequest``, see
    :mod:`pi_condense.image_cap`); it may be set later.
    """

    def __init__(
        self,
        session: SessionFile,
        config: Optional[Config] = None,
        *,
        summarizer: Optional[Summarizer] = None,
        session_model: Optional[Summarizer] = None,
        clock: Optional[Callable[[], int]] = None,
        context_usage: Optional[Callable[[], Optional[ContextUsage]]] = None,
        notify: Optional[Notify] = None,
        status: Optional[Callable[[Optional[str]], None]] = None,
        emit: Optional[Callable[[str, Any], None]] = None,
        write_blob: Optional[Callable[[str, str], None]] = None,
        frozen_messages: bool = False,
        spill_paths: bool = True,
        model_api: Optional[str] = None,
    ) -> None:
        self.model_api = model_api
        self._session = session
        self.spill_paths = spill_paths
        """Whether spill stubs tell the model to read the sidecar file (``render``'s
        ``spill_paths``: False for a host whose model has no file-reading tool)."""
        self._frozen_messages = frozen_messages
        self._write_blob = write_blob
        self._fixed_config = config
        if config is not None:
            _warn_config(config)
        self._clock: Callable[[], int] = clock if clock is not None else jstime.now_ms
        self._context_usage = context_usage
        ui = Ui()
        if notify is not None:
            ui.notify = notify
        if status is not None:
            ui.status = status
        if emit is not None:
            ui.emit = emit
        self._ui = ui
        self._summarizing = _Summarizing(summarizer, session_model, self._clock, ui)
        self._rt: Optional[Runtime] = None
        # (entry count, leaf) the lazily built state was read at, until the first event.
        self._built_at: Optional[tuple[int, Optional[str]]] = None
        self._warned_disabled = False
        self._refs_given: Optional[PrunerState] = None  # the state give_spilled_refs ran on

    @classmethod
    def open(
        cls,
        path: Union[str, os.PathLike[str]],
        config: Optional[Config] = None,
        leaf: Optional[str] = None,
        **kw: Any,
    ) -> Condenser:
        """Load the session file at ``path`` (its leaf moved to ``leaf`` if given) and wrap it.

        ``kw`` are the constructor's keywords, plus ``id_source`` for the session; the
        session's clock is ``clock`` when given.
        """
        id_source = kw.pop("id_source", None)
        session = SessionFile.load(path, clock=kw.get("clock"), id_source=id_source)
        if leaf is not None:
            session.set_leaf(leaf)
        return cls(session, config, **kw)

    # ------------------------------------------------------------------ state

    def _runtime(self) -> Runtime:
        if self._rt is None:
            config = self._fixed_config if self._fixed_config is not None else Config()
            state = PrunerState.from_session(self._session)
            summarize = self._summarizing
            rt = Runtime(self._session, config, state, summarize, self._clock, self._ui)
            summarize.attach(rt)
            rt.stats.reset(state.stats)
            rt.chains = _chains_in_flush
            rt.write_blob = self._write_blob
            if rt.write_blob is None and self._session.path is not None:
                rt.write_blob = session_blob_writer(str(self._session.path))
            if self._frozen_messages:
                rt.scan_memo = ScanMemo()
            self._rt = rt
            self._built_at = (len(self._session), self._session.leaf_id)
        return self._rt

    @property
    def session(self) -> SessionFile:
        """The session this condenser writes to."""
        return self._session

    @property
    def state(self) -> PrunerState:
        """The pruner state (index, frontier, stats) of the session's branch."""
        return self._runtime().state

    @property
    def config(self) -> Config:
        """The configuration in effect."""
        return self._runtime().config

    @config.setter
    def config(self, config: Config) -> None:
        _warn_config(config)
        self._fixed_config = config
        self._runtime().config = config
        self._summarizing.reset()

    @property
    def stats(self) -> Stats:
        """Cumulative summarizer stats (the next ``context-prune-stats`` data)."""
        return self._runtime().stats.snapshot()

    @property
    def stats_accumulator(self) -> StatsAccumulator:
        """The stats accumulator (totals, cost baseline, live reclaim)."""
        return self._runtime().stats

    @property
    def diagnostics(self) -> DiagnosticSink:
        """The diagnostic sink of this session."""
        return self._runtime().sink

    @property
    def pending_count(self) -> int:
        """Batches queued by live capture since the last flush."""
        return len(self._runtime().pending)

    @property
    def rearmed(self) -> bool:
        """True when a reload found recoverable work the next ``turn_end`` may flush."""
        return self._runtime().rearmed

    @property
    def runtime(self) -> Runtime:
        """The live state shared with the flush pipeline (for tools and commands)."""
        return self._runtime()

    # ------------------------------------------------------------------ events

    def _disabled(self, rt: Runtime) -> bool:
        """True when pruning is off; says so once (an event arriving is a sign the caller
        expected pruning)."""
        if rt.config.enabled:
            return False
        if not self._warned_disabled:
            self._warned_disabled = True
            text = (
                "pi-condense: pruning is disabled (contextPrune.enabled is false), so this "
                "Condenser changes nothing; pass a config with enabled: true"
            )
            warnings.warn(text, CondenseWarning, stacklevel=3)
            self._ui.notify(text, "warning")
        return True

    def _reconstruct(self) -> Runtime:
        rt = self._runtime()
        if self._built_at != (len(self._session), self._session.leaf_id):
            rt.state = PrunerState.from_session(self._session)
        self._built_at = None
        rt.stats.reset(rt.state.stats)
        rt.sink.reset()
        rt.pending.clear()
        rt.previous_fraction = None
        rt.rearmed = False
        rt.live_summaries.clear()
        rt.supersede.reset()
        if rt.config.enabled:
            try:
                rt.rearmed = len(rt.capture_pending(rethrow=True)) > 0
            except Exception:
                log.exception("pi-condense: reload rearm probe failed")
        rt.compute_metrics()
        rt.refresh_status()
        return rt

    def session_start(self) -> None:
        """The session was opened: load the config (unless fixed), rebuild all state from the
        branch, reset the summarizer fallback and diagnostics, probe for recoverable work."""
        rt = self._runtime()
        if self._fixed_config is None:
            rt.config = load_config()
            _warn_config(rt.config)
        self._summarizing.reset()
        self._reconstruct()

    def session_tree(self) -> None:
        """The session's leaf moved: rebuild the state from the new branch."""
        self._reconstruct()

    def session_compact(self) -> None:
        """The session was compacted (the prompt cache is cold)."""
        self._runtime().supersede.cold()

    def model_select(self) -> None:
        """The model changed (the prompt cache is cold)."""
        self._runtime().supersede.cold()

    def thinking_level_select(self) -> None:
        """The thinking level changed (the prompt cache is cold)."""
        self._runtime().supersede.cold()

    async def turn_end(
        self, message: Any, tool_results: Sequence[Any], turn_index: int
    ) -> Optional[FlushResult]:
        """An assistant turn ended (its message and tool results are in the session).

        Queues the turn's raw calls (after protection and eager spill) and runs the budget /
        delta gate; returns the flush result if the gate flushed.
        """
        rt = self._runtime()
        config = rt.config
        if self._disabled(rt):
            return None
        has_results = len(tool_results) > 0
        if not has_results and not rt.rearmed:
            return None
        pushed = False
        if has_results:
            # The session-wide index of the turn (pi-condense 2.10.5, #16): the reference
            # takes the branch's last assistant; ours finds this message on the branch.
            facts = rt.facts()
            index = len(facts.assistants) - 1 if config.is_reference else facts.turn_index(message)
            batch = capture_batch(message, list(tool_results), index, self._clock())
            protected = rt.protection()
            batch.tool_calls = [
                c for c in batch.tool_calls if not protected(c["toolName"], c["args"])
            ]
            self._spill(rt, batch)
            trimmed = trim_batch(batch, rt.state)
            if trimmed is not None:
                pushed = True
                rt.pending.append(trimmed)
                n = len(rt.pending)
                if config.show_prune_status_line:
                    rt.refresh_status(f"prune: {n} pending")
                    rt.ui.notify(queued_notice(n, config.prune_on), "info")
            rt.compute_metrics()
        if not pushed and not rt.rearmed:
            return None
        usage = self._context_usage() if self._context_usage is not None else None
        gap_threshold = config.frontier_gap_threshold_tokens
        gap: Optional[int] = None
        if gap_threshold is not None:  # the metrics are walked only for this opt-in trigger
            snapshot = rt.compute_metrics()
            gap = snapshot["frontierGapTokens"] if snapshot is not None else None
        decision = evaluate_gate(
            usage,
            pending=len(rt.pending),
            rearmed=rt.rearmed,
            flushing=rt.flushing,
            previous_fraction=rt.previous_fraction,
            threshold=config.budget_threshold,
            delta=config.budget_turn_delta,
            gap_tokens=gap,
            gap_threshold=gap_threshold,
        )
        rt.previous_fraction = decision.previous_fraction
        if not decision.flush or decision.trigger is None or decision.notice is None:
            return None
        rt.ui.notify(decision.notice, "info")
        return await flush_pending(rt, FlushOptions(trigger=decision.trigger, delivery="session"))

    def _spill(self, rt: Runtime, batch: Any) -> None:
        config = rt.config
        session_dir = self._session.session_dir
        session_id = self._session.session_id
        if not config.is_reference and not (session_dir and safe_session_id(session_id)):
            return
        settings = SpillSettings(
            threshold=config.spill_threshold,
            preview_bytes=config.spill_preview_bytes,
            dedup=config.dedup_by_content_hash,
            session_dir=session_dir,
            session_id=session_id,
            write=rt.write_blob,
            refs=not config.is_reference,
        )
        try:
            if settings.refs and rt.state is not self._refs_given:
                # once per state read from the session: spilled records written without a ref
                give_spilled_refs(rt.state, rt.append)
                self._refs_given = rt.state
            spill_batch(
                batch,
                rt.state,
                settings,
                rt.append,
                on_error=lambda path, exc: log.error(
                    "spill: failed to write sidecar at %s: %s", path, exc
                ),
            )
        except Exception:
            log.exception("pi-condense: eager spill failed")
            if not config.is_reference:
                rt.resync()

    async def message_end(self, message: Any) -> Optional[FlushResult]:
        """A message is complete (called before the host appends it to the session).

        With ``pruneOn: "agent-message"``, a final (tool-free) assistant reply flushes.
        """
        rt = self._runtime()
        config = rt.config
        if self._disabled(rt) or config.prune_on != "agent-message":
            return None
        if not is_final_assistant(message):
            return None
        options = FlushOptions(trigger="message-end", delivery="session", closing_message=message)
        return await flush_pending(rt, options)

    def agent_end(self) -> None:
        """The agent's run ended: show what is still pending (no flush)."""
        rt = self._runtime()
        if not rt.config.enabled:
            return
        if not rt.pending and not rt.rearmed:
            return
        n = len(rt.pending)
        rt.refresh_status(f"prune: {n} pending" if n > 0 else "prune: recovered pending (reload)")

    def context(self, messages: list[Any]) -> RenderResult:
        """Condense ``messages`` (the list about to be sent to the model).

        Returns the input list itself (``pruned`` false) when nothing changes; with pruning
        disabled only the image cap (``maxImagesPerRequest``) may change it. Diagnostics the
        render reports are written to the session once each.
        """
        rt = self._runtime()
        limit = image_limit(rt.config.max_images_per_request, self.model_api)
        capped = cap_images(messages, limit) if limit is not None else None
        if self._disabled(rt):
            # The image cap keeps a request valid: it applies with pruning off too.
            if capped is None:
                return RenderResult(messages, False, 0, 0)
            before = jsjson.length(messages)
            return RenderResult(capped, True, before, jsjson.length(capped), source=messages)
        if capped is not None:
            result = self._render(rt, capped)
            if result.threw:  # the reference's handler throws: the host keeps its own list
                return dataclasses.replace(result, messages=messages)
            if result.pruned:
                return result
            # Only the cap changed the list: no reclaim to show (as the reference).
            before = jsjson.length(messages)
            out = result.messages
            return RenderResult(
                out, True, before, jsjson.length(out), result.diagnostics, source=messages
            )
        return self._render(rt, messages)

    def _render(self, rt: Runtime, messages: list[Any]) -> RenderResult:
        source = messages
        if rt.live_summaries:
            # The placer's own list: render reads it; the host gets a copy (below) if any.
            source = rt.placer.place_shared(messages, rt.live_summaries)
        result = render(
            source,
            rt.state,
            rt.config,
            frozen=self._frozen_messages,
            spill_paths=self.spill_paths,
            supersede=rt.supersede,
        )
        for diagnostic in result.diagnostics:
            rt.sink.report(diagnostic.kind, diagnostic.dedup_key, diagnostic.detail)
        if result.threw:
            if source is not messages and result.messages is source:
                result = dataclasses.replace(result, messages=list(source))
            return result
        if source is not messages and not result.pruned:
            before = jsjson.length(messages)
            placed = list(source)
            result = RenderResult(
                placed, True, before, jsjson.length(placed), result.diagnostics, source=messages
            )
        if result.pruned:
            rt.stats.set_live_reclaim(*_reclaim_sizes(rt, result))
        rt.refresh_status()
        return result

    def absorb_live_summaries(self, messages: list[Any]) -> list[Any]:
        """``messages`` with the summaries written since the last call placed where a reload
        shows them; they are then forgotten, so a host that keeps the returned list as its
        context pays for placing each summary once instead of at every :meth:`context`."""
        rt = self._runtime()
        if not rt.live_summaries:
            return messages
        out = rt.placer.place(messages, rt.live_summaries)
        rt.live_summaries.clear()
        return out

    # ------------------------------------------------------------------ commands

    def capture_pending(self) -> list[Any]:
        """The batches a flush would summarize now (rescan + trim + grouping; no LLM work)."""
        return self._runtime().capture_pending()

    async def flush_now(self, *, on_progress: Optional[ProgressCallback] = None) -> FlushResult:
        """Summarize everything pending now (``/pruner now``; runtime delivery).

        With pruning disabled nothing is summarized (the result's reason is ``"disabled"``)
        and the Condenser warns once, as ``/pruner now`` and ``pi-condense flush`` refuse."""
        rt = self._runtime()
        if self._disabled(rt):
            return FlushResult(False, "disabled")
        options = FlushOptions(
            trigger="manual",
            delivery="runtime",
            previewed_batches=rt.capture_pending(),
            on_progress=on_progress,
        )
        return await flush_pending(rt, options)

    async def compact(self) -> ChainRunResult:
        """Compress every closed chain outside the recovery grace window (``/pruner compact``)."""
        rt = self._runtime()
        messages = [
            e["message"]
            for e in self._session.branch()
            if e.get("type") == "message" and e.get("message")
        ]
        try:
            result = await compact_all(_chain_deps(rt), messages)
        except ChainCompressionError as exc:
            _count_fusions(rt, exc.partial)
            if not rt.config.is_reference:
                rt.resync()
            raise
        _count_fusions(rt, result)
        if result.compressed:
            lower_floor_by_chains(rt.supersede, result.entries)
            rt.stats.add_chains_compressed(result.compressed)
            rt.append("context-prune-stats", rt.stats.snapshot())
            rt.emit_cost()
        return result

    def render(self, leaf: Optional[str] = None) -> RenderResult:
        """Render the session's own context (at ``leaf``, default the current leaf) without
        writing anything; the loaded state is reused for the current branch."""
        if leaf is None or leaf == self._session.leaf_id:
            messages = self._session.build_context().messages
            state = self.state
        else:
            messages = self._session.build_context(leaf).messages
            state = PrunerState.from_session(self._session, leaf)
        return render(messages, state, self.config, spill_paths=self.spill_paths)


# ------------------------------------------------------------------------------ chains seam


def _chain_deps(rt: Runtime) -> ChainDeps:
    thinking = rt.config.summarizer_thinking

    async def fuse(prompt: str) -> Optional[Completion]:
        request = CompletionRequest(
            prompt=prompt,
            kind="range",
            timestamp=rt.clock(),
            thinking=None if thinking == "default" else thinking,
        )
        return await rt.summarize(request)

    def append(custom_type: str, data: Any) -> None:
        rt.append(custom_type, data)

    def report(kind: str, dedup_key: str, detail: str) -> None:
        rt.sink.report(kind, dedup_key, detail)

    return ChainDeps(
        state=rt.state,
        config=rt.config,
        append=append,
        now=rt.clock,
        fuse=fuse,
        diagnostics=report,
        session_dir=rt.session.session_dir,
        session_id=rt.session.session_id,
        write_blob=rt.write_blob,
        scan_memo=rt.scan_memo,
    )


def _count_fusions(rt: Runtime, result: ChainRunResult) -> None:
    for usage in result.fusion_usages:
        rt.stats.add(usage)
    rt.stats.add_ranges_summarized(result.ranges_summarized)


async def _chains_in_flush(rt: Runtime, branch_messages: list[Any], closing: Any) -> list[str]:
    try:
        # Only the block ids are used: the chains already compressed are not listed.
        result = await compress_chains_in_flush(
            _chain_deps(rt), branch_messages, closing, report_compressed=False
        )
    except ChainCompressionError as exc:
        _count_fusions(rt, exc.partial)
        raise
    _count_fusions(rt, result)
    lower_floor_by_chains(rt.supersede, result.entries)
    return result.block_ids


def _warn_config(config: Config) -> None:
    """The config's warnings (unknown keys with the closest known one, values that fell back
    to defaults) as CondenseWarnings, each once per process: the CLI prints the same ones."""
    for text in config.warnings:
        warn_once(f"pi-condense: warning: {text}")


def _reclaim_sizes(rt: Runtime, result: RenderResult) -> tuple[int, int]:
    """The reference's live reclaim figure of a pruning render; images are looked for (a
    walk over both lists) only when the branch holds one."""
    if rt.facts().has_images:
        return result.before_size, result.after_size
    source = result.source if result.source is not None else result.messages
    return (
        sized_without_images(result.before_chars, len(source)),
        sized_without_images(result.after_chars, len(result.messages)),
    )
